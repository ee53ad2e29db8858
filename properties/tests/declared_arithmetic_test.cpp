// What a kernel declares about its arithmetic beyond one format per place: inputs
// rounded on entry, a softmax sum kept apart from the P.V accumulator, P.V summed before
// normalising, and precision per internal path. Each changes how attest judges; a kernel that
// rounds that way and does not say so fails gate 2.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "attest/kernels/builtin_kernels.h"
#include "attest/properties/compare.h"
#include "attest/properties/oracle.h"
#include "attest/properties/precision_gate.h"
#include "attest/properties/precision_limit.h"
#include "attest/properties/properties.h"

namespace attest {
namespace {

// Computes with the model kernel of `actual` (per path: "long" from Tk >= 128, else "short") and
// declares `declared`, with `paths` as its path precisions.
class Declaring final : public Kernel {
 public:
  Declaring(Precision actual_short, Precision actual_long, Precision declared,
            std::map<std::string, Precision> paths = {})
      : short_(make_model_kernel(actual_short)),
        long_(make_model_kernel(actual_long)),
        declared_(declared),
        paths_(std::move(paths)) {}
  Declaring(Precision actual, Precision declared) : Declaring(actual, actual, declared) {}
  std::string name() const override { return "declaring"; }
  Capabilities capabilities() const override {
    Capabilities c = short_->capabilities();
    c.precision = declared_;
    c.path_precision = paths_;
    return c;
  }
  void forward(const Problem& p, std::span<float> o, std::span<float> lse) const override {
    path_ = p.shape.k_len >= 128 ? "long" : "short";
    (path_ == "long" ? long_ : short_)->forward(p, o, lse);
  }
  std::string last_path() const override { return path_; }

