#include "simd_ops.h"

#include <cstdint>
#include <cstring>
#include <limits>
#include <utility>

#include "simd_vec.h"

namespace attest::kernels::simd {
namespace {

// One level of the block-swap transpose: for row pairs (a, b = a + S), swaps a's upper S-blocks
// with b's lower ones. Four levels (S = 8, 4, 2, 1) transpose a 16 x 16 tile in 64 shuffles.
template <int S, std::size_t... J>
[[gnu::always_inline]] inline void swap_blocks(vec16& a, vec16& b, std::index_sequence<J...>) {
  const vec16 lo = __builtin_shufflevector(a, b, ((J & S) ? int(16 + J - S) : int(J))...);
  const vec16 hi = __builtin_shufflevector(a, b, ((J & S) ? int(16 + J) : int(J + S))...);
  a = lo;
  b = hi;
}

template <int S>
[[gnu::always_inline]] inline void transpose_level(vec16 (&m)[16]) {
  for (int i = 0; i < 16; ++i)
    if (!(i & S)) swap_blocks<S>(m[i], m[i + S], std::make_index_sequence<16>{});
}

// dst[k * ld_dst + c] = src[c * ld_src + k] for c, k < 16.
[[gnu::always_inline]] inline void transpose_block(const float* src, int ld_src, float* dst, int ld_dst) {
  vec16 m[16];
  for (int i = 0; i < 16; ++i) m[i] = load16(src + i * ld_src);
  transpose_level<8>(m);
  transpose_level<4>(m);
  transpose_level<2>(m);
  transpose_level<1>(m);
  for (int i = 0; i < 16; ++i) store16(dst + i * ld_dst, m[i]);
}

// Scores of R query rows against columns [c0, c0 + 16W) of the transposed key tile, with the
// R x W accumulators held in registers across the whole dot product.
template <int R, int W>
[[gnu::always_inline]] inline void scores_block(const float* q, int dk, const float* kt, int ld, int c0, float scale,
                                                float* s) {
  vec16 a[R][W] = {};
  for (int k = 0; k < dk; ++k) {
    vec16 key[W];
    for (int w = 0; w < W; ++w) key[w] = load16(kt + k * ld + c0 + 16 * w);
    for (int r = 0; r < R; ++r) {
      const float x = q[r * dk + k];
      for (int w = 0; w < W; ++w) a[r][w] += x * key[w];
    }
  }
  for (int r = 0; r < R; ++r)
    for (int w = 0; w < W; ++w) store16(s + r * ld + c0 + 16 * w, a[r][w] * scale);
}

template <int R>
[[gnu::always_inline]] inline void scores_rows(const float* q, int dk, const float* kt, int ld, int width, float scale,
                                               float* s) {
  int c0 = 0;
  for (; c0 + 64 <= width; c0 += 64) scores_block<R, 4>(q, dk, kt, ld, c0, scale, s);
  for (; c0 + 16 <= width; c0 += 16) scores_block<R, 1>(q, dk, kt, ld, c0, scale, s);
  for (; c0 < width; ++c0)
    for (int r = 0; r < R; ++r) {
      float sum = 0.0f;
      for (int k = 0; k < dk; ++k) sum += q[r * dk + k] * kt[k * ld + c0];
      s[r * ld + c0] = sum * scale;
    }
}

// acc_r[d0, d0 + 16W) = acc_r * rescale[r] + sum_c p_r[c] v[c], for R rows sharing each V load.
// A key whose weight is 0 in a row never touches that row (its V may hold NaN or inf); kDense
// says no weight is 0, so the per-key checks drop out of the common unmasked tile.
template <int R, int W, bool kDense>
[[gnu::always_inline]] inline void accumulate_block(float* acc, int dv, const float* rescale, const float* p, int ld,
                                                    int cols, const float* v, int d0) {
  vec16 a[R][W];
  for (int r = 0; r < R; ++r)
    for (int w = 0; w < W; ++w) a[r][w] = load16(acc + r * dv + d0 + 16 * w) * rescale[r];
  for (int c = 0; c < cols; ++c) {
    float x[R];
    bool all = true, any = false;
    for (int r = 0; r < R; ++r) {
      x[r] = p[r * ld + c];
      if (!kDense) all = all && x[r] != 0.0f, any = any || x[r] != 0.0f;
    }
    if (!kDense && !any) continue;
    vec16 val[W];
    for (int w = 0; w < W; ++w) val[w] = load16(v + c * dv + d0 + 16 * w);
    if (kDense || all) {
      for (int r = 0; r < R; ++r)
        for (int w = 0; w < W; ++w) a[r][w] += x[r] * val[w];
    } else {
      for (int r = 0; r < R; ++r)
        if (x[r] != 0.0f)
          for (int w = 0; w < W; ++w) a[r][w] += x[r] * val[w];
    }
  }
  for (int r = 0; r < R; ++r)
    for (int w = 0; w < W; ++w) store16(acc + r * dv + d0 + 16 * w, a[r][w]);
}

template <int R, int W>
[[gnu::always_inline]] inline void accumulate_block(bool dense, float* acc, int dv, const float* rescale,
                                                    const float* p, int ld, int cols, const float* v, int d0) {
  if (dense)
    accumulate_block<R, W, true>(acc, dv, rescale, p, ld, cols, v, d0);
  else
    accumulate_block<R, W, false>(acc, dv, rescale, p, ld, cols, v, d0);
}

template <int R>
[[gnu::always_inline]] inline void accumulate_rows(float* acc, int dv, const float* rescale, const float* p, int ld,
                                                   int cols, const float* v) {
  bool has_zero = false;
  for (int r = 0; r < R; ++r) {
    vec16i zero_lanes{};
    int c = 0;
    for (; c + 16 <= cols; c += 16) zero_lanes |= load16(p + r * ld + c) == 0.0f;
    for (int l = 0; l < 16; ++l) has_zero |= zero_lanes[l] != 0;
    for (; c < cols; ++c) has_zero |= p[r * ld + c] == 0.0f;
  }
  int d0 = 0;
  for (; d0 + 64 <= dv; d0 += 64) accumulate_block<R, 4>(!has_zero, acc, dv, rescale, p, ld, cols, v, d0);
  for (; d0 + 16 <= dv; d0 += 16) accumulate_block<R, 1>(!has_zero, acc, dv, rescale, p, ld, cols, v, d0);
  if (d0 == dv) return;
  for (int r = 0; r < R; ++r) {
    float* row = acc + r * dv;
    for (int d = d0; d < dv; ++d) row[d] *= rescale[r];
    for (int c = 0; c < cols; ++c) {
      const float pc = p[r * ld + c];
      if (pc == 0.0f) continue;
      for (int d = d0; d < dv; ++d) row[d] += pc * v[c * dv + d];
    }
  }
}

// The bodies of max_of and exp_shift_sum, inlined into softmax_fold too (a call between
// multiversioned functions would go through the resolver and could not be inlined).
[[gnu::always_inline]] inline float max_of_impl(const float* x, int n) {
  vec16 lanes = splat(-std::numeric_limits<float>::infinity());
  int c = 0;
  for (; c + 16 <= n; c += 16) {
    const vec16 v = load16(x + c);
    lanes = lanes > v ? lanes : v;
  }
  float m = max_lanes(lanes);
  for (; c < n; ++c) m = m > x[c] ? m : x[c];
  return m;
}

[[gnu::always_inline]] inline float exp_shift_sum_impl(float* x, int n, float shift) {
  vec16 sums{};
  int c = 0;
  for (; c + 16 <= n; c += 16) {
    const vec16 e = exp_nonpositive16(load16(x + c) - shift);
    store16(x + c, e);
    sums += e;
  }
  float sum = sum_lanes(sums);
  for (; c < n; ++c) sum += x[c] = exp_nonpositive(x[c] - shift);
  return sum;
}

}  // namespace

ATTEST_MULTIVERSION
void scores(const float* q, int rows, int dk, const float* kt, int ld, int width, float scale, float* s) {
  int r = 0;
  for (; r + 4 <= rows; r += 4) scores_rows<4>(q + r * dk, dk, kt, ld, width, scale, s + r * ld);
  for (; r < rows; ++r) scores_rows<1>(q + r * dk, dk, kt, ld, width, scale, s + r * ld);
}

ATTEST_MULTIVERSION
float max_of(const float* x, int n) { return max_of_impl(x, n); }

ATTEST_MULTIVERSION
float exp_shift_sum(float* x, int n, float shift) { return exp_shift_sum_impl(x, n, shift); }

ATTEST_MULTIVERSION
void softmax_fold_rows(float* s, int rows, int ld, int cols, float* row_max, float* row_sum, float* rescale) {
  for (int r = 0; r < rows; ++r) {
    float* x = s + r * ld;
    const float tile_max = max_of_impl(x, cols);
    if (tile_max == -std::numeric_limits<float>::infinity()) {  // fully masked: weights 0, state unchanged
      std::memset(x, 0, sizeof(float) * cols);
      rescale[r] = 1.0f;
      continue;
    }
    const float new_max = row_max[r] > tile_max ? row_max[r] : tile_max;
    rescale[r] = exp_nonpositive(row_max[r] - new_max);  // 0 on the first visible tile
    row_sum[r] = row_sum[r] * rescale[r] + exp_shift_sum_impl(x, cols, new_max);
    row_max[r] = new_max;
  }
}

ATTEST_MULTIVERSION
void rescale_accumulate_rows(float* acc, int rows, int dv, const float* rescale, const float* p, int ld, int cols,
                             const float* v) {
  int r = 0;
  for (; r + 4 <= rows; r += 4) accumulate_rows<4>(acc + r * dv, dv, rescale + r, p + r * ld, ld, cols, v);
  for (; r < rows; ++r) accumulate_rows<1>(acc + r * dv, dv, rescale + r, p + r * ld, ld, cols, v);
}

ATTEST_MULTIVERSION
void transpose(const float* src, int rows, int cols, float* dst, int ld) {
  int c0 = 0;
  for (; c0 + 16 <= rows; c0 += 16) {
    int k0 = 0;
    for (; k0 + 16 <= cols; k0 += 16) transpose_block(src + c0 * cols + k0, cols, dst + k0 * ld + c0, ld);
    for (int k = k0; k < cols; ++k)
      for (int c = c0; c < c0 + 16; ++c) dst[k * ld + c] = src[c * cols + k];
  }
  for (int k = 0; k < cols; ++k) {
    float* out = dst + k * ld;
    for (int c = c0; c < rows; ++c) out[c] = src[c * cols + k];
    for (int c = rows; c < ld; ++c) out[c] = 0.0f;
  }
}

ATTEST_MULTIVERSION
void scale(float* x, int n, float a) {
  for (int d = 0; d < n; ++d) x[d] *= a;
}

}  // namespace attest::kernels::simd
