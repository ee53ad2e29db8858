// Number formats and where a kernel rounds (docs/design.md#precision). A precision is not one word: the
// storage of Q, K, V and O, the precision scores are accumulated in, whether P is rounded before
// P.V, the P.V accumulator, and the kernel's exp error. The error bound charges each rounding at
// its own unit roundoff; the precision gate's model kernel rounds exactly there.
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>

namespace attest {

// bf16/f16/e4m3/e5m2 are element formats. q8, q4, q8_token, q8_head and q4_0 are KV storage only: scaled integer
// codes whose values are fitted and checked a row at a time (quantized.h); round_to leaves a value
// alone there, and they are never a format the kernel computes in.
enum class Scalar : std::uint8_t { kF32, kBF16, kF16, kE4M3, kE5M2, kQ8, kQ4, kQ8Token, kQ8Head, kQ4_0 };
inline constexpr int kScalarCount = 10;

struct ScalarInfo {
  const char* name;      // f32, bf16, f16, e4m3, e5m2, q8, q4, q8_token, q8_head, q4_0
  double unit_roundoff;  // u: half an ulp of 1 (a scaled format's values are exact f32 operands: f32's)
  double max_finite;
  double min_normal;
  double min_subnormal;  // the spacing of the smallest values (underflow quantum)
  int bytes;             // per value (q4, q4_0: a byte holds two codes; stored_bytes() counts exactly)
};

const ScalarInfo& info(Scalar s);
const char* to_string(Scalar s);
double unit_roundoff(Scalar s);
bool parse_scalar(const std::string& name, Scalar& out);
// Every name parse_scalar accepts, for a message: "f32, bf16, f16, e4m3, e5m2, q8, q4, q8_token, q8_head or q4_0".
std::string scalar_names();

// Round to nearest even in that format (overflow gives +-inf, NaN stays NaN; e4m3 has no infinity and
// saturates at +-448). A scaled format returns x: fit_rows (quantized.h) rounds a row at a time.
// Inline (below): the model kernel rounds up to three times per multiply-add.
inline float round_to(float x, Scalar s);
// The largest magnitude an input may hold: its storage's largest finite value, or, when the format
// the kernel rounds it to on entry is narrower, the storage's largest value that rounding keeps finite.
double largest_input(Scalar stored, Scalar entry);
bool representable(float x, Scalar s);  // NaN counts as representable
// Whether rounding a value stored as `stored` to `rounded` on entry can flush it below the normal
// range of `rounded`: a coarser format, or a finer one whose normal range ends higher (f16 behind
// bf16 keeps every bf16 digit but turns 1e-30 into 0).
bool flushes_on_entry(Scalar rounded, Scalar stored);
// The 16-bit pattern of a value representable in bf16 or f16, and back.
std::uint16_t to_bits16(float x, Scalar s);
float from_bits16(std::uint16_t bits, Scalar s);

struct Precision {
  Scalar q = Scalar::kF32, k = Scalar::kF32, v = Scalar::kF32, o = Scalar::kF32;  // storage
  Scalar bias = Scalar::kF32;  // the additive bias's storage: attest sends values representable there
  // Rounding on entry: the kernel rounds each input to this before using it (f32: used as
  // stored). What attest sends follows the storage; the bound charges this rounding.
  Scalar q_entry = Scalar::kF32, k_entry = Scalar::kF32, v_entry = Scalar::kF32;
  Scalar scores = Scalar::kF32;       // q.k is accumulated in this
  Scalar p = Scalar::kF32;            // P is rounded to this before P.V (f32: not rounded)
  Scalar accumulator = Scalar::kF32;  // P.V accumulated in this (and the softmax sum, unless weight_sum)
  std::optional<Scalar> weight_sum;   // the softmax denominator's own accumulator, when it has one
  bool pv_unnormalised = false;       // P.V summed with weights exp(s - m), divided by the sum at the end
  // Subnormals may be flushed (FTZ/DAZ): any value below the smallest normal of the format it is
  // held in, read, computed or written, may become a zero of its sign. The bound charges it.
  bool flush_subnormals = false;
  double exp_ulps = 1.0;  // worst error of one exp, in ulps of the score type

  bool operator==(const Precision&) const = default;
  bool all_f32() const;
  // The coarsest unit roundoff of any rounding it declares.
  double coarsest() const;
  // The softmax denominator's accumulator (the P.V one unless declared apart).
  Scalar sum_precision() const { return weight_sum.value_or(accumulator); }
  // Whether the other precision has the same storage (what attest sends and receives): two paths
  // of one kernel may differ only in where they round inside.
  bool same_storage(const Precision& other) const;
  // "f32" when all_f32, else "q/k/v/o bf16, scores f32, P bf16, accumulator f32" (with the bias's
  // storage, the entry roundings, the weight sum, an unnormalised P.V and flushed subnormals when declared).
  std::string summary() const;
};

namespace precision_detail {

// Round to nearest even with `digits` significant bits, no spacing below 2^min_quantum_exp; past
// max_finite: the largest finite value when saturating, else infinity.
inline float round_minifloat(float x, int digits, int min_quantum_exp, float max_finite, bool saturate) {
  const float ax = std::fabs(x);
  float r;
  if (ax >= 2 * max_finite) {
    r = ax;  // rounds to at least ax (1 - 2^-digits), past max_finite
  } else {
    // ax in [2^(e-1), 2^e) rounds to a multiple of quantum = 2^max(e - digits, min_quantum_exp).
    // Adding 2^23 quanta and taking them away again does that in the FPU's round-to-nearest-even:
    // the sum lies in [2^23, 2^24) quanta, where float's spacing is one quantum. (frexp, ldexp and
    // nearbyint did the same at several times the cost.)
    const int biased = static_cast<int>(std::bit_cast<std::uint32_t>(ax) >> 23);  // 0 for zero and subnormals
    const int quantum_exp = std::max(biased - 126 - digits, min_quantum_exp);
    const float shift = std::bit_cast<float>(static_cast<std::uint32_t>(quantum_exp + 23 + 127) << 23);
    r = (ax + shift) - shift;  // not folded: the build has no fast-math
  }
  if (r > max_finite) r = saturate ? max_finite : std::numeric_limits<float>::infinity();
  return std::copysign(r, x);
}

}  // namespace precision_detail

inline float round_to(float x, Scalar s) {
  if (s == Scalar::kE4M3 && std::isinf(x)) return std::copysign(448.0f, x);
  if (!std::isfinite(x)) return x;
  switch (s) {
    case Scalar::kBF16: {
      std::uint32_t b = std::bit_cast<std::uint32_t>(x);
      b += 0x7FFFu + ((b >> 16) & 1u);  // round to nearest even on the dropped 16 bits
      return std::bit_cast<float>(b & 0xFFFF0000u);
    }
    case Scalar::kF16:
      return precision_detail::round_minifloat(x, 11, -24, 65504.0f, false);  // exponents [-14, 15]
    case Scalar::kE4M3:
      return precision_detail::round_minifloat(x, 4, -9, 448.0f, true);  // exponents [-6, 8]
    case Scalar::kE5M2:
      return precision_detail::round_minifloat(x, 3, -16, 57344.0f, false);  // exponents [-14, 15]
    default:
      return x;  // f32, and the scaled formats (fitted a row at a time)
  }
}

}  // namespace attest
