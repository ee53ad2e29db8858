// The backward checks on inputs that must not pass for free: a problem float cannot hold is not
// evidence, and a backward that leaves gradients unwritten or writes past them fails.
#include <gtest/gtest.h>

#include "attest/builtin_kernels.h"
#include "attest/properties.h"
#include "attest/property_driver.h"

namespace attest {
namespace {

Problem small(float q_value, float k_value, int keys = 3) {
  Problem p;
  p.shape = {.batch = 1, .heads = 1, .kv_heads = 1, .q_len = 2, .k_len = keys, .head_dim = 1, .value_dim = 2};
  p.resize_buffers();
  for (float& x : p.q) x = q_value;
  for (std::size_t i = 0; i < p.k.size(); ++i) p.k[i] = k_value * float(i + 1);
  for (std::size_t i = 0; i < p.v.size(); ++i) p.v[i] = 0.25f * float(i) - 0.5f;
  return p;
}

// One key with a logit of 1e10: the float LSE is off by hundreds, so the weight's bound, and with it
// every gradient element's, is past FLT_MAX.
TEST(BackwardChecks, AProblemFloatCannotHoldIsNotEvidence) {
  const auto kernel = make_loop_kernel();
  Oracle oracle;
  const Problem p = small(1e5f, 1e5f, 1);
  for (auto check : {gradient_matches_reference, gradient_dv_is_pt_do, gradient_precision_gate}) {
    const Verdict v = check(p, *kernel, oracle);
    EXPECT_TRUE(v.passed) << v.detail;
    EXPECT_FALSE(v.exercised) << v.property << " passed a problem whose every bound is infinite";
  }
  EXPECT_TRUE(gradient_matches_reference(small(0.5f, 0.25f), *kernel, oracle).exercised);
}

// A backward that writes too little, or too far.
class BrokenBackward final : public Kernel {
 public:
  explicit BrokenBackward(bool past) : inner_(make_loop_kernel()), past_(past) {}
  std::string name() const override { return past_ ? "writes-past-dk" : "skips-dv"; }
  Capabilities capabilities() const override { return inner_->capabilities(); }
  void forward(const Problem& p, std::span<float> o, std::span<float> lse) const override { inner_->forward(p, o, lse); }
  void backward(const Problem& p, const BackwardInputs& in, const GradientSpans& out) const override {
    std::vector<float> dv(out.dv.begin(), out.dv.end());
    inner_->backward(p, in, out);
    if (past_) out.dk.data()[out.dk.size()] = 0.0f;  // one float past dK: a canary
    else std::copy(dv.begin(), dv.end(), out.dv.begin());  // dV left as it came: NaN, never written
  }

 private:
  std::unique_ptr<Kernel> inner_;
  bool past_;
};

TEST(BackwardChecks, UnwrittenAndOutOfBoundsGradientsFail) {
  Oracle oracle;
  const Problem p = small(0.5f, 0.25f);
  const Verdict skipped = check_safely(find_property("gradient_matches_reference"), p, BrokenBackward(false), oracle);
  EXPECT_FALSE(skipped.passed);
  EXPECT_NE(skipped.detail.find("never written"), std::string::npos) << skipped.detail;
  const Verdict past = check_safely(find_property("gradient_matches_reference"), p, BrokenBackward(true), oracle);
  EXPECT_FALSE(past.passed);
  EXPECT_NE(past.detail.find("outside dK"), std::string::npos) << past.detail;
}

}  // namespace
}  // namespace attest
