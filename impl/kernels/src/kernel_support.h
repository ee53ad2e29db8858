// Helpers shared by the built-in kernels (never by the reference, which has its own).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <span>

#include "attest/kernels/kernel.h"
#include "attest/model/problem.h"

namespace attest::kernels {

inline constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// floor(a / b) for b > 0, also for negative a (a query may sit at a negative position).
inline long long floor_div(long long a, long long b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

// Keys [lo, hi) allowed by the range-shaped terms (causal, the integer terms, key padding).
struct KeyRange {
  int lo = 0;
  int hi = 0;
  bool empty() const { return hi <= lo; }
};
// Keys [lo, hi) of a session's positions, empty when hi <= lo.
inline KeyRange key_range(long long lo, long long hi) {
  return hi > lo ? KeyRange{static_cast<int>(lo), static_cast<int>(hi)} : KeyRange{};
}

// Narrows keys [lo, hi) of the query at `pos` by the integer mask terms (the features table's
// rows with a parameter); decode sessions share it.
inline void narrow_to_integer_terms(const MaskSpec& m, long long pos, long long& lo, long long& hi) {
  if (m.window) lo = std::max(lo, pos - *m.window + 1);
  if (m.chunk) {
    const long long start = floor_div(pos, *m.chunk) * *m.chunk;
    lo = std::max(lo, start);
    hi = std::min(hi, start + *m.chunk);
  }
  if (m.lookahead) hi = std::min(hi, pos + *m.lookahead);
}

// The mask conjunction of a problem, evaluated per (batch, query, key).
class MaskView {
 public:
  explicit MaskView(const Problem& p) : p_(p), offset_(p.effective_q_offset()) {}

  long long position(int i) const { return offset_ + i; }

  KeyRange range(int b, int i) const {
    const MaskSpec& m = p_.mask;
    if (!m.q_valid.empty() && i >= m.q_valid[b]) return {0, 0};
    long long lo = 0, hi = p_.shape.k_len;
    long long pos = position(i);
    if (m.causal) hi = std::min(hi, pos + 1);
    narrow_to_integer_terms(m, pos, lo, hi);
    if (!m.kv_valid.empty()) hi = std::min<long long>(hi, m.kv_valid[b]);
    if (hi <= lo) return {0, 0};
    return {static_cast<int>(lo), static_cast<int>(hi)};
  }

  // Whether terms beyond the range (segments, explicit mask) must be checked per key.
  bool elementwise() const { return !p_.mask.q_segment.empty() || !p_.mask.explicit_mask.empty(); }

  // The per-key terms only; call for keys inside range(b, i).
  bool elementwise_visible(int b, int i, int j) const {
    const MaskSpec& m = p_.mask;
    const int tq = p_.shape.q_len, tk = p_.shape.k_len;
    if (!m.q_segment.empty() &&
        m.q_segment[static_cast<std::size_t>(b) * tq + i] != m.k_segment[static_cast<std::size_t>(b) * tk + j])
      return false;
    if (!m.explicit_mask.empty() && !m.explicit_mask[(static_cast<std::size_t>(b) * tq + i) * tk + j]) return false;
    return true;
  }

  bool visible(int b, int i, int j) const {
    KeyRange r = range(b, i);
    return j >= r.lo && j < r.hi && elementwise_visible(b, i, j);
  }

 private:
  const Problem& p_;
  long long offset_;
};

// The score modifiers of a problem as the kernels apply them, in float: softcap, then ALiBi's
// distance term, then the bias (a -inf bias masks the key). Sinks join the softmax denominator.
class ModifierView {
 public:
  explicit ModifierView(const Problem& p)
      : p_(p),
        softcap_(p.modifiers.softcap ? static_cast<float>(*p.modifiers.softcap) : 0.0f),
        slopes_(p.modifiers.alibi_slopes.empty() ? nullptr : p.modifiers.alibi_slopes.data()),
        bias_(p.modifiers.bias.empty() ? nullptr : p.modifiers.bias.data()),
        sinks_(p.modifiers.sinks.empty() ? nullptr : p.modifiers.sinks.data()) {}

  bool changes_logits() const { return softcap_ > 0 || slopes_ || bias_; }
  bool has_sinks() const { return sinks_ != nullptr; }
  float sink(int h) const { return sinks_[h]; }
  bool has_softcap() const { return softcap_ > 0; }
  float softcap() const { return softcap_; }
  bool has_slopes() const { return slopes_ != nullptr; }
  float slope(int h) const { return slopes_[h]; }
  bool has_bias() const { return bias_ != nullptr; }
  float bias(int b, int h, int i, int j) const { return bias_[p_.modifiers.bias_index(p_.shape, b, h, i, j)]; }
  // Whether a -inf bias masks key j of query i (batch b, head h).
  bool masks(int b, int h, int i, int j) const {
    return bias_ && bias(b, h, i, j) == -std::numeric_limits<float>::infinity();
  }

  // The logit of scaled score x for key j of query i (at position pos) in batch b, head h.
  // A -inf bias masks the key before its score is looked at: a NaN or inf in its K row must not leak.
  float logit(float x, int b, int h, int i, int j, long long pos) const {
    const float b_ij = bias_ ? bias(b, h, i, j) : 0.0f;
    if (b_ij == -std::numeric_limits<float>::infinity()) return b_ij;
    if (softcap_ > 0) x = softcap_ * std::tanh(x / softcap_);
    if (slopes_) x += slopes_[h] * static_cast<float>(j - pos);
    return x + b_ij;
  }

 private:
  const Problem& p_;
  float softcap_;
  const float* slopes_;
  const float* bias_;
  const float* sinks_;
};

// Whether any of `rows` query rows sees a key in [j_lo, j_hi) (the tiled kernels skip a panel's
// tile otherwise).
inline bool panel_overlaps(const KeyRange* ranges, int rows, int j_lo, int j_hi) {
  for (int r = 0; r < rows; ++r)
    if (!ranges[r].empty() && ranges[r].lo < j_hi && ranges[r].hi > j_lo) return true;
  return false;
}

// A tile's score row for query i (head h) and keys j0 .. j0 + cols: -inf outside the row's range and
// where a per-key term forbids, the score modifiers on the keys in range (a -inf bias masks one
// like a mask term); scores past cols are padding and never read.
inline void apply_mask(const MaskView& mask, const ModifierView& modifiers, int b, int h, int i, KeyRange range, int j0,
                       int cols, float* srow) {
  const int first = std::clamp(range.lo - j0, 0, cols), last = std::clamp(range.hi - j0, first, cols);
  std::fill(srow, srow + first, kNegInf);
  std::fill(srow + last, srow + cols, kNegInf);
  if (mask.elementwise())
    for (int c = first; c < last; ++c)
      if (!mask.elementwise_visible(b, i, j0 + c)) srow[c] = kNegInf;
  if (modifiers.changes_logits())
    for (int c = first; c < last; ++c)
      if (srow[c] != kNegInf) srow[c] = modifiers.logit(srow[c], b, h, i, j0 + c, mask.position(i));
}

// Rotates interleaved pairs of x[0..dim) in place for position pos. Angles in double so
// that long positions keep their precision.
inline void rope_rotate(float* x, int dim, long long pos, double base) {
  for (int m = 0; m < dim / 2; ++m) {
    double theta = std::pow(base, -2.0 * m / dim);
    double angle = static_cast<double>(pos) * theta;
    float c = static_cast<float>(std::cos(angle));
    float s = static_cast<float>(std::sin(angle));
    float a = x[2 * m], b = x[2 * m + 1];
    x[2 * m] = a * c - b * s;
    x[2 * m + 1] = a * s + b * c;
  }
}

inline float dot(const float* a, const float* b, int n) {
  float s = 0.0f;
  for (int k = 0; k < n; ++k) s += a[k] * b[k];
  return s;
}

// Writes the zero empty-row policy: O = 0, LSE = -inf.
inline void write_empty_row(float* o, int dv, float* lse) {
  std::fill(o, o + dv, 0.0f);
  if (lse) *lse = kNegInf;
}

// Index helpers for the row-major layouts of docs/design.md#problem-semantics.
struct Layout {
  const Shape& s;
  std::size_t q(int b, int h, int i) const { return ((std::size_t(b) * s.heads + h) * s.q_len + i) * s.head_dim; }
  std::size_t k(int b, int g, int j) const { return ((std::size_t(b) * s.kv_heads + g) * s.k_len + j) * s.head_dim; }
  std::size_t v(int b, int g, int j) const { return ((std::size_t(b) * s.kv_heads + g) * s.k_len + j) * s.value_dim; }
  std::size_t o(int b, int h, int i) const { return ((std::size_t(b) * s.heads + h) * s.q_len + i) * s.value_dim; }
  std::size_t lse(int b, int h, int i) const { return (std::size_t(b) * s.heads + h) * s.q_len + i; }
};

// A decode session's score modifiers as a problem, which a ModifierView reads.
inline Problem modifier_problem_of(const DecodeConfig& c) {
  Problem p;
  p.shape.heads = c.heads;
  p.modifiers.softcap = c.softcap;
  p.modifiers.alibi_slopes = c.alibi_slopes;
  p.modifiers.sinks = c.sinks;
  return p;
}

// Throws ProblemError unless a step's buffers hold n >= 1 tokens of every sequence of `c`.
inline void check_step(const DecodeConfig& c, int n, std::span<const float> q, std::span<const float> k,
                       std::span<const float> v, std::span<float> o, std::span<float> lse) {
  if (n < 1) throw ProblemError("invalid decode step: n must be >= 1");
  const std::size_t dk = c.head_dim, dv = c.value_dim, rows = std::size_t(c.batch) * n;
  if (q.size() != rows * c.heads * dk || k.size() != rows * c.kv_heads * dk || v.size() != rows * c.kv_heads * dv ||
      o.size() != rows * c.heads * dv || (!lse.empty() && lse.size() != rows * c.heads))
    throw ProblemError("invalid decode step: q/k/v/o/lse sizes do not match n and the configuration");
}

}  // namespace attest::kernels
