// round_to's minifloat formats against the textbook rounding (frexp, ldexp, nearbyint) it replaced
// for speed: the same value, bit for bit, at every edge and at a million random bit patterns.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "attest/model/precision.h"

namespace attest {
namespace {

struct Format {
  Scalar scalar;
  int digits, min_quantum_exp;
  float max_finite;
  bool saturate;
};

float textbook(float x, const Format& f) {
  if (f.saturate && std::isinf(x)) return std::copysign(f.max_finite, x);
  if (!std::isfinite(x)) return x;
  const float ax = std::fabs(x);
  int exp;
  std::frexp(ax, &exp);
  const float quantum = std::ldexp(1.0f, std::max(exp - f.digits, f.min_quantum_exp));
  float r = std::nearbyint(ax / quantum) * quantum;
  if (r > f.max_finite) r = f.saturate ? f.max_finite : std::numeric_limits<float>::infinity();
  return std::copysign(r, x);
}

const Format kFormats[] = {{Scalar::kF16, 11, -24, 65504.0f, false},
                           {Scalar::kE4M3, 4, -9, 448.0f, true},
                           {Scalar::kE5M2, 3, -16, 57344.0f, false}};

void expect_same(float x, const Format& f) {
  const float got = round_to(x, f.scalar), want = textbook(x, f);
  if (std::isnan(want)) {
    EXPECT_TRUE(std::isnan(got)) << x;
  } else {
    ASSERT_EQ(std::bit_cast<std::uint32_t>(got), std::bit_cast<std::uint32_t>(want))
        << to_string(f.scalar) << " of " << x << ": " << got << ", want " << want;
  }
}

TEST(RoundTo, MinifloatsMatchTheTextbookRoundingAtTheEdges) {
  std::vector<float> edges{0.0f,
                           1.0f,
                           65504.0f,
                           65519.99f,
                           65520.0f,
                           65536.0f,
                           131008.0f,
                           448.0f,
                           464.0f,
                           480.0f,
                           57344.0f,
                           61440.0f,
                           0x1p-24f,
                           0x1p-25f,
                           0x1.8p-25f,
                           0x1p-9f,
                           0x1p-10f,
                           0x1.8p-10f,
                           0x1p-16f,
                           0x1p-17f,
                           0x1p-126f,
                           0x1p-149f,
                           std::numeric_limits<float>::max(),
                           std::numeric_limits<float>::infinity(),
                           std::numeric_limits<float>::quiet_NaN()};
  for (int e = -30; e <= 20; ++e)  // the ties between neighbours at every exponent
    for (const float m : {1.0f, 1.5f, 1.25f, 1.0625f, 1.03125f, 1.0009765625f, 1.00048828125f, 1.99951171875f})
      edges.push_back(std::ldexp(m, e));
  for (const Format& f : kFormats)
    for (const float x : edges) {
      expect_same(x, f);
      expect_same(-x, f);
      expect_same(std::nextafter(x, 0.0f), f);
      expect_same(std::nextafter(x, std::numeric_limits<float>::infinity()), f);
    }
}

TEST(RoundTo, MinifloatsMatchTheTextbookRoundingAtRandomBitPatterns) {
  std::mt19937 rng(20261207);
  for (int n = 0; n < 1'000'000; ++n) {
    const float x = std::bit_cast<float>(static_cast<std::uint32_t>(rng()));
    for (const Format& f : kFormats) expect_same(x, f);
  }
}

}  // namespace
}  // namespace attest
