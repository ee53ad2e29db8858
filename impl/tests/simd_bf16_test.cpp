// The bf16 building blocks against round_to and plain double loops. The packing functions and the
// dot-product micro-kernels run only where the CPU has AVX-512 BF16 (skipped elsewhere, where the
// kernel never calls them); rounding and the panel softmax serve both paths.
#include "simd_bf16.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "attest/model/precision.h"
#include "simd_ops.h"

namespace attest::kernels::bf16 {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNan = std::numeric_limits<float>::quiet_NaN();

std::vector<float> bf16_values(std::size_t n, std::mt19937& rng, float lo = -1.0f, float hi = 1.0f) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> x(n);
  for (float& v : x) v = round_to(dist(rng), Scalar::kBF16);
  return x;
}

std::uint32_t pair_of(float lo, float hi) {
  return std::uint32_t(to_bits16(lo, Scalar::kBF16)) | std::uint32_t(to_bits16(hi, Scalar::kBF16)) << 16;
}

#define REQUIRE_DOT_PRODUCTS() \
  if (!has_dot_products()) GTEST_SKIP() << "no AVX-512 BF16 on this CPU"

TEST(Bf16Ops, RoundMatchesRoundToAcrossMagnitudesTiesAndSpecials) {
  std::mt19937 rng(1);
  std::vector<float> x = {0.0f,
                          -0.0f,
                          kInf,
                          -kInf,
                          1.0f + 0x1p-8f,
                          1.0f + 0x1p-8f + 0x1p-23f,
                          1.0f + 3 * 0x1p-8f,
                          0x1p-140f,
                          -0x1p-134f,
                          3 * 0x1p-134f,
                          3.3961e38f,
                          -3.4028235e38f,
                          1e-45f};
  std::uniform_real_distribution<float> mantissa(1.0f, 2.0f);
  std::uniform_int_distribution<int> exponent(-149, 127);
  while (x.size() < 1000) x.push_back((x.size() % 2 ? -1 : 1) * std::ldexp(mantissa(rng), exponent(rng)));
  std::vector<float> r = x;
  round(r.data(), static_cast<int>(r.size()));  // 16-wide blocks, then a tail
  for (std::size_t i = 0; i < x.size(); ++i) {
    const float want = round_to(x[i], Scalar::kBF16);
    ASSERT_EQ(std::signbit(r[i]), std::signbit(want)) << x[i];
    ASSERT_EQ(r[i], want) << x[i];
  }
  std::vector<float> nan(17, kNan);
  round(nan.data(), 17);
  for (float v : nan) EXPECT_TRUE(std::isnan(v));
}

TEST(Bf16Ops, PanelSoftmaxMatchesTheOneRowFold) {
  std::mt19937 rng(2);
  for (int rows : {1, 3, 4, 5, 9})
    for (int cols : {1, 15, 16, 17, 64}) {
      const int ld = 64 + 16;
      auto s = bf16_values(std::size_t(rows) * ld, rng, -30.0f, 30.0f);
      for (int r = 0; r < rows; ++r) {
        if (r % 3 == 1) std::fill_n(&s[std::size_t(r) * ld], cols, -kInf);  // a fully masked row
        s[std::size_t(r) * ld + (r * 7) % cols] = -kInf;                    // a masked key
      }
      std::vector<float> row_max(rows), row_sum(rows), rescale(rows, 42.0f);
      for (int r = 0; r < rows; ++r) {
        row_max[r] = r % 2 ? -kInf : 10.0f * r - 20.0f;  // no visible key yet, or a running max
        row_sum[r] = r % 2 ? 0.0f : 1.5f;
      }
      auto s2 = s, max2 = row_max, sum2 = row_sum, rescale2 = rescale;
      softmax_fold_rows(s.data(), rows, ld, cols, row_max.data(), row_sum.data(), rescale.data());
      simd::softmax_fold_rows(s2.data(), rows, ld, cols, max2.data(), sum2.data(), rescale2.data());
      for (int r = 0; r < rows; ++r) {
        ASSERT_EQ(row_max[r], max2[r]) << rows << "x" << cols << " row " << r;
        ASSERT_EQ(rescale[r], rescale2[r]) << rows << "x" << cols << " row " << r;
        ASSERT_FLOAT_EQ(row_sum[r], sum2[r]) << rows << "x" << cols << " row " << r;
        for (int c = 0; c < cols; ++c) ASSERT_EQ(s[r * ld + c], s2[r * ld + c]) << rows << "x" << cols;
      }
    }
}

