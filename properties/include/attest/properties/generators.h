// RapidCheck generators for problems (docs/design.md#generating-problems). A problem is built from a small spec
// whose fields RapidCheck shrinks one by one, shape fields first, so counterexamples end small.
// The build honours the kernel's declaration: only declared features are drawn, every size,
// width, scale and offset lies inside its contract, and lengths gather around its tiles.
#pragma once

#include <rapidcheck.h>

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "attest/kernels/kernel.h"
#include "attest/model/problem.h"
#include "attest/properties/problem_needs.h"

namespace attest {

// One feature's choice in a spec: on or off, and a parameter (window width, density, ...).
struct TermChoice {
  bool on = false;
  int param = 0;
};

// The shape axes of the coverage model (docs/design.md#coverage-model) beyond the ordinary small draws: each
// regime makes one axis large and keeps the rest small and the sequences short, so it stays
// cheap. Drawn 1 time in 10 each; shrinks to ordinary.
enum class ShapeRegime {
  kOrdinary,         // widths 1-9, 16, 32; up to 8 heads, 4 batch entries, 72 tokens
  kProductionWidth,  // Dk (and Dv) in 64, 80, 96, 112, 128, 192, 256; B, H <= 2; <= 33 tokens
  kManyHeads,        // H in 12, 16, 32, 64 with GQA ratios 1, 2, 4, 8; B = 1; widths <= 16; <= 17 tokens
  kLargeBatch,       // B in 5, 8, 12, 16; H <= 2; widths <= 16; <= 17 tokens
};
const char* to_string(ShapeRegime r);

// One class of a large axis: a production width, a head count with its GQA ratio, a batch size.
struct ShapeClass {
  ShapeRegime regime;
  int index;         // ProblemSpec::shape_class
  std::string name;  // "Dk 128", "H 64 / Hkv 8", "B 16"
};
// Every class of the large axes, the table the coverage top-ups iterate.
const std::vector<ShapeClass>& shape_classes();
// The names of the classes a problem's shape belongs to ("Dk 128", "B 16", ...; none for most).
std::vector<std::string> shape_classes_of(const Problem& p);
// Whether problems of the class lie inside the declaration (its width, heads, batch accepted).
bool shape_class_fits(const ShapeClass& k, const Capabilities& caps, const ProblemNeeds& needs);

struct ProblemSpec {
  // Shape (shrinks first).
  int shape_regime = 0;  // ShapeRegime: which axis, if any, is drawn large
  int shape_class = 0;   // which class of that axis (an index into its classes)
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
