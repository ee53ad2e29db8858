// The double-double exp and log against MPFR at 216 bits, over the whole range the reference
// uses (softmax weights: arguments <= 0; LSE: the log of a sum of weights), table edges included.
#include "double_double.h"

#include <gtest/gtest.h>

#include <boost/multiprecision/mpfr.hpp>
#include <cmath>
#include <random>

#include "reference_algorithm.h"

namespace attest::reference_detail {
namespace {

using Mpfr = boost::multiprecision::number<boost::multiprecision::mpfr_float_backend<65>>;

Mpfr to_mpfr(DoubleDouble a) { return Mpfr(a.hi()) + Mpfr(a.lo()); }

// Error relative to the result, or to 2^-960 below it: there the low part is subnormal and loses
// bits, which no weight can show (the reference's weights are relative to a maximum weight of 1).
double relative_error(DoubleDouble got, const Mpfr& want) {
  const Mpfr scale = max(abs(want), Mpfr(0x1p-960));
  return static_cast<double>(abs(to_mpfr(got) - want) / scale);
}

// Relative error at most 2^-104 per unit of k = a / ln2 (ln2 itself carries 106 bits, so the
// reduction a - k ln2 loses about log2|k| of them); as a weight e^a is relative to the row's
// largest weight 1, that is within 2^-103 of 1 for every a <= 0.
TEST(DoubleDouble, ExpHasAtLeast104BitsLessLog2K) {
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<double> wide(-700.0, 700.0), narrow(-1.0, 1.0);
  std::vector<DoubleDouble> args = {DoubleDouble(0.0), DoubleDouble(-0.0), DoubleDouble(1.0), DoubleDouble(-1e-300)};
  for (int j = -24; j <= 24; ++j)  // the table's points and the midpoints between them
    for (double d : {0.0, 1.0 / 128, -1.0 / 128}) args.push_back(DoubleDouble(j / 64.0 + d));
  for (int i = 0; i < 2000; ++i) {
    const double x = i % 2 ? wide(rng) : narrow(rng);
    args.push_back(DoubleDouble::from_parts(x, x * 0x1p-60 * narrow(rng)));
  }
  double worst = 0;  // in units of 2^-104 (1 + |k|)
  DoubleDouble worst_arg;
  for (DoubleDouble a : args) {
    const double err = relative_error(exp(a), exp(to_mpfr(a))) / (0x1p-104 * (1 + std::fabs(a.hi()) / M_LN2));
    if (err > worst) worst = err, worst_arg = a;
  }
  EXPECT_LE(worst, 1.0) << "at " << worst_arg.hi() << " + " << worst_arg.lo();
}

TEST(DoubleDouble, ExpEdges) {
  EXPECT_EQ(exp(DoubleDouble(-800.0)).hi(), 0.0);
  EXPECT_TRUE(std::isinf(exp(DoubleDouble(710.0)).hi()));
  EXPECT_TRUE(std::isnan(exp(DoubleDouble(std::nan(""))).hi()));
  EXPECT_EQ(exp(DoubleDouble(-std::numeric_limits<double>::infinity())).hi(), 0.0);
}

TEST(DoubleDouble, LogHasAtLeast100Bits) {
  std::mt19937_64 rng(12);
  std::uniform_real_distribution<double> exponent(-30.0, 30.0);
  double worst = 0;
  for (int i = 0; i < 1000; ++i) {
    const DoubleDouble a(std::pow(10.0, exponent(rng)));
    const Mpfr want = log(to_mpfr(a));
    worst = std::max(worst, static_cast<double>(abs(to_mpfr(log(a)) - want) / max(Mpfr(1), abs(want))));
  }
  EXPECT_LE(worst, 0x1p-100);
}

// compute_reference_fast takes an FMA-compiled clone where the CPU has FMA; this test's own
// instantiation is compiled for baseline x86-64 (fma from the library): both exact, so equal.
TEST(DoubleDouble, FmaCloneOfTheReferenceIsBitIdentical) {
  Problem p;
  p.shape = {.batch = 1, .heads = 2, .kv_heads = 1, .q_len = 9, .k_len = 13, .head_dim = 6, .value_dim = 5};
  p.mask.causal = true;
  p.rope.enabled = true;
  p.resize_buffers();
  std::mt19937_64 rng(5);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  for (auto* b : {&p.q, &p.k, &p.v})
    for (float& x : *b) x = normal(rng);
  const Reference fast = compute_reference_fast(p), plain = compute<DoubleDouble>(p, {}, 100);
  EXPECT_EQ(fast.o, plain.o);
  EXPECT_EQ(fast.o_residual, plain.o_residual);
  EXPECT_EQ(fast.lse, plain.lse);
  EXPECT_EQ(fast.lse_residual, plain.lse_residual);
}

}  // namespace
}  // namespace attest::reference_detail
