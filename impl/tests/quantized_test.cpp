// The quantized KV formats: fp8 rounding and bit patterns, the canonical fit of scaled groups,
// and the byte encoding a kernel receives.
#include "attest/model/quantized.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

#include "attest/model/problem.h"

namespace attest {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

TEST(Fp8, RoundsToNearestEvenAndSaturatesOrOverflowsAsTheFormatSays) {
  EXPECT_EQ(round_to(1.0625f, Scalar::kE4M3), 1.0f);   // halfway between 1 and 1.125: even
  EXPECT_EQ(round_to(1.1875f, Scalar::kE4M3), 1.25f);  // halfway between 1.125 and 1.25: even
  EXPECT_EQ(round_to(470.0f, Scalar::kE4M3), 448.0f);  // e4m3 saturates: no infinity
  EXPECT_EQ(round_to(-1e9f, Scalar::kE4M3), -448.0f);
  EXPECT_EQ(round_to(kInf, Scalar::kE4M3), 448.0f);
  EXPECT_FALSE(representable(kInf, Scalar::kE4M3));
  EXPECT_EQ(round_to(0x1p-10f, Scalar::kE4M3), 0.0f);  // below half the smallest subnormal 2^-9: even (0)
  EXPECT_EQ(round_to(0x1.8p-10f, Scalar::kE4M3), 0x1p-9f);
  EXPECT_EQ(round_to(60000.0f, Scalar::kE5M2), 57344.0f);
  EXPECT_EQ(round_to(61440.0f, Scalar::kE5M2), kInf);  // halfway to 2^16: overflows, as IEEE
  EXPECT_EQ(round_to(0x1p-17f, Scalar::kE5M2), 0.0f);
  EXPECT_TRUE(std::isnan(round_to(NAN, Scalar::kE4M3)));
}

TEST(Fp8, EveryBitPatternRoundTrips) {
  for (Scalar s : {Scalar::kE4M3, Scalar::kE5M2})
    for (int bits = 0; bits < 256; ++bits) {
      const float x = from_bits8(static_cast<std::uint8_t>(bits), s);
      ASSERT_TRUE(representable(x, s)) << to_string(s) << " 0x" << std::hex << bits;
      if (std::isnan(x)) continue;
      EXPECT_EQ(to_bits8(x, s), bits) << to_string(s) << " " << x;
    }
  EXPECT_EQ(from_bits8(0x7E, Scalar::kE4M3), 448.0f);
  EXPECT_TRUE(std::isnan(from_bits8(0x7F, Scalar::kE4M3)));
  EXPECT_EQ(from_bits8(0x7C, Scalar::kE5M2), kInf);
  EXPECT_EQ(from_bits8(0x01, Scalar::kE4M3), 0x1p-9f);
}

std::vector<float> random_rows(std::size_t n, std::uint64_t seed, double magnitude) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(-magnitude, magnitude);
  std::vector<float> x(n);
  for (float& v : x) v = static_cast<float>(u(rng));
  return x;
}

TEST(ScaledFormats, FitIsIdempotentAndWithinHalfAStepOfTheGroupScale) {
  for (Scalar s : {Scalar::kQ8, Scalar::kQ4, Scalar::kQ8Token, Scalar::kQ8Head, Scalar::kQ4_0})
    for (int width : {1, 7, 32, 40, 64, 96})
      for (double magnitude : {1e-9, 1e-6, 1.0, 1e3, 1e5}) {  // within the f16 scale's range
        std::vector<float> x = random_rows(std::size_t(width) * 5, width * 31 + int(std::log10(magnitude)), magnitude);
        std::vector<float> fitted = x;
        fit_rows(fitted, width, s);
        ASSERT_TRUE(rows_representable(fitted, width, s)) << to_string(s) << " width " << width << " m " << magnitude;
        std::vector<float> twice = fitted;
        fit_rows(twice, width, s);
        EXPECT_EQ(twice, fitted) << to_string(s);
        // Each value moves by at most half a code step (or to the saturated largest one).
        const int g = group_width(s, width);
        for (std::size_t row = 0; row < x.size(); row += width)
          for (int c0 = 0; c0 < width; c0 += g) {
            float largest = 0;
            for (int c = c0; c < std::min(width, c0 + g); ++c) largest = std::max(largest, std::fabs(x[row + c]));
            // The f16 scale's own rounding moves each code's value by 2^-11 of it, or by half f16's
            // smallest subnormal 2^-25; below 2^-25 the scale is 0 (all codes 0).
            const bool q4 = code_max(s) == 7;  // q4, q4_0
            const double step = largest / (q4 ? 8.0 : 127.0);
            // q4's codes stop at +7: a value of the other sign than the largest may lose a whole step.
            const double steps = q4 ? 1.0 : 0.5;
            const double scale_error = (q4 ? 8 : 127) * std::max(step * 0x1p-11, 0x1p-25);
            const double allowed = step < 0x1p-25 ? largest : steps * std::max(step, 0x1p-24) + scale_error;
            for (int c = c0; c < std::min(width, c0 + g); ++c)
              EXPECT_LE(std::fabs(fitted[row + c] - x[row + c]), allowed)
                  << to_string(s) << " width " << width << " at " << row + c;
          }
      }
}

