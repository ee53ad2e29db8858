#include "attest/reference/reference.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "attest/reference/error_bound.h"

namespace attest {
namespace {

Problem random_problem(std::uint64_t seed, int tq, int tk, int dk, double magnitude, bool rope) {
  Problem p;
  p.shape = {.batch = 1, .heads = 2, .kv_heads = 1, .q_len = tq, .k_len = tk, .head_dim = dk, .value_dim = 3};
  p.mask.causal = true;
  p.rope.enabled = rope;
  p.resize_buffers();
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  for (auto* b : {&p.q, &p.k, &p.v})
    for (float& x : *b) x = static_cast<float>(normal(rng) * magnitude);
  return p;
}

// The 136-bit oracle agrees with the same algorithm at 216 bits far below any float bound.
TEST(Reference, AgreesWithMpfr216Bits) {
  int cases = 0;
  for (std::uint64_t seed = 1; seed <= 6; ++seed)
    for (double magnitude : {1e-3, 1.0, 20.0})
      for (bool rope : {false, true}) {
        const Problem p = random_problem(seed, 5, 9, 4, magnitude, rope);
        const Reference lo = compute_reference(p), hi = compute_reference_high(p);
        ASSERT_GE(lo.working_bits, 113);
        ASSERT_GE(hi.working_bits, 200);
        for (std::size_t e = 0; e < lo.o.size(); ++e)
          EXPECT_LE(std::fabs(lo.o[e] - hi.o[e]), 0x1p-50 * (lo.spread[e] + 1e-300)) << e;
        for (std::size_t r = 0; r < lo.lse.size(); ++r)
          EXPECT_LE(std::fabs(lo.lse[r] - hi.lse[r]), 0x1p-50 * (std::fabs(hi.lse[r]) + 1)) << r;
        ++cases;
      }
  EXPECT_EQ(cases, 36);
}

// The double-double fast path keeps at least 100 correct bits (relative to S_r and |LSE| + 1)
// against MPFR at 216 bits, across magnitudes from 1e-3 to logits of 1e30 and with RoPE.
TEST(Reference, FastPathHasAtLeast100CorrectBits) {
  int cases = 0;
  for (std::uint64_t seed = 1; seed <= 5; ++seed)
    for (double magnitude : {1e-3, 1.0, 30.0, 1e15})
      for (bool rope : {false, true}) {
        Problem p = random_problem(seed, 7, 13, 6, magnitude, rope);
        p.mask.window = 5;
        const Reference fast = compute_reference_fast(p, {.weights = true}), high = compute_reference_high(p);
        ASSERT_TRUE(fast.finite());
        EXPECT_EQ(fast.working_bits, 100);
        // Value + residual carries the extra bits beyond double.
        auto diff = [](double a, double a_low, double b, double b_low) { return std::fabs((a - b) + (a_low - b_low)); };
        for (std::size_t e = 0; e < fast.o.size(); ++e)
          EXPECT_LE(diff(fast.o[e], fast.o_residual[e], high.o[e], high.o_residual[e]), 0x1p-100 * high.spread[e])
              << "element " << e << " magnitude " << magnitude;
        for (std::size_t r = 0; r < fast.lse.size(); ++r)
          EXPECT_LE(diff(fast.lse[r], fast.lse_residual[r], high.lse[r], high.lse_residual[r]),
                    0x1p-100 * (std::fabs(high.lse[r]) + 1));
        ++cases;
      }
  EXPECT_EQ(cases, 40);
}

// The 100-bit check can fail: long double (64 significant bits) does not pass it.
TEST(Reference, HundredBitCheckRejectsLongDouble) {
  const Problem p = random_problem(2, 7, 13, 6, 1.0, false);
  const Reference ld = compute_reference_long_double(p), high = compute_reference_high(p);
  double worst = 0;
  for (std::size_t e = 0; e < ld.o.size(); ++e)
    worst =
        std::max(worst, std::fabs((ld.o[e] - high.o[e]) + (ld.o_residual[e] - high.o_residual[e])) / high.spread[e]);
  EXPECT_GT(worst, 0x1p-100);
  EXPECT_LT(worst, 0x1p-55);
}

// long double (64-bit significand) is close to the oracle: a sanity check of the template.
TEST(Reference, LongDoubleInstantiationIsClose) {
  const Problem p = random_problem(7, 6, 11, 8, 1.0, true);
  const Reference exact = compute_reference(p), ld = compute_reference_long_double(p);
  for (std::size_t e = 0; e < exact.o.size(); ++e) EXPECT_NEAR(exact.o[e], ld.o[e], 1e-15);
}

TEST(Reference, NanInputsAreAReferenceFailure) {
  Problem p = random_problem(3, 2, 2, 2, 1.0, false);
  p.mask.causal = false;
  p.v[0] = std::nanf("");
  EXPECT_FALSE(compute_reference(p).finite());
}

TEST(Reference, MaskedNanIsNeverRead) {
  Problem p = random_problem(3, 2, 4, 2, 1.0, false);
  p.mask.kv_valid = {2};
  for (int j = 2; j < 4; ++j) p.k[j * 2] = p.v[j * 3] = std::nanf("");
  EXPECT_TRUE(compute_reference(p).finite());
}

// Mean entropy (nats) of the attention rows of a random unit-variance problem of width dk.
double mean_row_entropy(int dk, bool scaled) {
  Problem p;
  p.shape = {.batch = 1, .heads = 4, .kv_heads = 4, .q_len = 16, .k_len = 64, .head_dim = dk, .value_dim = 1};
  if (!scaled) p.scale = 1.0;
  p.resize_buffers();
  std::mt19937_64 rng(42);
  std::normal_distribution<double> normal(0.0, 1.0);
  for (auto* b : {&p.q, &p.k, &p.v})
    for (float& x : *b) x = static_cast<float>(normal(rng));
  const Reference ref = compute_reference(p, {.weights = true});
  double total = 0;
  for (double w : ref.weights)
    if (w > 0) total -= w * std::log(w);
  return total / ref.lse.size();
}

TEST(Reference, ScaleKeepsRowEntropyStableAcrossWidth) {
  const double unscaled_narrow = mean_row_entropy(8, false), unscaled_wide = mean_row_entropy(128, false);
  const double scaled_narrow = mean_row_entropy(8, true), scaled_wide = mean_row_entropy(128, true);
  RecordProperty("entropy_unscaled_8", std::to_string(unscaled_narrow));
  RecordProperty("entropy_unscaled_128", std::to_string(unscaled_wide));
  // Without 1/sqrt(Dk), 16x wider vectors make logits 4x larger: rows collapse towards one-hot.
  EXPECT_LT(unscaled_wide, 0.4 * unscaled_narrow) << unscaled_narrow << " -> " << unscaled_wide;
  EXPECT_LT(unscaled_wide, 1.0);
  // With it, the entropy stays within 20%.
  EXPECT_NEAR(scaled_wide / scaled_narrow, 1.0, 0.2) << scaled_narrow << " -> " << scaled_wide;
}

TEST(ErrorBound, GammaAndScaling) {
  EXPECT_DOUBLE_EQ(gamma_n(0, 0x1p-24), 0.0);
  EXPECT_NEAR(gamma_n(10, 0x1p-24), 10 * 0x1p-24, 1e-12);
  EXPECT_GT(gamma_n(10, 0x1p-24), 10 * 0x1p-24);
  EXPECT_TRUE(std::isinf(gamma_n(1 << 24, 0x1p-24)));
  const Problem p = random_problem(5, 4, 8, 4, 1.0, false);
  const Reference ref = compute_reference(p);
  const double f32 = output_bound(p, ref, 5, KernelNumerics::f32(0));
  KernelNumerics bf16 = KernelNumerics::f32(0);
  bf16.score_roundoff = bf16.sum_roundoff = bf16.weight_sum_roundoff = bf16.output_roundoff = 0x1p-8;
  bf16.exp_error = 0x1p-7;
  EXPECT_GT(output_bound(p, ref, 5, bf16), 1000 * f32);             // the bound follows the precision
  EXPECT_GT(output_bound(p, ref, 5, KernelNumerics::f32(1)), f32);  // and the tile count
  KernelNumerics bf16_storage = KernelNumerics::f32(0);  // only O rounded to bf16: the bound grows by its u only
  bf16_storage.output_roundoff = 0x1p-8;
  EXPECT_GT(output_bound(p, ref, 5, bf16_storage), 10 * f32);
  EXPECT_LT(output_bound(p, ref, 5, bf16_storage), output_bound(p, ref, 5, bf16));
}

// The summation structure: an f32 accumulator over 32768 keys in tiles of 64 keeps a useful
// bound where a single-precision-word model (bf16 everywhere) is vacuous.
TEST(ErrorBound, SummationStructureFollowsTheTiles) {
  EXPECT_EQ(summation_terms(32768, 0, 1), 32768 + 2);
  EXPECT_EQ(summation_terms(32768, 64, 512), 64 + 1024 + 1);
  EXPECT_LT(gamma_n(summation_terms(32768, 64, 512), 0x1p-24), 1e-4);
  EXPECT_TRUE(std::isinf(gamma_n(summation_terms(32768, 64, 512), 0x1p-8)));
}

// Seed 7 #40 of selfcheck: a sink of 1e4 takes every weight (spread 0) and a bf16 sum over 600
// one-key tiles is vacuous (infinite): the bound was inf x 0 = NaN, and an exact output failed.
TEST(ErrorBound, AVacuousSumUnderASinkIsNoNaN) {
  Problem p = random_problem(3, 1, 600, 8, 1.0, false);
  p.modifiers.sinks = {1e4f, 1e4f};
  const Reference ref = compute_reference(p);
  KernelNumerics bf16 = KernelNumerics::f32(1);
  bf16.sum_roundoff = bf16.weight_sum_roundoff = 0x1p-8;
  for (std::size_t e = 0; e < ref.o.size(); ++e) {
    EXPECT_FALSE(std::isnan(output_bound(p, ref, e, bf16))) << "element " << e;
    EXPECT_GE(output_bound(p, ref, e, bf16), 0.0) << "element " << e;
  }
}

}  // namespace
}  // namespace attest

