#include "attest/model/precision.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <tuple>

namespace attest {
namespace {

std::uint32_t bits_of(float x) {
  std::uint32_t b;
  std::memcpy(&b, &x, sizeof b);
  return b;
}

float from_bits(std::uint32_t b) {
  float x;
  std::memcpy(&x, &b, sizeof x);
  return x;
}

// One row per format. A scaled format's range is its f16 scale's times the largest code.
constexpr std::array<ScalarInfo, kScalarCount> kScalars = {{
    {"f32", 0x1p-24, 3.4028234663852886e38, 0x1p-126, 0x1p-149, 4},
    {"bf16", 0x1p-8, 3.3895313892515355e38, 0x1p-126, 0x1p-133, 2},
    {"f16", 0x1p-11, 65504.0, 0x1p-14, 0x1p-24, 2},
    {"e4m3", 0x1p-4, 448.0, 0x1p-6, 0x1p-9, 1},
    {"e5m2", 0x1p-3, 57344.0, 0x1p-14, 0x1p-16, 1},
    {"q8", 0x1p-24, 65504.0 * 127, 0x1p-14, 0x1p-24, 1},
    {"q4", 0x1p-24, 65504.0 * 8, 0x1p-14, 0x1p-24, 1},
    {"q8_token", 0x1p-24, 65504.0 * 127, 0x1p-14, 0x1p-24, 1},
    {"q8_head", 0x1p-24, 65504.0 * 127, 0x1p-14, 0x1p-24, 1},
    {"q4_0", 0x1p-24, 65504.0 * 8, 0x1p-14, 0x1p-24, 1},
}};

}  // namespace

const ScalarInfo& info(Scalar s) { return kScalars[static_cast<std::size_t>(s)]; }
const char* to_string(Scalar s) { return info(s).name; }
double unit_roundoff(Scalar s) { return info(s).unit_roundoff; }

bool parse_scalar(const std::string& name, Scalar& out) {
  for (int i = 0; i < kScalarCount; ++i)
    if (name == kScalars[i].name) return out = static_cast<Scalar>(i), true;
  return false;
}

std::string scalar_names() {
  std::string out;
  for (int i = 0; i < kScalarCount; ++i)
    out += std::string(i == 0 ? "" : i + 1 == kScalarCount ? " or " : ", ") + kScalars[i].name;
  return out;
}

double largest_input(Scalar stored, Scalar entry) {
  // The largest value the storage holds at or below the entry format's largest: bf16 storage
  // behind an f16 entry rounding ends at 65280, since 65504 rounds to bf16's 65536 (inf in f16).
  const double largest = std::min(info(stored).max_finite, info(entry).max_finite);
  if (round_to(static_cast<float>(largest), stored) <= largest) return largest;
  int exp;
  std::frexp(largest, &exp);
  const double spacing = std::ldexp(unit_roundoff(stored), exp);  // of stored's values in [2^(exp-1), 2^exp)
  return std::floor(largest / spacing) * spacing;
}

bool representable(float x, Scalar s) { return std::isnan(x) || round_to(x, s) == x; }

bool flushes_on_entry(Scalar rounded, Scalar stored) {
  return unit_roundoff(rounded) > unit_roundoff(stored) || info(rounded).min_normal > info(stored).min_normal;
}

std::uint16_t to_bits16(float x, Scalar s) {
  if (s == Scalar::kBF16) return static_cast<std::uint16_t>(bits_of(round_to(x, s)) >> 16);
  // f16 from a value already rounded to f16 (exact), by fields.
  const float r = round_to(x, Scalar::kF16);
  const std::uint16_t sign = std::signbit(r) ? 0x8000 : 0;
  if (std::isnan(r)) return 0x7E00;
  if (std::isinf(r)) return sign | 0x7C00;
  const float a = std::fabs(r);
  if (a == 0.0f) return sign;
  int exp;
  const float f = std::frexp(a, &exp);  // a = f 2^exp, f in [0.5, 1)
  if (exp - 1 < -14)                    // subnormal: a = m 2^-24
    return sign | static_cast<std::uint16_t>(std::lround(a * 0x1p24f));
  const int mantissa = static_cast<int>(std::lround((f * 2.0f - 1.0f) * 1024.0f));
  return sign | static_cast<std::uint16_t>((exp - 1 + 15) << 10) | static_cast<std::uint16_t>(mantissa);
}

float from_bits16(std::uint16_t bits, Scalar s) {
  if (s == Scalar::kBF16) return from_bits(std::uint32_t(bits) << 16);
  const float sign = bits & 0x8000 ? -1.0f : 1.0f;
  const int exp = (bits >> 10) & 0x1F, mantissa = bits & 0x3FF;
  if (exp == 0x1F)
    return mantissa ? std::numeric_limits<float>::quiet_NaN() : sign * std::numeric_limits<float>::infinity();
  if (exp == 0) return sign * std::ldexp(float(mantissa), -24);
  return sign * std::ldexp(1.0f + float(mantissa) / 1024.0f, exp - 15);
}

bool Precision::all_f32() const {
  for (Scalar s : {q, k, v, o, bias, q_entry, k_entry, v_entry, scores, p, accumulator, sum_precision()})
    if (s != Scalar::kF32) return false;
  return !pv_unnormalised && !flush_subnormals;
}

double Precision::coarsest() const {
  double u = 0;
  for (Scalar s : {o, scores, p, accumulator, sum_precision()}) u = std::max(u, unit_roundoff(s));
  // An entry rounding counts where it is coarser than the storage it rounds.
  for (auto [entry, stored] : {std::pair{q_entry, q}, {k_entry, k}, {v_entry, v}})
    if (unit_roundoff(entry) > unit_roundoff(stored)) u = std::max(u, unit_roundoff(entry));
  return u;
}

bool Precision::same_storage(const Precision& other) const {
  return q == other.q && k == other.k && v == other.v && o == other.o && bias == other.bias;
}

std::string Precision::summary() const {
  if (all_f32()) return "f32";
  std::string storage = q == k && k == v && v == o ? std::string("q/k/v/o ") + to_string(q)
                                                   : std::string("q ") + to_string(q) + ", k " + to_string(k) + ", v " +
                                                         to_string(v) + ", o " + to_string(o);
  if (bias != Scalar::kF32) storage += std::string(", bias ") + to_string(bias);
  std::string entry;
  for (auto [name, rounded, stored] : {std::tuple{"Q", q_entry, q}, {"K", k_entry, k}, {"V", v_entry, v}})
    if (flushes_on_entry(rounded, stored))
      entry += std::string(", ") + name + " rounded to " + to_string(rounded) + " on entry";
  std::string sums = "accumulator " + std::string(to_string(accumulator));
  if (weight_sum)
    sums = "P.V accumulator " + std::string(to_string(accumulator)) + ", weight sum " + to_string(*weight_sum);
  return storage + entry + ", scores " + to_string(scores) + ", P " +
         (p == Scalar::kF32 ? "not rounded" : to_string(p)) + ", " + sums +
         (pv_unnormalised ? ", P.V unnormalised" : "") + (flush_subnormals ? ", subnormals flushed" : "");
}

}  // namespace attest