TEST(ScaledFormats, SpecialGroupsHaveOneCanonicalForm) {
  std::vector<float> zero(32, 0.0f), nan_in(32, 1.0f), inf_mixed(32, 1.0f), all_inf(32, kInf);
  nan_in[5] = NAN;
  inf_mixed[3] = -kInf;
  all_inf[7] = -kInf;
  fit_rows(zero, 32, Scalar::kQ8);
  fit_rows(nan_in, 32, Scalar::kQ8);
  fit_rows(inf_mixed, 32, Scalar::kQ4);
  const std::vector<float> all_inf_before = all_inf;
  fit_rows(all_inf, 32, Scalar::kQ8);
  EXPECT_EQ(zero, std::vector<float>(32, 0.0f));
  for (float x : nan_in) EXPECT_TRUE(std::isnan(x));
  for (float x : inf_mixed) EXPECT_TRUE(std::isnan(x));  // an infinite scale: inf * 0 is NaN
  EXPECT_EQ(all_inf, all_inf_before);
  // Past the f16 scale's range the codes saturate at the largest value the format holds.
  std::vector<float> huge(32, 1e30f);
  fit_rows(huge, 32, Scalar::kQ8);
  EXPECT_EQ(huge[0], 65504.0f * 127);
}

TEST(ScaledFormats, RepresentabilityIsAGroupProperty) {
  // Representable means the canonical encoding holds it: 127 and 3 share the scale 1, 127 and
  // 0.001 no scale. A group of ones is d * q with d = 1, but its canonical scale is 1/127 rounded
  // to f16, so it is not (a kernel re-quantizing what attest sends must get the same codes back).
  std::vector<float> row(32, 0.0f);
  row[0] = 127.0f, row[1] = 3.0f;
  EXPECT_TRUE(rows_representable(row, 32, Scalar::kQ8));
  row[1] = 0.001f;
  EXPECT_FALSE(rows_representable(row, 32, Scalar::kQ8));
  EXPECT_FALSE(rows_representable(std::vector<float>(32, 1.0f), 32, Scalar::kQ8));
  // Blocks of 32 along a row: the second block has its own scale.
  std::vector<float> two(64, 0.0f);
  two[0] = 127.0f, two[40] = 0.001f;
  fit_rows(two, 64, Scalar::kQ8);
  EXPECT_EQ(two[0], 127.0f);
  EXPECT_NEAR(two[40], 0.001f, 1e-6);
  EXPECT_TRUE(rows_representable(two, 64, Scalar::kQ8));
  EXPECT_FALSE(rows_representable(two, 64, Scalar::kQ8Token));  // one scale per row: 0.001 is lost
}