namespace attest {
namespace {

// reference_mask is the visibility the weights report, with every mask term on.
TEST(Reference, MaskAloneMatchesTheWeightsVisibility) {
  Problem p = random_problem(4, 5, 9, 2, 1.0, false);
  p.shape.batch = 2;
  p.resize_buffers();
  p.mask.window = 4;
  p.mask.kv_valid = {8, 6};
  p.mask.q_valid = {5, 3};
  p.mask.q_segment = {0, 0, 1, 1, 1, 0, 1, 1, 1, 1};
  p.mask.k_segment = {0, 0, 0, 1, 1, 1, 1, 1, 1, 0, 0, 1, 1, 1, 1, 1, 1, 1};
  p.mask.explicit_mask.assign(2 * 5 * 9, 1);
  p.mask.explicit_mask[7] = p.mask.explicit_mask[52] = 0;
  const Reference ref = compute_reference_fast(p, {.weights = true});
  const std::vector<std::uint8_t> mask = reference_mask(p);
  ASSERT_EQ(mask.size(), std::size_t(2 * 5 * 9));
  for (int b = 0; b < 2; ++b)
    for (int h = 0; h < p.shape.heads; ++h)
      for (int ij = 0; ij < 5 * 9; ++ij) EXPECT_EQ(mask[b * 45 + ij], ref.visible[(b * p.shape.heads + h) * 45 + ij]);
}

}  // namespace
}  // namespace attest

