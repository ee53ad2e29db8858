// What a property needs from the problems it is given, and whether a kernel's declaration
// (features and contract) lets any problem give it. The generators aim at these needs; a
// property whose needs cannot be met is reported as not covered, with the reason.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "attest/kernels/kernel.h"

namespace attest {

struct ProblemNeeds {
  bool position_free = false;  // no positional feature (causal, window, chunk, padding, RoPE)
  bool rope = false;
  bool gqa = false;              // Hkv < H
  bool masked = false;           // at least one mask term
  bool hides_keys = false;       // keys no row sees (or a -inf bias): bottom-right causal alone hides none
  bool several_slices = false;   // B * H > 1
  int max_keys = 0;              // 0 = no limit beyond the generator's
  bool moves_positions = false;  // its check prepends keys (Tk and q_offset grow)
  bool unmasks_keys = false;     // its check makes keys the problem masks visible (a decode session's
                                 // prefill, shifted positions): never drawn with poisoned masked keys
  // When set, (Tq, Tk) are drawn from these instead (the shapes that reach one internal path).
  std::vector<std::pair<int, int>> lengths;
  // When set, the whole shape is drawn from these (the shapes that reached one internal path).
  std::vector<Shape> shapes;
  // When set, the shape regime and class drawn (generators.h): a coverage top-up of one class.
  std::optional<std::pair<int, int>> shape_class;
  // Coverage classes (coverage_model.h: "mask: none", "heads: > 8") each problem is bent into,
  // where the declaration allows: a coverage top-up of one class or pair.
  std::vector<std::string> force;
  // When set, each problem is bent into this declared path's predicate where the declaration
  // allows (a top-up of that path): its ranges, multiples and features.
  std::optional<PathPredicate> path;
};

// The (H, Hkv) pairs generated problems use, before the contract filters them.
const std::vector<std::pair<int, int>>& head_pairs();
// Those the kernel accepts (GQA only when declared; H within the contract) that meet the needs.
std::vector<std::pair<int, int>> head_configs(const Capabilities& caps, const ProblemNeeds& needs);

// Why no problem the kernel accepts can give a property what it needs (empty: some can).
std::string cannot_cover(const ProblemNeeds& needs, const Capabilities& caps);

}  // namespace attest
