// overflow_safe's edit stays inside what a float kernel can hold and what the declaration allows:
// a boosted Q survives the declared entry rounding, and no float q.k overflows.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <cmath>

#include "../src/problem_edits.h"
#include "attest/kernels/builtin_kernels.h"
#include "attest/properties/generators.h"
#include "attest/properties/oracle.h"
#include "attest/properties/properties.h"
#include "attest/properties/property_driver.h"

namespace attest {
namespace {

constexpr Scalar kFloatFormats[] = {Scalar::kF32, Scalar::kBF16, Scalar::kF16, Scalar::kE4M3, Scalar::kE5M2};

TEST(LargestInput, IsStoredExactlyAndStaysFiniteThroughTheEntryRounding) {
  for (Scalar stored : kFloatFormats)
    for (Scalar entry : kFloatFormats) {
      const float x = static_cast<float>(largest_input(stored, entry));
      EXPECT_EQ(round_to(x, stored), x) << to_string(stored) << " behind " << to_string(entry);
      EXPECT_TRUE(std::isfinite(round_to(x, entry))) << to_string(stored) << " behind " << to_string(entry);
      EXPECT_LE(x, info(entry).max_finite);
    }
  EXPECT_EQ(largest_input(Scalar::kBF16, Scalar::kF16), 65280.0);  // 65504 rounds to bf16's 65536
  EXPECT_EQ(largest_input(Scalar::kF32, Scalar::kF16), 65504.0);
  EXPECT_EQ(largest_input(Scalar::kBF16, Scalar::kF32), info(Scalar::kBF16).max_finite);
}

// The reported false alarm: Q stored in bf16, rounded to f16 on entry, boosted to the clamp.
TEST(OverflowEdit, BoostedQSurvivesAnF16EntryRounding) {
  Capabilities caps;
  caps.precision.q_entry = Scalar::kF16;
  Problem p;
  p.shape = {1, 1, 1, 2, 3, 4, 4};
  p.storage = {Scalar::kBF16, Scalar::kBF16, Scalar::kBF16};
  p.resize_buffers();
  for (std::size_t i = 0; i < p.q.size(); ++i) p.q[i] = i % 2 ? -0.5f : 0.75f;
  for (std::size_t i = 0; i < p.k.size(); ++i) p.k[i] = 0.25f * float(i % 3) - 0.25f;
  for (double target : {1e8, -1e16, 1e37}) {
    const Problem scaled = with_logits_up_to(p, target, max_abs_dot(p), caps);
    for (float q : scaled.q) EXPECT_TRUE(std::isfinite(round_to(q, Scalar::kF16))) << q << " at target " << target;
  }
}

// Records whether every problem it is handed is one a float kernel can hold.
class RangeWatcher final : public Kernel {
 public:
  explicit RangeWatcher(Capabilities caps) : caps_(std::move(caps)) {}
  std::string name() const override { return "range-watcher"; }
  Capabilities capabilities() const override { return caps_; }
  void forward(const Problem& p, std::span<float> o, std::span<float> lse) const override {
    if (!within_float_range(p)) ++outside;
    ++calls;
    loop_->forward(p, o, lse);
  }
  mutable int outside = 0, calls = 0;

 private:
  Capabilities caps_;
  std::unique_ptr<Kernel> loop_ = make_loop_kernel();
};

// Over 10,000 seeds of drawn problems, default scale only (Q alone carries the logits: the case
// that once clamped Q at FLT_MAX) and free scale: overflow_safe never sends a problem outside float range.
TEST(OverflowEdit, NeverSendsAProblemOutsideFloatRange) {
  for (bool default_scale : {true, false}) {
    Capabilities caps = make_loop_kernel()->capabilities();
    caps.contract.default_scale_only = default_scale;
    caps.contract.q_len = {1, 12};
    caps.contract.k_len = {1, 12};
    caps.contract.head_dim = {1, 16};
    const RangeWatcher kernel(caps);
    Oracle oracle;
    const rc::Gen<ProblemSpec> gen = gen_spec(caps);
    for (int seed = 0; seed < 5000; ++seed) {
      const Problem drawn = build_problem(gen(rc::Random(seed), 100).value(), caps);
      if (!caps.supports(drawn)) continue;
      overflow_safe(drawn, kernel, oracle);
      ASSERT_EQ(kernel.outside, 0) << "seed " << seed << (default_scale ? ", default scale" : "");
    }
    EXPECT_GT(kernel.calls, 5000) << "the edit reached the kernel on too few seeds";
  }
}

// The exact kernel of an f16 entry rounding passes overflow_safe (it failed on a boosted Q of 65536).
TEST(OverflowEdit, ExactKernelWithAnF16EntryRoundingPasses) {
  Precision declared;
  declared.q_entry = declared.k_entry = declared.v_entry = Scalar::kF16;
  const auto kernel = make_model_kernel(declared);
  DriveOptions options;
  options.cases = 300;
  options.seed = 20261203;
  const DriveResult r = drive_property(find_property("overflow_safe"), *kernel, options);
  EXPECT_TRUE(r.passed) << r.message;
  EXPECT_GT(r.effective, r.asked / 2);
}

}  // namespace
}  // namespace attest