namespace attest {
namespace {

// A sample of rows, on any number of threads, is bitwise the same rows of the full reference;
// the other rows are marked not computed, and NaN there is not a reference failure.
TEST(Reference, SampledRowsOnThreadsEqualTheFullReference) {
  Problem p = random_problem(9, 40, 57, 8, 1.0, true);
  p.shape.batch = 2;
  p.shape.heads = 4;
  p.shape.kv_heads = 2;
  p.resize_buffers();
  std::mt19937_64 rng(9);
  std::normal_distribution<double> normal(0.0, 1.0);
  for (auto* b : {&p.q, &p.k, &p.v})
    for (float& x : *b) x = static_cast<float>(normal(rng));
  p.mask.window = 17;
  p.modifiers.sinks = {0.5f, -1.0f, 2.0f, 0.0f};
  const Reference full = compute_reference_fast(p);
  const std::vector<int> sample = {39, 0, 16, 17, 0};
  for (int jobs : {1, 2, 3}) {
    const Reference part = compute_reference_fast(p, {.query_rows = sample, .jobs = jobs});
    ASSERT_EQ(part.computed.size(), full.lse.size());
    EXPECT_TRUE(part.finite());
    long computed = 0;
    for (std::size_t row = 0; row < full.lse.size(); ++row) {
      const int i = static_cast<int>(row % p.shape.q_len);
      const bool wanted = i == 0 || i == 16 || i == 17 || i == 39;
      ASSERT_EQ(part.has_row(row), wanted) << row;
      if (!wanted) continue;
      ++computed;
      EXPECT_EQ(part.lse[row], full.lse[row]) << row << " jobs " << jobs;
      for (int c = 0; c < p.shape.value_dim; ++c) {
        const std::size_t e = row * p.shape.value_dim + c;
        EXPECT_EQ(part.o[e], full.o[e]) << e << " jobs " << jobs;
        EXPECT_EQ(part.spread[e], full.spread[e]) << e;
      }
    }
    EXPECT_EQ(computed, 2 * 4 * 4);
  }
  // Every row on two threads is the full reference, bit for bit.
  const Reference threaded = compute_reference_fast(p, {.jobs = 2});
  EXPECT_TRUE(threaded.computed.empty());
  EXPECT_EQ(threaded.o, full.o);
  EXPECT_EQ(threaded.lse, full.lse);
  EXPECT_THROW(compute_reference_fast(p, {.query_rows = {40}}), std::invalid_argument);
}

}  // namespace
}  // namespace attest