TEST(ScaledFormats, EncodingRoundTripsAndHasTheDocumentedLayout) {
  for (Scalar s : {Scalar::kQ8, Scalar::kQ4, Scalar::kQ8Token, Scalar::kE4M3, Scalar::kE5M2, Scalar::kQ4_0})
    for (int width : {5, 32, 33, 64}) {
      std::vector<float> x = random_rows(std::size_t(width) * 3, width, 10.0);
      x[1] = 0.0f;
      fit_rows(x, width, s);
      const std::vector<std::uint8_t> bytes = encode_rows(x, width, s);
      EXPECT_EQ(bytes.size(), stored_bytes(s, 3, width)) << to_string(s);
      EXPECT_EQ(decode_rows(bytes, 3, width, s), x) << to_string(s) << " width " << width;
    }
  // q4: scale bits, then code + 8 two per byte, the first value in the low nibble.
  std::vector<float> row(32, 0.0f);
  row[0] = -8.0f, row[1] = 7.0f, row[2] = 1.0f;  // scale 1: codes -8, 7, 1, 0 ...
  const std::vector<std::uint8_t> q4 = encode_rows(row, 32, Scalar::kQ4);
  ASSERT_EQ(q4.size(), 18u);
  EXPECT_EQ(q4[0] | q4[1] << 8, 0x3C00);  // f16 1.0
  EXPECT_EQ(q4[2], 0xF0);                 // low nibble 0 (-8), high nibble 15 (7)
  EXPECT_EQ(q4[3], 0x89);                 // 9 (1), then 8 (0)
  // q4_0 (ggml's block_q4_0): the same values, byte j holding value j low and value j + 16 high.
  row[16] = 3.0f;
  const std::vector<std::uint8_t> q4_0 = encode_rows(row, 32, Scalar::kQ4_0);
  ASSERT_EQ(q4_0.size(), 18u);
  EXPECT_EQ(q4_0[0] | q4_0[1] << 8, 0x3C00);
  EXPECT_EQ(q4_0[2], 0xB0);  // value 0 (-8) low, value 16 (3: 11) high
  EXPECT_EQ(q4_0[3], 0x8F);  // value 1 (7) low, value 17 (0) high
  EXPECT_EQ(q4_0[4], 0x89);  // value 2 (1) low, value 18 (0) high
  // A group of 5 pairs j with j + 3; the last byte's missing high value is code 0.
  const std::vector<float> five = {-8.0f, 7.0f, 0.0f, 1.0f, -1.0f};
  EXPECT_EQ(encode_rows(five, 5, Scalar::kQ4_0), (std::vector<std::uint8_t>{0x00, 0x3C, 0x90, 0x7F, 0x88}));
  EXPECT_EQ(decode_rows(encode_rows(five, 5, Scalar::kQ4_0), 1, 5, Scalar::kQ4_0), five);
  EXPECT_EQ(stored_bytes(Scalar::kQ8, 1, 64), 68u);  // 2 x (2 + 32): 8.5 bits per value
  EXPECT_THROW(encode_rows(std::vector<float>{1.0f, 0.001f}, 2, Scalar::kQ8), std::invalid_argument);
}

// q8 on entry is ggml's quantize_row_q8_0: codes from the unrounded scale, values f16(d) * code.
TEST(ScaledFormats, QuantizingOnEntryIsGgmlsQ8_0WithinItsErrorBound) {
  std::vector<float> row(40, 0.0f);
  row[0] = 127.0f, row[1] = -63.4f, row[2] = 0.6f, row[32] = 2.0f, row[33] = 0.49f;
  round_on_entry(row, Scalar::kQ8);
  EXPECT_EQ(row[0], 127.0f);  // d = 1
  EXPECT_EQ(row[1], -63.0f);
  EXPECT_EQ(row[2], 1.0f);
  EXPECT_EQ(row[32], round_to(2.0f / 127, Scalar::kF16) * 127.0f);  // its own group: d = f16(2 / 127)
  EXPECT_EQ(row[33], round_to(2.0f / 127, Scalar::kF16) * 31.0f);
  for (double magnitude : {1e-9, 1e-5, 1.0, 1e3, 1e6}) {
    const std::vector<float> x = random_rows(64 * 4, int(std::log10(magnitude)) + 50, magnitude);
    std::vector<float> q = x;
    for (std::size_t at = 0; at < q.size(); at += 64) round_on_entry(std::span(q).subspan(at, 64), Scalar::kQ8);
    for (std::size_t g = 0; g < x.size(); g += 32) {
      float largest = 0;
      for (std::size_t i = g; i < g + 32; ++i) largest = std::max(largest, std::fabs(x[i]));
      for (std::size_t i = g; i < g + 32; ++i)
        EXPECT_LE(std::fabs(double(q[i]) - x[i]), entry_quantization_error(largest)) << magnitude << " at " << i;
    }
  }
  std::vector<float> f16_row = {1.0f + 0x1p-12f, 3.0f};
  round_on_entry(f16_row, Scalar::kF16);  // an element format: round_to each
  EXPECT_EQ(f16_row, (std::vector<float>{1.0f, 3.0f}));
  EXPECT_THROW(round_on_entry(f16_row, Scalar::kQ4), std::invalid_argument);
}

