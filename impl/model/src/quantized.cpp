#include "attest/model/quantized.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <utility>

namespace attest {
namespace {

constexpr float kNan = std::numeric_limits<float>::quiet_NaN();
constexpr float kLargestScale = 65504.0f;  // f16

void require_width(int width) {
  if (width < 1) throw std::invalid_argument("quantized rows: width must be >= 1");
}

// Two 4-bit codes a byte: q4 (2m and 2m + 1 in byte m) and q4_0 (ggml's: j and j + half).
bool nibbles(Scalar s) { return s == Scalar::kQ4 || s == Scalar::kQ4_0; }

// Where value i of a group of n sits in its nibble codes: the byte, and 4 for the high nibble.
// q4 pairs neighbours; q4_0 pairs the first half with the second, as ggml's block_q4_0 does.
std::pair<int, int> nibble_of(int i, int n, Scalar s) {
  if (s == Scalar::kQ4) return {i / 2, i % 2 ? 4 : 0};
  const int half = (n + 1) / 2;
  return i < half ? std::pair{i, 0} : std::pair{i - half, 4};
}

// The canonical scale of a finite group: its largest magnitude over the largest code (q4, q4_0:
// its signed largest over -8, so that value takes code -8), rounded to f16 and saturated there.
float scale_of(std::span<const float> group, Scalar s) {
  float largest = 0;
  for (float x : group)
    if (std::fabs(x) > std::fabs(largest)) largest = x;
  const float d = nibbles(s) ? largest / -8.0f : std::fabs(largest) / 127.0f;
  return std::clamp(round_to(d, Scalar::kF16), -kLargestScale, kLargestScale);
}

float code_of(float x, float d, Scalar s) {
  return std::clamp(static_cast<float>(std::nearbyint(double(x) / d)), float(code_min(s)), float(code_max(s)));
}

// One group, in place: canonical scale, codes, dequantized values.
void fit_group(std::span<float> group, Scalar s) {
  const bool any_nan = std::any_of(group.begin(), group.end(), [](float x) { return std::isnan(x); });
  const int infinite =
      static_cast<int>(std::count_if(group.begin(), group.end(), [](float x) { return std::isinf(x); }));
  if (any_nan || (infinite > 0 && infinite < static_cast<int>(group.size()))) {
    std::fill(group.begin(), group.end(), kNan);  // a NaN scale (an infinite one makes inf * 0 = NaN)
    return;
  }
  if (infinite > 0) return;  // all infinite: an infinite scale, codes of either sign
  const float d = scale_of(group, s);
  for (float& x : group) x = d == 0 ? 0.0f : d * code_of(x, d, s);  // exact: 11 x 8 significant bits
}

template <typename GroupFn>
void for_each_group(std::size_t count, int width, Scalar s, GroupFn fn) {
  require_width(width);
  const int g = group_width(s, width);
  for (std::size_t row = 0; row + width <= count; row += width)
    for (int c = 0; c < width; c += g) fn(row + c, std::min(g, width - c));
}

std::uint16_t f16_bits(float x) { return to_bits16(x, Scalar::kF16); }

}  // namespace

bool scaled(Scalar s) { return s == Scalar::kQ8 || nibbles(s) || s == Scalar::kQ8Token || s == Scalar::kQ8Head; }

int group_width(Scalar s, int width) {
  return s == Scalar::kQ8Token || s == Scalar::kQ8Head ? width : std::min(32, width);
}

int fit_width(Scalar s, int tokens, int width) { return s == Scalar::kQ8Head ? tokens * width : width; }

float canonical_scale(std::span<const float> group, Scalar s) {
  const bool any_nan = std::any_of(group.begin(), group.end(), [](float x) { return std::isnan(x); });
  const auto infinite = std::count_if(group.begin(), group.end(), [](float x) { return std::isinf(x); });
  if (any_nan || (infinite > 0 && infinite < static_cast<std::ptrdiff_t>(group.size()))) return kNan;
  if (infinite > 0) return std::numeric_limits<float>::infinity();
  return scale_of(group, s);
}
int code_min(Scalar s) { return nibbles(s) ? -8 : -127; }
int code_max(Scalar s) { return nibbles(s) ? 7 : 127; }

void fit_rows(std::span<float> values, int width, Scalar s) {
  require_width(width);
  if (values.size() % width != 0) throw std::invalid_argument("quantized rows: size is not a multiple of the width");
  if (!scaled(s)) {
    for (float& x : values) x = round_to(x, s);
    return;
  }
  // Again until nothing moves: with a subnormal scale, the refitted largest value can round to a
  // neighbouring scale (once, in practice).
  for_each_group(values.size(), width, s, [&](std::size_t at, int n) {
    const std::span<float> group = values.subspan(at, n);
    for (int pass = 0; pass < 4; ++pass) {
      const std::vector<float> before(group.begin(), group.end());
      fit_group(group, s);
      if (std::equal(group.begin(), group.end(), before.begin(),
                     [](float a, float b) { return a == b || (std::isnan(a) && std::isnan(b)); }))
        break;
    }
  });
}

bool rows_representable(std::span<const float> values, int width, Scalar s) {
  std::vector<float> fitted(values.begin(), values.end());
  fit_rows(fitted, width, s);
  for (std::size_t i = 0; i < values.size(); ++i)
    if (!(fitted[i] == values[i] || (std::isnan(fitted[i]) && std::isnan(values[i])))) return false;
  return true;
}

std::size_t stored_bytes(Scalar s, std::size_t rows, int width) {
  require_width(width);
  if (!scaled(s)) return rows * width * info(s).bytes;
  const std::size_t groups = (width + group_width(s, width) - 1) / group_width(s, width);
  const std::size_t code_bytes = nibbles(s) ? (std::size_t(width) + 1) / 2 : std::size_t(width);
  return rows * (groups * 2 + code_bytes);
}

std::vector<std::uint8_t> encode_rows(std::span<const float> values, int width, Scalar s) {
  if (!rows_representable(values, width, s))
    throw std::invalid_argument(std::string("K/V values are not exactly representable in ") + to_string(s) +
                                " (attest stores only values the format holds)");
  std::vector<std::uint8_t> out;
  out.reserve(stored_bytes(s, values.size() / width, width));
  if (s == Scalar::kE4M3 || s == Scalar::kE5M2) {
    for (float x : values) out.push_back(to_bits8(x, s));
    return out;
  }
  if (!scaled(s))
    throw std::invalid_argument(std::string("K/V storage ") + to_string(s) + " is not a quantized format");
  for_each_group(values.size(), width, s, [&](std::size_t at, int n) {
    const std::span<const float> group = values.subspan(at, n);
    const bool nan = std::isnan(group[0]), inf = std::isinf(group[0]);
    const float d = nan ? kNan : inf ? std::numeric_limits<float>::infinity() : scale_of(group, s);
    const std::uint16_t bits = f16_bits(d);
    out.push_back(bits & 0xFF);
    out.push_back(bits >> 8);
    auto code = [&](float x) {
      return nan || d == 0 ? 0 : inf ? (x > 0 ? code_max(s) : code_min(s)) : int(code_of(x, d, s));
    };
    if (nibbles(s)) {
      const std::size_t first = out.size();
      out.resize(first + (n + 1) / 2, std::uint8_t{8 << 4});  // a missing high value: code 0
      for (int i = 0; i < n; ++i) {
        const auto [byte, shift] = nibble_of(i, n, s);
        std::uint8_t& b = out[first + byte];
        b = std::uint8_t((b & ~(0xF << shift)) | (code(group[i]) + 8) << shift);
      }
    } else {
      for (float x : group) out.push_back(static_cast<std::uint8_t>(static_cast<std::int8_t>(code(x))));
    }
  });
  return out;
}

std::vector<float> decode_rows(std::span<const std::uint8_t> bytes, std::size_t rows, int width, Scalar s) {
  require_width(width);
  if (bytes.size() != stored_bytes(s, rows, width))
    throw std::invalid_argument(std::string("quantized K/V data in ") + to_string(s) + ": " +
                                std::to_string(bytes.size()) + " bytes, expected " +
                                std::to_string(stored_bytes(s, rows, width)));
  std::vector<float> out(rows * width);
  if (s == Scalar::kE4M3 || s == Scalar::kE5M2) {
    for (std::size_t i = 0; i < out.size(); ++i) out[i] = from_bits8(bytes[i], s);
    return out;
  }
  if (!scaled(s))
    throw std::invalid_argument(std::string("K/V storage ") + to_string(s) + " is not a quantized format");
  std::size_t at = 0;
  for_each_group(out.size(), width, s, [&](std::size_t first, int n) {
    const float d = from_bits16(std::uint16_t(bytes[at] | bytes[at + 1] << 8), Scalar::kF16);
    at += 2;
    for (int i = 0; i < n; ++i) {
      const auto [byte, shift] = nibble_of(i, n, s);
      const int code = nibbles(s) ? ((bytes[at + byte] >> shift) & 0xF) - 8 : static_cast<std::int8_t>(bytes[at + i]);
      out[first + i] = d * float(code);
    }
    at += nibbles(s) ? (n + 1) / 2 : n;
  });
  return out;
}

void round_on_entry(std::span<float> row, Scalar s) {
  if (s != Scalar::kQ8) {
    if (scaled(s)) throw std::invalid_argument(std::string("rounding on entry to ") + to_string(s) + ": only q8");
    for (float& x : row) x = round_to(x, s);
    return;
  }
  for (std::size_t at = 0; at < row.size(); at += 32) {
    const std::span<float> group = row.subspan(at, std::min<std::size_t>(32, row.size() - at));
    float largest = 0;
    for (float x : group) largest = std::max(largest, std::fabs(x));  // NaN: skipped, as ggml's max
    if (!std::isfinite(largest)) continue;  // poison of a padded query: no visible score reads it
    const float d = round_to(largest / 127.0f, Scalar::kF16), inverse = largest != 0 ? 127.0f / largest : 0.0f;
    for (float& x : group) x = d * std::clamp(std::nearbyint(x * inverse), -127.0f, 127.0f);
  }
}

double entry_quantization_error(double largest) {
  const double step = largest / 127;
  return step * (0.5 + 0x1p-20) + 127 * std::max(step * 0x1p-11, 0x1p-25);
}

std::uint8_t to_bits8(float x, Scalar s) {
  if (s != Scalar::kE4M3 && s != Scalar::kE5M2)
    throw std::invalid_argument("an fp8 value in a format that is not fp8 (e4m3, e5m2)");
  const bool e4m3 = s == Scalar::kE4M3;
  const int mantissa_bits = e4m3 ? 3 : 2, bias = e4m3 ? 7 : 15;
  const float r = round_to(x, s);
  const std::uint8_t sign = std::signbit(r) ? 0x80 : 0;
  if (std::isnan(r)) return e4m3 ? 0x7F : 0x7E;
  if (std::isinf(r)) return sign | 0x7C;  // e5m2 only: e4m3 saturates
  const float a = std::fabs(r);
  if (a == 0.0f) return sign;
  int exp;
  const float f = std::frexp(a, &exp);  // a = f 2^exp, f in [0.5, 1)
  const int e = exp - 1 + bias;
  if (e < 1)  // subnormal: a = m 2^(1 - bias - mantissa_bits)
    return sign | static_cast<std::uint8_t>(std::lround(std::ldexp(a, bias - 1 + mantissa_bits)));
  const int mantissa = static_cast<int>(std::lround((f * 2.0f - 1.0f) * float(1 << mantissa_bits)));
  return sign | static_cast<std::uint8_t>(e << mantissa_bits | mantissa);
}

float from_bits8(std::uint8_t bits, Scalar s) {
  if (s != Scalar::kE4M3 && s != Scalar::kE5M2)
    throw std::invalid_argument("an fp8 value in a format that is not fp8 (e4m3, e5m2)");
  const bool e4m3 = s == Scalar::kE4M3;
  const int mantissa_bits = e4m3 ? 3 : 2, bias = e4m3 ? 7 : 15, exp_all_ones = e4m3 ? 0xF : 0x1F;
  const float sign = bits & 0x80 ? -1.0f : 1.0f;
  const int exp = (bits & 0x7F) >> mantissa_bits, mantissa = bits & ((1 << mantissa_bits) - 1);
  if (e4m3 && exp == exp_all_ones && mantissa == 0x7) return kNan;  // e4m3fn: the one NaN, no infinity
  if (!e4m3 && exp == exp_all_ones) return mantissa ? kNan : sign * std::numeric_limits<float>::infinity();
  if (exp == 0) return sign * std::ldexp(float(mantissa), 1 - bias - mantissa_bits);
  return sign * std::ldexp(1.0f + float(mantissa) / float(1 << mantissa_bits), exp - bias);
}

}  // namespace attest