TEST(Bf16Dot, PackRowsPairsNeighboursAndChecksValues) {
  REQUIRE_DOT_PRODUCTS();
  std::mt19937 rng(3);
  for (int rows : {1, 2, 5})
    for (int cols : {1, 2, 31, 32, 33, 64, 70}) {
      const int ld_src = cols + 3, ld_dst = (cols + 1) / 2 + 5;  // pairs past the row are 0
      const auto src = bf16_values(std::size_t(rows) * ld_src, rng);
      std::vector<std::uint32_t> dst(std::size_t(rows) * ld_dst, 0xDEADBEEF);
      const PackCheck check = pack_rows(src.data(), rows, cols, ld_src, dst.data(), ld_dst, kTinyInput);
      EXPECT_TRUE(check.dot_safe());
      for (int r = 0; r < rows; ++r)
        for (int k = 0; k < ld_dst; ++k) {
          const float lo = 2 * k < cols ? src[r * ld_src + 2 * k] : 0.0f;
          const float hi = 2 * k + 1 < cols ? src[r * ld_src + 2 * k + 1] : 0.0f;
          ASSERT_EQ(dst[r * ld_dst + k], pair_of(lo, hi)) << rows << "x" << cols << " at " << r << "," << k;
        }
    }
  std::vector<float> row = {0.5f, 1e-20f, 0.0f, -0.0f};
  std::vector<std::uint32_t> out(2);
  EXPECT_TRUE(pack_rows(row.data(), 1, 4, 4, out.data(), 2, kTinyInput).tiny);  // 1e-20 < 2^-48
  EXPECT_FALSE(pack_rows(row.data(), 1, 4, 4, out.data(), 2, 1e-30f).tiny);     // zeros are not tiny
  row[0] = kNan;
  EXPECT_TRUE(pack_rows(row.data(), 1, 4, 4, out.data(), 2, 1e-30f).nonfinite);
  row[0] = round_to(1e-40f, Scalar::kBF16);  // subnormal: flushed by the conversion, so reported
  EXPECT_TRUE(pack_rows(row.data(), 1, 4, 4, out.data(), 2, 1e-30f).tiny);
}

TEST(Bf16Dot, PackRowPairsInterleavesRowsAndPackTransposedTransposes) {
  REQUIRE_DOT_PRODUCTS();
  std::mt19937 rng(4);
  for (int rows : {1, 2, 7, 16, 33, 64})
    for (int cols : {1, 15, 16, 17, 64, 80}) {
      const int ld_src = cols + 1;
      const auto src = bf16_values(std::size_t(rows) * ld_src, rng);
      // pairs across rows: dst[k][c] = (src[2k][c], src[2k + 1][c])
      const int ld_pairs = cols + 9;
      std::vector<std::uint32_t> pairs(std::size_t((rows + 1) / 2) * ld_pairs, 0xDEADBEEF);
      EXPECT_TRUE(pack_row_pairs(src.data(), rows, cols, ld_src, pairs.data(), ld_pairs, kTinyInput).dot_safe());
      for (int k = 0; k < (rows + 1) / 2; ++k)
        for (int c = 0; c < ld_pairs; ++c) {
          const float lo = c < cols ? src[2 * k * ld_src + c] : 0.0f;
          const float hi = c < cols && 2 * k + 1 < rows ? src[(2 * k + 1) * ld_src + c] : 0.0f;
          ASSERT_EQ(pairs[k * ld_pairs + c], pair_of(lo, hi)) << rows << "x" << cols << " at " << k << "," << c;
        }
      // pairs along rows, transposed: dst[k][c] = (src[c][2k], src[c][2k + 1])
      const int ld_t = (rows + 15) / 16 * 16 + 16, k_pairs = (cols + 1) / 2;
      std::vector<std::uint32_t> t(std::size_t(k_pairs) * ld_t, 0xDEADBEEF);
      EXPECT_TRUE(pack_transposed(src.data(), rows, cols, ld_src, t.data(), ld_t, kTinyInput).dot_safe());
      for (int k = 0; k < k_pairs; ++k)
        for (int c = 0; c < ld_t; ++c) {
          const float lo = c < rows ? src[c * ld_src + 2 * k] : 0.0f;
          const float hi = c < rows && 2 * k + 1 < cols ? src[c * ld_src + 2 * k + 1] : 0.0f;
          ASSERT_EQ(t[k * ld_t + c], pair_of(lo, hi)) << rows << "x" << cols << " at " << k << "," << c;
        }
    }
}

