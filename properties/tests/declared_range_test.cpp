// attest keeps the problems it builds inside the declared arithmetic's range: a kernel declaring f16
// scores and an f16 P.V accumulator (exact after those roundings) is never handed logits or values
// that overflow there, by the generator, the declaration fit, overflow_safe or softcap_saturates.
// Each once did (attest selfcheck found it: a correct kernel NOT CERTIFIED).
#include "../src/declared_range.h"

#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <cmath>

#include "attest/builtin_kernels.h"
#include "attest/declaration_fit.h"
#include "attest/generators.h"
#include "attest/oracle.h"
#include "attest/properties.h"
#include "attest/property_driver.h"

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

bool values_within(const Problem& p, const Capabilities& caps) {
  const double limit = declared_range(caps, p.shape.k_len).value;
  for (float v : p.v)
    if (std::isfinite(v) && std::fabs(v) > limit) return false;
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

}  // namespace
}  // namespace attest
