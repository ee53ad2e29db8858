// RapidCheck generators for problems (DESIGN.md §6). A problem is built from a small spec
// whose fields RapidCheck shrinks one by one, shape fields first, so counterexamples end small.
// The build honours the kernel's declaration: only declared features are drawn, every size,
// width, scale and offset lies inside its contract, and lengths gather around its tiles.
#pragma once

#include <array>
#include <cstdint>
#include <rapidcheck.h>
#include <string>
#include <vector>

#include "attest/kernel.h"
#include "attest/problem.h"
#include "attest/problem_needs.h"

namespace attest {

// One feature's choice in a spec: on or off, and a parameter (window width, density, ...).
struct TermChoice {
  bool on = false;
  int param = 0;
};

struct ProblemSpec {
  // Shape (shrinks first).
  int batch = 1;
  int head_config = 0;  // index into the (H, Hkv) pairs the kernel accepts
  int q_len = 1;
  int k_len = 1;
  int head_dim = 1;
  int value_dim = 1;
  // Features (each shrinks towards off), indexed by Feature.
  std::array<TermChoice, kFeatureCount> terms{};
  int q_offset_mode = 0;  // 0 bottom-right, 1 top-left, 2 explicit value
  int q_offset_value = 0;
  // Data (shrinks last).
  int input_precision = 0;  // Scalar of inputs for an f32-storage kernel
  int logit_exponent = 0;   // q and k scaled so that logits are about 10^logit_exponent
  int value_exponent = 0;   // v scaled by 10^value_exponent
  int scale_mode = 0;       // 0 default 1/sqrt(Dk), 1..: explicit scales
  std::uint64_t mask_seed = 0;
  std::uint64_t data_seed = 0;
};

// A spec generator for problems the kernel declared (its features, contract and tiles).
rc::Gen<ProblemSpec> gen_spec(const Capabilities& caps, const ProblemNeeds& needs = {});
// The problem of a spec, inside the declaration (Capabilities::supports holds, or the build
// could not satisfy an unusual contract: callers skip such a problem, with the reason).
Problem build_problem(const ProblemSpec& spec, const Capabilities& caps, const ProblemNeeds& needs = {});

// Labels for RapidCheck's distribution report: the features used, "tq<tk", "empty rows", ...
std::vector<std::string> labels_of(const Problem& p);

}  // namespace attest