TEST(Bf16Dot, ScoresMatchDoubleDotProducts) {
  REQUIRE_DOT_PRODUCTS();
  std::mt19937 rng(5);
  for (int rows : {1, 3, 4, 5, 9})
    for (int dk : {1, 7, 16, 64, 128})
      for (int keys : {1, 15, 33, 64}) {
        const int ld = 64, width = (keys + 15) / 16 * 16, dk2 = (dk + 1) / 2;
        const auto q = bf16_values(std::size_t(rows) * dk, rng), k = bf16_values(std::size_t(keys) * dk, rng);
        std::vector<std::uint32_t> q2(std::size_t(rows) * dk2), kt2(std::size_t(dk2) * ld);
        pack_rows(q.data(), rows, dk, dk, q2.data(), dk2, kTinyInput);
        pack_transposed(k.data(), keys, dk, dk, kt2.data(), ld, kTinyInput);
        std::vector<float> s(std::size_t(rows) * ld, 42.0f);
        scores(q2.data(), rows, dk2, kt2.data(), ld, width, 0.5f, s.data());
        for (int r = 0; r < rows; ++r)
          for (int c = 0; c < ld; ++c) {
            if (c >= width) {
              ASSERT_EQ(s[r * ld + c], 42.0f);  // past the width: untouched
              continue;
            }
            double want = 0.0, magnitude = 0.0;
            for (int i = 0; c < keys && i < dk; ++i) {
              want += double(q[r * dk + i]) * k[c * dk + i];
              magnitude += std::fabs(double(q[r * dk + i]) * k[c * dk + i]);
            }
            // Products are exact; each of the dk additions rounds once in f32.
            ASSERT_NEAR(s[r * ld + c], 0.5 * want, 0.5 * magnitude * dk * 0x1p-24 + 1e-30)
                << rows << "x" << dk << "x" << keys;
          }
      }
}

TEST(Bf16Dot, AccumulateMatchesDoubleLoopAndRefusesTinyAccumulators) {
  REQUIRE_DOT_PRODUCTS();
  std::mt19937 rng(6);
  for (int rows : {1, 2, 4, 5})
    for (int dv : {1, 16, 17, 64, 80, 128})
      for (int cols : {1, 2, 37, 64}) {
        const int ld = 64, ld2 = 32, cols2 = (cols + 1) / 2;
        auto p = bf16_values(std::size_t(rows) * ld, rng, 0.0f, 1.0f);
        for (int r = 0; r < rows; ++r) p[r * ld + (r % cols)] = 0.0f;  // a masked key
        const auto v = bf16_values(std::size_t(cols) * dv, rng);
        auto acc = bf16_values(std::size_t(rows) * dv, rng);
        const auto acc0 = acc, rescale = bf16_values(rows, rng, 0.0f, 1.0f);
        std::vector<std::uint32_t> p2(std::size_t(rows) * ld2), v2(std::size_t(ld2) * dv);
        pack_rows(p.data(), rows, cols, ld, p2.data(), ld2, kTinyWeight);
        pack_row_pairs(v.data(), cols, dv, dv, v2.data(), dv, kTinyInput);
        ASSERT_TRUE(accumulate(acc.data(), rows, dv, rescale.data(), p2.data(), ld2, cols2, v2.data()));
        for (int r = 0; r < rows; ++r)
          for (int d = 0; d < dv; ++d) {
            double want = double(acc0[r * dv + d]) * rescale[r], magnitude = std::fabs(want);
            for (int c = 0; c < cols; ++c) {
              want += double(p[r * ld + c]) * v[c * dv + d];
              magnitude += std::fabs(double(p[r * ld + c]) * v[c * dv + d]);
            }
            ASSERT_NEAR(acc[r * dv + d], want, magnitude * (cols + 2) * 0x1p-24) << rows << "x" << dv << "x" << cols;
          }
      }
  // A rescaled accumulator the dot product would flush: refused, nothing written.
  std::vector<float> acc = {1.0f, 1e-30f}, rescale = {1e-9f};
  std::vector<std::uint32_t> p2 = {pair_of(1.0f, 0.0f)}, v2 = {pair_of(1.0f, 0.0f), pair_of(1.0f, 0.0f)};
  EXPECT_FALSE(accumulate(acc.data(), 1, 2, rescale.data(), p2.data(), 1, 1, v2.data()));
  EXPECT_EQ(acc[0], 1.0f);
  EXPECT_EQ(acc[1], 1e-30f);
}

}  // namespace
}  // namespace attest::kernels::bf16
