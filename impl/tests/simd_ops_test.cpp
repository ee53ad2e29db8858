// The vectorized building blocks against plain double-precision loops, at sizes that cover the
// 64- and 16-wide blocks and every scalar tail.
#include "simd_ops.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

namespace attest::kernels::simd {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

std::vector<float> random_values(std::size_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> x(n);
  for (float& v : x) v = dist(rng);
  return x;
}

double ulps_between(float got, double want) {
  const float want_f = static_cast<float>(want);
  const double ulp = std::nextafter(want_f, kInf) - want_f;
  return std::abs(got - want) / ulp;
}

TEST(SimdOps, ExpIsWithinTwoUlpsAndHandlesMaskedAndNan) {
  std::vector<float> x;
  for (float v = -103.0f; v <= 0.0f; v += 0.01f) x.push_back(v);
  const std::size_t finite = x.size();
  x.insert(x.end(), {-kInf, -1e30f, std::numeric_limits<float>::quiet_NaN()});
  std::vector<float> e = x;
  exp_shift_sum(e.data(), static_cast<int>(e.size()), 0.0f);
  double worst = 0.0;
  for (std::size_t i = 0; i < finite; ++i) worst = std::max(worst, ulps_between(e[i], std::exp(double(x[i]))));
  EXPECT_LE(worst, 2.0);  // the exp_ulps capability the fast kernels declare
  EXPECT_EQ(e[finite], 0.0f);
  EXPECT_EQ(e[finite + 1], 0.0f);
  EXPECT_TRUE(std::isnan(e[finite + 2]));
}

TEST(SimdOps, ScoresMatchDoubleDotProducts) {
  std::mt19937 rng(1);
  for (int rows : {1, 3, 4, 5, 9})
    for (int dk : {1, 7, 16, 64})
      for (int ld : {1, 15, 16, 33, 64, 80, 128}) {
        const auto q = random_values(std::size_t(rows) * dk, rng), kt = random_values(std::size_t(dk) * ld, rng);
        const int width = ld > 20 ? ld - 17 : ld;  // a width below ld: the rest stays untouched
        std::vector<float> s(std::size_t(rows) * ld, 42.0f);
        scores(q.data(), rows, dk, kt.data(), ld, width, 0.5f, s.data());
        for (int r = 0; r < rows; ++r)
          for (int c = 0; c < ld; ++c) {
            if (c >= width) {
              ASSERT_EQ(s[r * ld + c], 42.0f);
              continue;
            }
            double want = 0.0;
            for (int k = 0; k < dk; ++k) want += double(q[r * dk + k]) * kt[k * ld + c];
            ASSERT_NEAR(s[r * ld + c], 0.5 * want, 1e-5 * dk) << rows << "x" << dk << "x" << ld;
          }
      }
}

TEST(SimdOps, AccumulateSkipsZeroWeightsEvenOverNanValues) {
  std::mt19937 rng(2);
  for (int rows : {1, 2, 4, 5})
    for (int dv : {1, 16, 17, 64, 80})
      for (int cols : {1, 16, 37}) {
        const int ld = cols + 3;
        auto p = random_values(std::size_t(rows) * ld, rng), v = random_values(std::size_t(cols) * dv, rng);
        auto acc = random_values(std::size_t(rows) * dv, rng);
        const std::vector<float> acc0 = acc, rescale = random_values(rows, rng);
        for (int r = 0; r < rows; ++r) p[r * ld + (r % cols)] = 0.0f;  // one masked key per row
        if (rows > 1) {  // a key masked in every row holds NaN: it must not reach any row
          for (int r = 0; r < rows; ++r) p[r * ld + cols - 1] = 0.0f;
          for (int d = 0; d < dv; ++d) v[(cols - 1) * dv + d] = std::numeric_limits<float>::quiet_NaN();
        }
        rescale_accumulate_rows(acc.data(), rows, dv, rescale.data(), p.data(), ld, cols, v.data());
        for (int r = 0; r < rows; ++r)
          for (int d = 0; d < dv; ++d) {
            double want = double(acc0[r * dv + d]) * rescale[r];
            for (int c = 0; c < cols; ++c)
              if (p[r * ld + c] != 0.0f) want += double(p[r * ld + c]) * v[c * dv + d];
            ASSERT_NEAR(acc[r * dv + d], want, 1e-5 * cols) << rows << "x" << dv << "x" << cols;
          }
      }
}

TEST(SimdOps, SoftmaxFoldKeepsStateOnMaskedRowsAndRescalesOnNewMax) {
  const int ld = 20, cols = 18;
  std::vector<float> s(2 * ld, -kInf);
  s[ld + 3] = 2.0f;
  s[ld + 17] = 1.0f;
  std::vector<float> row_max = {0.5f, 1.0f}, row_sum = {3.0f, 4.0f}, rescale(2);
  softmax_fold_rows(s.data(), 2, ld, cols, row_max.data(), row_sum.data(), rescale.data());
  EXPECT_EQ(rescale[0], 1.0f);  // fully masked row: nothing changes, weights all 0
  EXPECT_EQ(row_max[0], 0.5f);
  EXPECT_EQ(row_sum[0], 3.0f);
  for (int c = 0; c < cols; ++c) EXPECT_EQ(s[c], 0.0f);
  EXPECT_EQ(row_max[1], 2.0f);
  EXPECT_NEAR(rescale[1], std::exp(-1.0), 1e-6);
  EXPECT_NEAR(row_sum[1], 4.0 * std::exp(-1.0) + 1.0 + std::exp(-1.0), 1e-5);
  EXPECT_EQ(s[ld + 3], 1.0f);
  EXPECT_EQ(s[ld + 0], 0.0f);
}

TEST(SimdOps, TransposeCoversFullBlocksTailsAndPadding) {
  std::mt19937 rng(3);
  for (int rows : {1, 15, 16, 33, 64})
    for (int cols : {1, 16, 20, 64}) {
      const int ld = rows + 5;
      const auto src = random_values(std::size_t(rows) * cols, rng);
      std::vector<float> dst(std::size_t(cols) * ld, 42.0f);
      transpose(src.data(), rows, cols, dst.data(), ld);
      for (int k = 0; k < cols; ++k)
        for (int c = 0; c < ld; ++c)
          ASSERT_EQ(dst[k * ld + c], c < rows ? src[c * cols + k] : 0.0f) << rows << "x" << cols;
    }
}

}  // namespace
}  // namespace attest::kernels::simd