 private:
  std::unique_ptr<Kernel> short_, long_;
  Precision declared_;
  std::map<std::string, Precision> paths_;
  mutable std::string path_ = "short";
};

// One head, `tq` queries against tk keys, Dk = Dv = 16, values uniform in [-1, 1].
Problem uniform_problem(int tq, int tk, unsigned seed = 7) {
  Problem p;
  p.shape = {1, 1, 1, tq, tk, 16, 16};
  p.resize_buffers();
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  for (auto* v : {&p.q, &p.k, &p.v})
    for (float& x : *v) x = unit(rng);
  return p;
}

// tk keys with equal scores (Q = K = 0) and every value `value`: the exact output is `value`.
Problem equal_keys(int tk, float value) {
  Problem p;
  p.shape = {1, 1, 1, 1, tk, 1, 1};
  p.resize_buffers();
  std::fill(p.v.begin(), p.v.end(), value);
  return p;
}

Precision f16_pv_unnormalised() {
  Precision p;
  p.k = p.v = Scalar::kF16;
  p.accumulator = Scalar::kF16;
  p.weight_sum = Scalar::kF32;
  p.pv_unnormalised = true;
  return p;
}

TEST(DeclaredArithmetic, UnnormalisedF16SumOverflowsWhereANormalisedOneDoesNotAndStagnates) {
  // The numbers of a real library's f16 P.V sum before normalising.
  Precision normalised = f16_pv_unnormalised();
  normalised.pv_unnormalised = false;
  const auto unnormalised_model = make_model_kernel(f16_pv_unnormalised());
  const auto normalised_model = make_model_kernel(normalised);
  const Outputs overflowing = run_forward(*unnormalised_model, equal_keys(256, 300.0f));
  EXPECT_TRUE(std::isinf(overflowing.o[0])) << overflowing.o[0];                            // 256 x 300 > 65504
  EXPECT_NEAR(run_forward(*normalised_model, equal_keys(256, 300.0f)).o[0], 300.0f, 2.0f);  // 256 f16 adds of 1.17
  const Outputs stagnating = run_forward(*unnormalised_model, equal_keys(4096, 1.0f));
  EXPECT_FLOAT_EQ(stagnating.o[0], 0.5f);  // 2048 + 1 rounds back to 2048 in f16, divided by an f32 4096
  EXPECT_EQ(
      f16_pv_unnormalised().summary(),
      "q f32, k f16, v f16, o f32, scores f32, P not rounded, P.V accumulator f16, weight sum f32, P.V unnormalised");
}

TEST(DeclaredArithmetic, TwoAccumulatorsDeclaredPassUndeclaredFail) {
  Problem p = uniform_problem(2, 256);
  for (float& x : p.k) x = round_to(x, Scalar::kF16);
  for (float& x : p.v) x = round_to(x, Scalar::kF16);
  p.storage = {Scalar::kF32, Scalar::kF16, Scalar::kF16};
  Oracle oracle;
  Precision storage_only;
  storage_only.k = storage_only.v = Scalar::kF16;
  const Declaring honest(f16_pv_unnormalised(), f16_pv_unnormalised());
  const Declaring lying(f16_pv_unnormalised(), storage_only);
  EXPECT_TRUE(matches_reference(p, honest, oracle).passed);
  const Verdict truth = precision_gate(p, honest, oracle);
  EXPECT_TRUE(truth.passed && truth.exercised) << truth.detail;
  const Verdict lie = precision_gate(p, lying, oracle);
  EXPECT_FALSE(lie.passed) << lie.detail;
  // The bound follows both accumulators: the f32 softmax sum keeps the LSE's bound at f32's size.
  const Reference& ref = oracle.reference(p);
  const Capabilities caps = honest.capabilities();
  Precision both_f16 = f16_pv_unnormalised();
  both_f16.weight_sum.reset();
  EXPECT_LT(lse_bound(p, ref, 0, numerics_of(caps, p)), lse_bound(p, ref, 0, numerics_of(caps, both_f16, p)) / 10);
}

TEST(DeclaredArithmetic, RoundingOnEntryIsChargedAndNamed) {
  const Problem p = uniform_problem(2, 256);  // f32 storage: what attest sends is unchanged
  Oracle oracle;
  Precision entry;
  entry.q_entry = entry.k_entry = entry.v_entry = Scalar::kF16;
  const Declaring honest(entry, entry);
  const Declaring lying(entry, Precision{});
  const Verdict bound = matches_reference(p, honest, oracle);
  EXPECT_TRUE(bound.passed && bound.exercised) << bound.detail;
  const Reference& ref = oracle.reference(p);  // the bound charges each entry rounding at f16's u
  EXPECT_GT(output_bound(p, ref, 0, numerics_of(honest.capabilities(), p)),
            10 * output_bound(p, ref, 0, numerics_of(lying.capabilities(), p)));
  const Verdict truth = precision_gate(p, honest, oracle);
  EXPECT_TRUE(truth.passed && truth.exercised) << truth.detail;
  const Verdict lie = precision_gate(p, lying, oracle);
  EXPECT_FALSE(lie.passed) << lie.detail;
  EXPECT_NE(lie.detail.find("Q, K and V rounded to f16 on entry"), std::string::npos) << lie.detail;
  EXPECT_EQ(entry.summary(),
            "q/k/v/o f32, Q rounded to f16 on entry, K rounded to f16 on entry, V rounded to f16 on entry, scores f32, "
            "P not rounded, accumulator f32");
}

// Q quantized to q8 on entry (2.6: ggml's Q for a q8_0 or q4_0 K): charged as an absolute error
// of each logit, so the kernel that does it passes when it says so and fails when it does not.
TEST(DeclaredArithmetic, QQuantizedOnEntryIsChargedAndNamed) {
  const Problem p = uniform_problem(2, 256);
  Oracle oracle;
  Precision entry;
  entry.q_entry = Scalar::kQ8;
  const Declaring honest(entry, entry);
  const Declaring lying(entry, Precision{});
  const Verdict bound = matches_reference(p, honest, oracle);
  EXPECT_TRUE(bound.passed && bound.exercised) << bound.detail;
  // A worst case (the largest |q|'s step against |k|_1) over random errors: loose, not boundless.
  EXPECT_GT(bound.utilisation, 1e-3);
  EXPECT_FALSE(matches_reference(p, lying, oracle).passed);
  const Verdict truth = precision_gate(p, honest, oracle);
  EXPECT_TRUE(truth.passed && truth.exercised) << truth.detail;
  EXPECT_EQ(entry.summary(), "q/k/v/o f32, Q rounded to q8 on entry, scores f32, P not rounded, accumulator f32");
}

// f16 behind bf16 storage rounds no bf16 digit away, but flushes what lies below f16's normal
// range: one key whose V is 1e-30 enters as 0, and so does the output. The bound charged such a
// rounding only when the entry format was coarser (selfcheck seed 3, declarations 5 and 44).
TEST(DeclaredArithmetic, AFinerEntryFormatWithANarrowerRangeIsCharged) {
  Problem p = uniform_problem(1, 1);
  for (float& x : p.v) x = round_to(x * 1e-30f, Scalar::kBF16);
  for (float& x : p.k) x = round_to(x, Scalar::kBF16);
  p.storage = {Scalar::kF32, Scalar::kBF16, Scalar::kBF16};
  Precision entry;
  entry.k = entry.v = Scalar::kBF16;
  entry.k_entry = entry.v_entry = Scalar::kF16;
  EXPECT_TRUE(flushes_on_entry(Scalar::kF16, Scalar::kBF16));
  EXPECT_TRUE(flushes_on_entry(Scalar::kBF16, Scalar::kF16));   // coarser
  EXPECT_FALSE(flushes_on_entry(Scalar::kF32, Scalar::kBF16));  // used as stored
  EXPECT_FALSE(flushes_on_entry(Scalar::kF16, Scalar::kF16));   // the identity
  const Declaring honest(entry, entry);
  ASSERT_EQ(run_forward(honest, p).o[0], 0.0f);  // the honest kernel's V entered as 0
  Oracle oracle;
  const Verdict bound = matches_reference(p, honest, oracle);
  EXPECT_TRUE(bound.passed && bound.exercised) << bound.detail;
  EXPECT_EQ(entry.summary(),
            "q f32, k bf16, v bf16, o f32, K rounded to f16 on entry, V rounded to f16 on entry, scores f32, "
            "P not rounded, accumulator f32");
  // Declared without the entry rounding, the flush is an error.
  const Declaring lying(entry, Precision{.k = Scalar::kBF16, .v = Scalar::kBF16});
  EXPECT_FALSE(matches_reference(p, lying, oracle).passed);
}

// A padded query's row may hold NaN (no visible score reads it). The entry rounding's flush term
// sums |q| over query rows: counting that row made every bound NaN, and a NaN bound fails every
// comparison (selfcheck seed 11, declaration 36, once K's f16 entry behind bf16 was charged).
TEST(DeclaredArithmetic, APoisonedRowLeavesTheEntryFlushTermFinite) {
  Problem p = uniform_problem(2, 4);
  for (float& x : p.k) x = round_to(x, Scalar::kBF16);
  p.storage.k = Scalar::kBF16;
  p.mask.q_valid = {1};
  std::fill(p.q.begin() + 16, p.q.end(), std::numeric_limits<float>::quiet_NaN());  // query 1, padded
  Precision entry;
  entry.k = Scalar::kBF16;
  entry.k_entry = Scalar::kF16;
  const Declaring honest(entry, entry);
  const KernelNumerics k = numerics_of(honest.capabilities(), p);
  EXPECT_TRUE(std::isfinite(k.entry_score_absolute) && k.entry_score_absolute > 0) << k.entry_score_absolute;
  Oracle oracle;
  EXPECT_TRUE(std::isfinite(output_bound(p, oracle.reference(p), 0, k)));
}

TEST(DeclaredArithmetic, EachPathIsJudgedAtItsOwnPrecision) {
  Precision f16_acc;
  f16_acc.accumulator = Scalar::kF16;
  const Precision f32;
  Oracle oracle;
  // Declared: f16 accumulation, but f32 on the long path. The short path honours it; the long
  // path of the first kernel accumulates in f16 anyway.
  const Declaring lying_long(f16_acc, f16_acc, f16_acc, {{"long", f32}});
  const Declaring honest(f16_acc, f32, f16_acc, {{"long", f32}});
  const Problem long_case = uniform_problem(2, 256), short_case = uniform_problem(2, 64);
  const Verdict lie = precision_gate(long_case, lying_long, oracle);
  EXPECT_FALSE(lie.passed) << lie.detail;
  for (const Problem* p : {&long_case, &short_case}) {
    const Verdict truth = precision_gate(*p, honest, oracle);
    EXPECT_TRUE(truth.passed && truth.exercised) << truth.detail;
    EXPECT_TRUE(matches_reference(*p, honest, oracle).passed);
  }
  // The short path keeps its declared f16: judged at f32 it would fail.
  const Declaring short_judged_at_f32(f16_acc, f32, f32);
  EXPECT_FALSE(precision_gate(short_case, short_judged_at_f32, oracle).passed);
  // Two runs compared with each other are judged at the loosest path.
  EXPECT_EQ(honest.capabilities().loosest_precision().accumulator, Scalar::kF16);
}

// The declared arithmetic's own limits are findings with the length where they start; an f32
// declaration has none to the horizon.
TEST(DeclaredArithmetic, PrecisionLimitNamesWhereTheDeclaredArithmeticFails) {
  EXPECT_TRUE(precision_limits(Precision{}).empty());
  const std::vector<PrecisionLimit> unnormalised = precision_limits(f16_pv_unnormalised());
  ASSERT_EQ(unnormalised.size(), 2u);
  EXPECT_EQ(unnormalised[0].kind, "overflow");
  EXPECT_EQ(unnormalised[0].length, 4);  // 4 x 32752 > 65504
  EXPECT_EQ(unnormalised[1].kind, "accuracy");
  EXPECT_EQ(unnormalised[1].length, 4096);  // 0.5: the f16 sum stagnates at 2048
  Precision normalised = f16_pv_unnormalised();
  normalised.pv_unnormalised = false;
  const std::vector<PrecisionLimit> limits = precision_limits(normalised);
  ASSERT_EQ(limits.size(), 1u);  // a normalised sum never exceeds max |V|
  EXPECT_EQ(limits[0].kind, "accuracy");
  Capabilities paths;
  paths.path_precision["tiled"] = f16_pv_unnormalised();
  EXPECT_EQ(limits_text(precision_limits(paths)).substr(0, 34), "path tiled: overflow from T = 4 (4");
}

}  // namespace
}  // namespace attest
