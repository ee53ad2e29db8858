// The double-double reference's dot products four keys at a time: each key is one lane of a
// 4-double vector (GCC's vector extension: one AVX instruction in the x86-64-v3 clone, two SSE2
// ones elsewhere), and each lane runs exactly dot_parts' operations in the same order, so every
// dot product is the one-key result bit for bit (reference_test's FourKeyDot tests hold it so).
// No contraction can differ between the two: the build has -ffp-contract=off, and the only FMA
// is the explicit one of accumulate_product, an exact operation.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstring>
#include <vector>

#include "double_double.h"
#include "reference_algorithm.h"

namespace attest::reference_detail {

using Lanes = double __attribute__((vector_size(32)));  // one double of each of four keys

// Lanes from memory: std::vector cannot hold Lanes themselves (a template argument drops their
// alignment, 16 outside AVX code and 32 inside it), so they are stored as doubles and copied.
inline void load_lanes(const double* from, Lanes& out) { std::memcpy(&out, from, sizeof out); }

// lanes = fma(a, b, c) lane by lane: GCC turns the four into one vfmadd in the x86-64-v3 clone.
// Out-parameters, not vector values: passing those by value warns of an ABI change (-Wpsabi).
inline void fma_lanes(const Lanes& a, const Lanes& b, const Lanes& c, Lanes& out) {
  for (int l = 0; l < 4; ++l) out[l] = std::fma(a[l], b[l], c[l]);
}

// DoubleDouble's accumulate_product (or, for float values, accumulate_float_product) with the
// sum acc = hi + lo and the key b = b_hi + b_lo as lanes, a broadcast to all four.
template <bool kFloats>
inline void accumulate_lanes(Lanes& hi, Lanes& lo, DoubleDouble a, const Lanes& b_hi, const Lanes& b_lo) {
  const Lanes a_hi = {a.hi(), a.hi(), a.hi(), a.hi()};
  const Lanes p = a_hi * b_hi;
  Lanes s = hi + p;  // two_sum(hi, p, s, t)
  const Lanes bb = s - hi;
  Lanes t = (hi - (s - bb)) + (p - bb);
  if constexpr (kFloats) {
    t += lo;
  } else {
    const Lanes a_lo = {a.lo(), a.lo(), a.lo(), a.lo()};
    Lanes e;
    fma_lanes(a_hi, b_hi, -p, e);
    e = e + (a_hi * b_lo + a_lo * b_hi);
    t += lo + e;
  }
  hi = s + t;  // quick_two_sum(s, t, hi, lo)
  lo = t - (hi - s);
}

// The keys of one kv head as lanes: block g, pair m holds four lanes, re.hi, re.lo, im.hi and
// im.lo of keys 4g .. 4g + 3, zero past Tk (a zero key's lane is computed and never read).
class FourKeyDots {
 public:
  explicit FourKeyDots(bool four_wide) : four_wide_(four_wide) {}

  void assign(const std::vector<Rotated<DoubleDouble>>& keys) {
    if (!four_wide_ || keys.empty()) return;
    pairs_ = keys[0].re.size();
    floats_ = keys[0].floats;
    const std::size_t blocks = (keys.size() + 3) / 4;
    lanes_.assign(blocks * pairs_ * 16, 0.0);
    for (std::size_t j = 0; j < keys.size(); ++j)
      for (std::size_t m = 0; m < pairs_; ++m) {
        double* at = &lanes_[((j / 4) * pairs_ + m) * 16 + j % 4];
        at[0] = keys[j].re[m].hi();
        at[4] = keys[j].re[m].lo();
        at[8] = keys[j].im[m].hi();
        at[12] = keys[j].im[m].lo();
      }
  }

  // out[j] = dot(q, keys[j]) for every allowed key j (others: left as they were).
  void dots(const Rotated<DoubleDouble>& q, const std::vector<Rotated<DoubleDouble>>& keys,
            const std::vector<char>& allowed, std::vector<DoubleDouble>& out) const {
    const std::size_t tk = keys.size();
    if (!four_wide_) {
      for (std::size_t j = 0; j < tk; ++j)
        if (allowed[j]) out[j] = dot(q, keys[j]);
      return;
    }
    for (std::size_t first = 0; first < tk; first += 4) {
      const std::size_t last = first + 4 < tk ? first + 4 : tk;
      bool any = false;
      for (std::size_t j = first; j < last; ++j) any = any || allowed[j];
      if (!any) continue;
      DoubleDouble four[4];
      if (q.floats && floats_)
        block_dots<true>(q, first / 4, four);
      else
        block_dots<false>(q, first / 4, four);
      for (std::size_t j = first; j < last; ++j)
        if (allowed[j]) out[j] = four[j - first];
    }
  }

 private:
  // dot_parts over the four keys of block g: the same four partial sums, the same final sums.
  template <bool kFloats>
  void block_dots(const Rotated<DoubleDouble>& q, std::size_t g, DoubleDouble* out) const {
    Lanes hi[4] = {}, lo[4] = {};
    const double* k = &lanes_[g * pairs_ * 16];
    // Pair m of the block's keys: re.hi, re.lo, im.hi, im.lo.
    const auto add_pair = [&](std::size_t m, int re_part, int im_part) {
      Lanes re_hi, re_lo, im_hi, im_lo;
      load_lanes(k + 16 * m, re_hi);
      load_lanes(k + 16 * m + 4, re_lo);
      load_lanes(k + 16 * m + 8, im_hi);
      load_lanes(k + 16 * m + 12, im_lo);
      accumulate_lanes<kFloats>(hi[re_part], lo[re_part], q.re[m], re_hi, re_lo);
      accumulate_lanes<kFloats>(hi[im_part], lo[im_part], q.im[m], im_hi, im_lo);
    };
    std::size_t m = 0;
    for (; m + 1 < pairs_; m += 2) {
      add_pair(m, 0, 1);
      add_pair(m + 1, 2, 3);
    }
    if (m < pairs_) add_pair(m, 0, 1);
    for (int l = 0; l < 4; ++l) {
      const auto part = [&](int n) { return DoubleDouble::from_parts(hi[n][l], lo[n][l]); };
      out[l] = (part(0) + part(2)) + (part(1) + part(3));
    }
  }

  bool four_wide_;
  bool floats_ = false;
  std::size_t pairs_ = 0;
  std::vector<double> lanes_;
};

// The fast reference with the one-key dot products (FourKeyDots off), in the same build as
// compute_reference_fast: the 4-key path is tested against it bit for bit.
Reference compute_reference_fast_one_key(const Problem& p, ReferenceOptions options = {});

}  // namespace attest::reference_detail