TEST(ScaledFormats, ProblemValidationChecksKAndVAGroupAtATime) {
  Problem p;
  p.shape = {1, 1, 1, 1, 2, 32, 32};
  p.resize_buffers();
  p.storage.k = p.storage.v = Scalar::kQ8;
  p.k.assign(64, 127.0f);  // scale 1, code 127
  p.v.assign(64, -254.0f);
  p.v[3] = 0.0f;
  EXPECT_NO_THROW(p.validate());
  p.k[33] = 0.001f;  // a second token whose group holds 127 and 0.001
  EXPECT_THROW(p.validate(), ProblemError);
  fit_rows(p.k, 32, Scalar::kQ8);
  EXPECT_NO_THROW(p.validate());
  p.storage.q = Scalar::kQ8;  // K/V storage only
  EXPECT_THROW(p.validate(), ProblemError);
}

}  // namespace
}  // namespace attest

namespace attest {
namespace {

// q8_head: one static scale for every token of a sequence's kv head, so a problem is checked and
// fitted a (sequence, kv head) at a time, and a token of small values loses them to its head's scale.
TEST(ScaledFormats, PerHeadScalesSpanEveryTokenOfASequencesKvHead) {
  Problem p;
  p.shape = {2, 2, 2, 1, 3, 4, 4};
  p.resize_buffers();
  p.storage.k = p.storage.v = Scalar::kQ8Head;
  EXPECT_EQ(fit_width(Scalar::kQ8Head, p.shape.k_len, p.shape.head_dim), 12);
  EXPECT_EQ(fit_width(Scalar::kQ8, p.shape.k_len, p.shape.head_dim), 4);
  // (sequence, kv head) number h = e / 12 spans [-6 (h + 1), 5 (h + 1)]: its largest magnitude is 6 (h + 1).
  // NOLINTNEXTLINE(bugprone-integer-division): e / 12 is the head number h, an integer on purpose
  for (std::size_t e = 0; e < p.k.size(); ++e) p.k[e] = p.v[e] = (float(e % 12) - 6.0f) * float(1 + e / 12);
  p.fit_to_storage();
  EXPECT_NO_THROW(p.validate());
  for (int h = 0; h < 4; ++h)
    EXPECT_EQ(canonical_scale(std::span(p.k).subspan(12 * h, 12), Scalar::kQ8Head),
              round_to(6.0f * (h + 1) / 127.0f, Scalar::kF16))
        << "head " << h;
  EXPECT_EQ(p.k[36], -127.0f * round_to(24.0f / 127.0f, Scalar::kF16)) << "the fourth head's largest: code -127";
  const float d = canonical_scale(std::span(p.k).subspan(0, 12), Scalar::kQ8Head);
  EXPECT_EQ(d, round_to(6.0f / 127.0f, Scalar::kF16));
  p.k[4] = 0.001f;  // the head's second token: below half its head's step
  EXPECT_THROW(p.validate(), ProblemError);
  p.fit_to_storage();
  EXPECT_EQ(p.k[4], 0.0f);
  EXPECT_TRUE(std::isnan(canonical_scale(std::vector<float>{1.0f, NAN}, Scalar::kQ8Head)));
  EXPECT_TRUE(std::isinf(canonical_scale(std::vector<float>{INFINITY, -INFINITY}, Scalar::kQ8Head)));
}

}  // namespace
}  // namespace attest
