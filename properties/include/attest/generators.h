// RapidCheck generators for problems (DESIGN.md §6). A problem is built from a small spec
// whose fields RapidCheck shrinks one by one, shape fields first, so counterexamples end small.
#pragma once

#include <cstdint>
#include <rapidcheck.h>
#include <string>
#include <vector>

#include "attest/problem.h"
#include "attest/properties.h"

namespace attest {

struct ProblemSpec {
  // Shape (shrinks first).
  int batch = 1;
  int head_config = 0;  // index into kHeadConfigs: (H, Hkv) pairs with GQA ratios 1, 2, 3, 4, all
  int q_len = 1;
  int k_len = 1;
  int head_dim = 1;
  int value_dim = 1;
  // Masks and positions (each shrinks towards "off").
  bool causal = false;
  int window = 0;           // 0 = none
  int q_offset_mode = 0;    // 0 bottom-right, 1 top-left, 2 explicit value
  int q_offset_value = 0;
  bool key_padding = false;
  bool query_padding = false;
  bool segments = false;
  bool explicit_mask = false;
  int explicit_density = 0;  // 0: 90% visible, 1: 50%, 2: 10%
  bool rope = false;
  // Data (shrinks last).
  int input_precision = 0;  // InputPrecision
  int logit_exponent = 0;   // q and k scaled so that logits are about 10^logit_exponent
  int value_exponent = 0;   // v scaled by 10^value_exponent
  int scale_mode = 0;       // 0 default 1/sqrt(Dk), 1..: explicit scales
  std::uint64_t mask_seed = 0;
  std::uint64_t data_seed = 0;
};

inline constexpr std::pair<int, int> kHeadConfigs[] = {{1, 1}, {2, 2}, {2, 1}, {4, 2}, {4, 1}, {3, 1}, {4, 4}, {8, 2}};

Problem build_problem(const ProblemSpec& spec);
rc::Gen<ProblemSpec> gen_spec(const ProblemNeeds& needs = {});
// Labels for RapidCheck's distribution report ("causal", "empty rows", "gqa", "tq<tk", ...).
std::vector<std::string> labels_of(const Problem& p);

}  // namespace attest
