// The backward checks on inputs that must not pass for free: a problem float cannot hold is not
// evidence, and a backward that leaves gradients unwritten or writes past them fails.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <utility>

#include "attest/kernels/builtin_kernels.h"
#include "attest/mutants/mutants.h"
#include "attest/properties/properties.h"
#include "attest/properties/property_driver.h"

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
  void forward(const Problem& p, std::span<float> o, std::span<float> lse) const override {
    inner_->forward(p, o, lse);
  }
  void backward(const Problem& p, const BackwardInputs& in, const GradientSpans& out) const override {
    std::vector<float> dv(out.dv.begin(), out.dv.end());
    inner_->backward(p, in, out);
    if (past_)
      out.dk.data()[out.dk.size()] = 0.0f;  // one float past dK: a canary
    else
      std::copy(dv.begin(), dv.end(), out.dv.begin());  // dV left as it came: NaN, never written
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

// A wrong backward behind a forward that reports the path "flash-forward"; its backward reports
// `backward_path` ("": none).
class ForwardPathNamed final : public Kernel {
 public:
  explicit ForwardPathNamed(std::string backward_path) : backward_path_(std::move(backward_path)) {}
  std::string name() const override { return "forward-path-named"; }
  Capabilities capabilities() const override { return inner_.capabilities(); }
  void forward(const Problem& p, std::span<float> o, std::span<float> lse) const override { inner_.forward(p, o, lse); }
  void backward(const Problem& p, const BackwardInputs& in, const GradientSpans& out) const override {
    inner_.backward(p, in, out);
  }
  std::string last_path() const override { return "flash-forward"; }
  std::string last_backward_path() const override { return backward_path_; }

 private:
  BrokenBackward inner_{false};
  std::string backward_path_;
};

// The failure line of a gradient check run after a forward (whose path must not be blamed).
std::string backward_failure(const Kernel& kernel, const std::string& property = "gradient_matches_reference") {
  Oracle oracle;
  run_forward(kernel, small(0.5f, 0.25f));
  const Verdict v = check_safely(find_property(property), small(0.5f, 0.25f), kernel, oracle);
  EXPECT_FALSE(v.passed);
  EXPECT_EQ(v.detail.find("flash-forward"), std::string::npos) << v.detail;
  return v.detail;
}

// A backward failure is never tagged with the path of the kernel's last forward: when the backward
// reports no path of its own, the tag says the path is unknown.
TEST(BackwardChecks, ABackwardFailureNamesNoForwardPath) {
  const std::string detail = backward_failure(ForwardPathNamed(""));
  EXPECT_NE(detail.find("[path: unknown (a backward call"), std::string::npos) << detail;
}

// A backward that reports its path is named by it, also by the precision gate, which calls the
// loop backward (its model) after the kernel's.
TEST(BackwardChecks, ABackwardFailureNamesTheBackwardsOwnPath) {
  for (const char* property : {"gradient_matches_reference", "gradient_precision_gate"}) {
    const std::string detail = backward_failure(ForwardPathNamed("flash-backward"), property);
    EXPECT_NE(detail.find("[path: flash-backward]"), std::string::npos) << property << ": " << detail;
  }
}

// The thread hint reaches the kernel: the built-in tiled backward gives the same bits with 1, 2 and 3
// workers, the split-K mutant does not (and gradient_deterministic says so).
TEST(BackwardChecks, TheThreadHintChangesOnlyASplitReduction) {
  Problem p;
  p.shape = {.batch = 2, .heads = 4, .kv_heads = 2, .q_len = 9, .k_len = 100, .head_dim = 8, .value_dim = 8};
  p.resize_buffers();
  for (std::size_t i = 0; i < p.q.size(); ++i) p.q[i] = float((i * 37) % 17) / 8.0f - 1.0f;
  for (std::size_t i = 0; i < p.k.size(); ++i) p.k[i] = float((i * 29) % 13) / 8.0f - 0.75f;
  for (std::size_t i = 0; i < p.v.size(); ++i) p.v[i] = float((i * 23) % 11) / 4.0f - 1.25f;
  const auto tiled = make_kernel("tiled");
  const auto split = find_mutant("backward_dq_split_by_threads").make();
  const Outputs forward = run_forward(*tiled, p);
  std::vector<float> d_o(p.o_size());
  for (std::size_t i = 0; i < d_o.size(); ++i) d_o[i] = float((i * 19) % 7) / 4.0f - 0.5f;
  auto dq_with = [&](const Kernel& k, int threads) {
    return run_backward(k, p, {forward.o, forward.lse, d_o, threads}).dq;
  };
  auto same_bits = [](const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
  };
  for (int threads : {2, 3, 4}) EXPECT_TRUE(same_bits(dq_with(*tiled, 1), dq_with(*tiled, threads))) << threads;
  EXPECT_FALSE(same_bits(dq_with(*split, 1), dq_with(*split, 2)));
  Oracle oracle;
  EXPECT_TRUE(gradient_deterministic(p, *tiled, oracle).passed);
  EXPECT_FALSE(gradient_deterministic(p, *split, oracle).passed);
}

// A causal language model's training kernel: bottom-right causal only, Tq == Tk. Its last row sees
// every key, so "keys no row sees" cannot be drawn: not covered, with the reason, never INSUFFICIENT.
class CausalTraining final : public Kernel {
 public:
  explicit CausalTraining(FeatureSet extra) : extra_(extra) {}
  std::string name() const override { return "causal-training"; }
  Capabilities capabilities() const override {
    Capabilities c = inner_->capabilities();
    c.features = FeatureSet{Feature::kCausal, Feature::kBackward} | extra_;
    c.contract.causal_required = c.contract.self_attention_only = true;
    return c;
  }
  void forward(const Problem& p, std::span<float> o, std::span<float> lse) const override {
    inner_->forward(p, o, lse);
  }
  void backward(const Problem& p, const BackwardInputs& in, const GradientSpans& out) const override {
    inner_->backward(p, in, out);
  }

 private:
  std::unique_ptr<Kernel> inner_ = make_loop_kernel();
  FeatureSet extra_;
};

TEST(BackwardChecks, MaskedKeyGradientsAreNotCoveredUnderCausalAlone) {
  const PropertyInfo& property = find_property("gradient_masked_keys_zero");
  const std::string why = not_covered_because(property, CausalTraining({}).capabilities());
  EXPECT_NE(why.find("the last row sees every key"), std::string::npos) << why;
  // Key padding hides keys from every row: then it is covered, and exercised.
  const CausalTraining padded({Feature::kKeyPadding});
  EXPECT_EQ(not_covered_because(property, padded.capabilities()), "");
  DriveOptions options;
  options.cases = 60;
  options.seed = 20261203;
  const DriveResult r = drive_property(property, padded, options);
  EXPECT_TRUE(r.passed) << r.message;
  EXPECT_GT(r.effective, 0) << r.message;
}

}  // namespace
}  // namespace attest
