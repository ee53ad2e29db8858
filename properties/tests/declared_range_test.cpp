// attest keeps the problems it builds inside the declared arithmetic's range: a kernel declaring f16
// scores and an f16 P.V accumulator (exact after those roundings) is never handed logits or values
// that overflow there, by the generator, the declaration fit, overflow_safe or softcap_saturates.
// Each once did (attest selfcheck found it: a correct kernel NOT CERTIFIED).
#include "../src/declared_range.h"

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "../src/problem_edits.h"
#include "attest/kernels/builtin_kernels.h"
#include "attest/kernels/contract.h"
#include "attest/properties/cases.h"
#include "attest/properties/declaration_fit.h"
#include "attest/properties/generators.h"
#include "attest/properties/oracle.h"
#include "attest/properties/properties.h"
#include "attest/properties/property_driver.h"
#include "attest/reference/reference.h"

namespace attest {
namespace {

Capabilities f16_arithmetic() {
  Capabilities caps = make_loop_kernel()->capabilities();
  caps.features.erase(Feature::kBackward);
  caps.features.insert(Feature::kSoftcap);
  caps.precision.scores = Scalar::kF16;
  caps.precision.accumulator = Scalar::kF16;
  caps.contract.q_len = {1, 12};
  caps.contract.k_len = {1, 12};
  caps.contract.head_dim = {1, 16};
  return caps;
}

// The V of every key some query sees (a masked key's is the input domain's).
bool values_within(const Problem& p, const Capabilities& caps) {
  const double limit = declared_range(caps, p.shape.k_len).value;
  const Shape& s = p.shape;
  const std::vector<std::vector<char>> seen = keys_seen(p);
  for (int b = 0; b < s.batch; ++b)
    for (int g = 0; g < s.kv_heads; ++g)
      for (int j = 0; j < s.k_len; ++j)
        for (int c = 0; seen[b][j] && c < s.value_dim; ++c) {
          const float v = p.v[((std::size_t(b) * s.kv_heads + g) * s.k_len + j) * s.value_dim + c];
          if (std::isfinite(v) && std::fabs(v) > limit) return false;
        }
  return true;
}

// Counts the problems it is handed outside the declared range.
class RangeWatcher final : public Kernel {
 public:
  explicit RangeWatcher(Capabilities caps) : caps_(std::move(caps)) {}
  std::string name() const override { return "range-watcher"; }
  Capabilities capabilities() const override { return caps_; }
  void forward(const Problem& p, std::span<float> o, std::span<float> lse) const override {
    if (!logits_within_declared_range(p, caps_)) ++outside;
    ++calls;
    model_->forward(p, o, lse);
  }
  mutable int outside = 0, calls = 0;

 private:
  Capabilities caps_;
  std::unique_ptr<Kernel> model_ = make_model_kernel(caps_.precision);
};

TEST(DeclaredRange, DrawnAndFittedProblemsStayInside) {
  const Capabilities caps = f16_arithmetic();
  const rc::Gen<ProblemSpec> gen = gen_spec(caps);
  int drawn_outside = 0, fitted_outside = 0;
  for (int seed = 0; seed < 3000; ++seed) {
    const Problem drawn = build_problem(gen(rc::Random(seed), 100).value(), caps);
    drawn_outside += !logits_within_declared_range(drawn, caps) || !values_within(drawn, caps);
    Problem wide = drawn;  // a grid or ladder case, drawn for any kernel: large finite Q and K
    auto widen = [](std::vector<float>& xs, Scalar storage) {
      const float largest = static_cast<float>(info(storage).max_finite);
      for (float& x : xs) x = round_to(std::clamp(x * 1e3f, -largest, largest), storage);
    };
    widen(wide.q, wide.storage.q);
    widen(wide.k, wide.storage.k);
    if (const auto fitted = fit_to_declaration(wide, caps))
      fitted_outside += !logits_within_declared_range(*fitted, caps) || !values_within(*fitted, caps);
  }
  EXPECT_EQ(drawn_outside, 0);
  EXPECT_EQ(fitted_outside, 0);
}

TEST(DeclaredRange, ScaledLogitsStayInside) {
  const Capabilities caps = f16_arithmetic();
  const RangeWatcher kernel(caps);
  Oracle oracle;
  const rc::Gen<ProblemSpec> gen = gen_spec(caps);
  for (int seed = 0; seed < 300; ++seed) {
    const Problem drawn = build_problem(gen(rc::Random(seed), 100).value(), caps);
    if (!caps.supports(drawn)) continue;
    overflow_safe(drawn, kernel, oracle);
    softcap_saturates(drawn, kernel, oracle);
  }
  EXPECT_GT(kernel.calls, 300);
  EXPECT_EQ(kernel.outside, 0) << "of " << kernel.calls << " calls";
}

// The largest |x| of the K or V rows of batch 0's keys [from, to) (one kv head).
double largest(const std::vector<float>& rows, int width, int from, int to) {
  double m = 0;
  for (std::size_t e = std::size_t(from) * width; e < std::size_t(to) * width; ++e)
    m = std::max(m, double(std::fabs(rows[e])));
  return m;
}

// A problem whose padded keys hold finite poison (inputs finite: +-1e30, or masked_scored: the
// largest |k| whose scores fit) is fitted by what its visible keys need: the poison neither halves
// the visible Q and V to nothing (as it did, counted as a value the arithmetic must hold) nor is
// clipped to the contract's |V| (which covers visible keys only).
TEST(DeclaredRange, MaskedPoisonNeitherShrinksTheVisibleValuesNorIsClipped) {
  for (const InputDomain inputs : {InputDomain::kFinite, InputDomain::kMaskedScored}) {
    Capabilities caps = f16_arithmetic();
    caps.inputs = inputs;
    caps.contract.max_abs_value = 8;
    Problem p;
    p.shape = {1, 1, 1, 4, 12, 16, 16};
    p.resize_buffers();
    fill_random(p, 7);
    p.mask.kv_valid = {8};  // keys 8..11 padded: no query sees them
    for (const Poisoned which : {Poisoned::kKeys, Poisoned::kValues}) {
      Problem poisoned = p;
      ASSERT_EQ(poison(poisoned, unseen_keys(poisoned, reference_mask(poisoned)), which, caps), 4);
      const std::optional<Problem> fitted = fit_to_declaration(poisoned, caps);
      ASSERT_TRUE(fitted) << to_string(inputs);
      const std::string what = std::string(to_string(inputs)) + (which == Poisoned::kKeys ? " keys" : " values");
      // The visible inputs as drawn (unit variance: inside an f16 arithmetic's range already; a
      // masked_scored kernel's poison is scored, made to fit the range: Q may lose its rounding's worth).
      EXPECT_GE(largest(fitted->q, 16, 0, 4), largest(p.q, 16, 0, 4) / 2) << what;
      EXPECT_EQ(largest(fitted->v, 16, 0, 8), largest(p.v, 16, 0, 8)) << what;
      const std::vector<float>& rows = which == Poisoned::kKeys ? fitted->k : fitted->v;
      EXPECT_GT(largest(rows, 16, 8, 12), 100.0) << what << ": the poison was clipped";
      if (inputs == InputDomain::kMaskedScored) {
        EXPECT_TRUE(logits_within_declared_range(*fitted, caps)) << what;
      }
    }
  }
}

}  // namespace
}  // namespace attest
