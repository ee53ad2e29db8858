#include "simd_bf16.h"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string_view>

#include "simd_vec.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define ATTEST_BF16_DOT 1
#define ATTEST_DOT_TARGET __attribute__((target("avx512bf16,avx512f,avx512bw,avx512vl")))
#endif

namespace attest::kernels::bf16 {
namespace {

using simd::vec16;

// 16 lanes of float bits; GCC lowers it to whatever each clone has, like simd_ops.
using vec16u = std::uint32_t __attribute__((vector_size(64)));

[[gnu::always_inline]] inline vec16u load_bits16(const float* p) {
  vec16u v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

std::uint32_t bits_of(float x) {
  std::uint32_t b;
  std::memcpy(&b, &x, sizeof b);
  return b;
}

// The bf16 nearest to the float with bits b, in the top half (low half 0): ties to even on the
// dropped 16 bits, as round_to does; a NaN is kept (made quiet) rather than carried into inf.
[[gnu::always_inline]] inline std::uint32_t round_bits(std::uint32_t b) {
  if ((b & 0x7FFFFFFFu) > 0x7F800000u) return (b | 0x00400000u) & 0xFFFF0000u;
  return (b + 0x7FFFu + ((b >> 16) & 1u)) & 0xFFFF0000u;
}
[[gnu::always_inline]] inline vec16u round_bits(vec16u b) {
  const vec16u rounded = (b + 0x7FFFu + ((b >> 16) & 1u)) & 0xFFFF0000u;
  const vec16u quiet = (b | 0x00400000u) & 0xFFFF0000u;
  return (b & 0x7FFFFFFFu) > 0x7F800000u ? quiet : rounded;
}

// The body of round: clang refuses 64-byte vector values in a multiversioned function's own body.
[[gnu::always_inline]] inline void round_impl(float* x, int n) {
  int i = 0;
  for (; i + 16 <= n; i += 16) {
    const vec16u r = round_bits(load_bits16(x + i));
    std::memcpy(x + i, &r, sizeof r);
  }
  for (; i < n; ++i) {
    const std::uint32_t r = round_bits(bits_of(x[i]));
    std::memcpy(x + i, &r, sizeof r);
  }
}

// simd::softmax_fold_rows for R rows at once. One row at a time is latency-bound on a 64-key tile
// (a max reduction, then a dependent exp, then a sum reduction); R interleaved rows keep the exp
// pipeline full. A fully masked row gets shift 0 and delta 0: weights exp(-inf) = 0, rescale 1.
template <int R>
[[gnu::always_inline]] inline void fold_rows(float* s, int ld, int cols, float* row_max, float* row_sum,
                                             float* rescale) {
  const int full = cols / 16 * 16;
  vec16 lanes[R];
  for (int r = 0; r < R; ++r) lanes[r] = simd::splat(-std::numeric_limits<float>::infinity());
  for (int c = 0; c < full; c += 16)
    for (int r = 0; r < R; ++r) {
      const vec16 x = simd::load16(s + r * ld + c);
      lanes[r] = lanes[r] > x ? lanes[r] : x;
    }
  float shift[R];
  vec16 delta{};
  for (int r = 0; r < R; ++r) {
    float tile_max = simd::max_lanes(lanes[r]);
    for (int c = full; c < cols; ++c) tile_max = tile_max > s[r * ld + c] ? tile_max : s[r * ld + c];
    const bool masked = tile_max == -std::numeric_limits<float>::infinity();
    const float new_max = masked || row_max[r] > tile_max ? row_max[r] : tile_max;
    shift[r] = masked ? 0.0f : new_max;
    delta[r] = masked ? 0.0f : row_max[r] - new_max;
    row_max[r] = new_max;
  }
  const vec16 factors = simd::exp_nonpositive16(delta);  // every row's rescale in one exp
  vec16 sums[R] = {};
  for (int c = 0; c < full; c += 16)
    for (int r = 0; r < R; ++r) {
      const vec16 e = simd::exp_nonpositive16(simd::load16(s + r * ld + c) - shift[r]);
      simd::store16(s + r * ld + c, e);
      sums[r] += e;
    }
  for (int r = 0; r < R; ++r) {
    float sum = simd::sum_lanes(sums[r]);
    for (int c = full; c < cols; ++c) sum += s[r * ld + c] = simd::exp_nonpositive(s[r * ld + c] - shift[r]);
    rescale[r] = factors[r];
    row_sum[r] = row_sum[r] * factors[r] + sum;
  }
}

}  // namespace

bool has_dot_products() {
#ifdef ATTEST_BF16_DOT
  const auto turned_off = [] {
    const char* setting = std::getenv("ATTEST_BF16_DOT");
    return setting && std::string_view(setting) == "off";
  };
  // ATTEST_BF16_DOT=off: as on a CPU without it (to measure and test the portable path anywhere).
  static const bool supported = __builtin_cpu_supports("avx512bf16") && __builtin_cpu_supports("avx512bw") &&
                                __builtin_cpu_supports("avx512vl") && !turned_off();
  return supported;
#else
  return false;
#endif
}

ATTEST_MULTIVERSION
void round(float* x, int n) { round_impl(x, n); }

ATTEST_MULTIVERSION
void softmax_fold_rows(float* s, int rows, int ld, int cols, float* row_max, float* row_sum, float* rescale) {
  int r = 0;
  for (; r + 4 <= rows; r += 4) fold_rows<4>(s + r * ld, ld, cols, row_max + r, row_sum + r, rescale + r);
  for (; r < rows; ++r) fold_rows<1>(s + r * ld, ld, cols, row_max + r, row_sum + r, rescale + r);
}

#ifdef ATTEST_BF16_DOT
namespace {

// Lanes holding a nonzero magnitude below `tiny`, and non-finite lanes, accumulated over a tile.
struct Checker {
  __m512 tiny;
  __mmask16 small = 0, nonfinite = 0;
  [[gnu::always_inline]] ATTEST_DOT_TARGET void add(__m512 x) {
    const __m512 a = _mm512_abs_ps(x);
    small |= _mm512_mask_cmp_ps_mask(_mm512_cmp_ps_mask(a, _mm512_setzero_ps(), _CMP_NEQ_OQ), a, tiny, _CMP_LT_OQ);
    nonfinite |= _mm512_cmp_ps_mask(a, _mm512_set1_ps(INFINITY), _CMP_NLT_UQ);
  }
  PackCheck result() const { return {small != 0, nonfinite != 0}; }
};

[[gnu::always_inline]] ATTEST_DOT_TARGET inline __mmask16 first_lanes(int n) {
  return n >= 16 ? 0xFFFF : __mmask16((1u << (n > 0 ? n : 0)) - 1);
}

// Scores of R query rows against columns [c0, c0 + 16W), R x W accumulators in registers.
template <int R, int W>
[[gnu::always_inline]] ATTEST_DOT_TARGET inline void scores_block(const std::uint32_t* q, int dk2,
                                                                  const std::uint32_t* kt, int ld, int c0, float scale,
                                                                  float* s) {
  __m512 a[R][W];
  for (int r = 0; r < R; ++r)
    for (int w = 0; w < W; ++w) a[r][w] = _mm512_setzero_ps();
  for (int k = 0; k < dk2; ++k) {
    __m512bh key[W];
    for (int w = 0; w < W; ++w) key[w] = (__m512bh)_mm512_loadu_si512(kt + std::size_t(k) * ld + c0 + 16 * w);
    for (int r = 0; r < R; ++r) {
      const __m512bh x = (__m512bh)_mm512_set1_epi32(int(q[r * dk2 + k]));
      for (int w = 0; w < W; ++w) a[r][w] = _mm512_dpbf16_ps(a[r][w], x, key[w]);
    }
  }
  const __m512 factor = _mm512_set1_ps(scale);
  for (int r = 0; r < R; ++r)
    for (int w = 0; w < W; ++w) _mm512_storeu_ps(s + r * ld + c0 + 16 * w, _mm512_mul_ps(a[r][w], factor));
}

template <int R>
[[gnu::always_inline]] ATTEST_DOT_TARGET inline void scores_rows(const std::uint32_t* q, int dk2,
                                                                 const std::uint32_t* kt, int ld, int width,
                                                                 float scale, float* s) {
  int c0 = 0;
  for (; c0 + 64 <= width; c0 += 64) scores_block<R, 4>(q, dk2, kt, ld, c0, scale, s);
  for (; c0 < width; c0 += 16) scores_block<R, 1>(q, dk2, kt, ld, c0, scale, s);
}

// acc_r[d0, d0 + 16W) = acc_r * rescale[r] + sum over pairs of p_r . v, R rows sharing each V
// load; `tail` masks the lanes of a last partial vector (W = 1 only).
template <int R, int W>
[[gnu::always_inline]] ATTEST_DOT_TARGET inline void accumulate_block(float* acc, int dv, const float* rescale,
                                                                      const std::uint32_t* p, int ld2, int cols2,
                                                                      const std::uint32_t* v, int d0, __mmask16 tail) {
  __m512 a[R][W];
  for (int r = 0; r < R; ++r)
    for (int w = 0; w < W; ++w)
      a[r][w] = _mm512_mul_ps(_mm512_maskz_loadu_ps(tail, acc + r * dv + d0 + 16 * w), _mm512_set1_ps(rescale[r]));
  for (int c = 0; c < cols2; ++c) {
    __m512bh val[W];
    for (int w = 0; w < W; ++w)
      val[w] = (__m512bh)_mm512_maskz_loadu_epi32(tail, v + std::size_t(c) * dv + d0 + 16 * w);
    for (int r = 0; r < R; ++r) {
      const __m512bh x = (__m512bh)_mm512_set1_epi32(int(p[r * ld2 + c]));
      for (int w = 0; w < W; ++w) a[r][w] = _mm512_dpbf16_ps(a[r][w], x, val[w]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int w = 0; w < W; ++w) _mm512_mask_storeu_ps(acc + r * dv + d0 + 16 * w, tail, a[r][w]);
}

template <int R>
[[gnu::always_inline]] ATTEST_DOT_TARGET inline void accumulate_rows(float* acc, int dv, const float* rescale,
                                                                     const std::uint32_t* p, int ld2, int cols2,
                                                                     const std::uint32_t* v) {
  int d0 = 0;
  for (; d0 + 64 <= dv; d0 += 64) accumulate_block<R, 4>(acc, dv, rescale, p, ld2, cols2, v, d0, 0xFFFF);
  for (; d0 < dv; d0 += 16) {
    const __mmask16 tail = dv - d0 >= 16 ? 0xFFFF : __mmask16((1u << (dv - d0)) - 1);
    accumulate_block<R, 1>(acc, dv, rescale, p, ld2, cols2, v, d0, tail);
  }
}

// Whether some acc_r * rescale[r] is a nonzero magnitude below kTinyAccumulator.
ATTEST_DOT_TARGET bool tiny_after_rescale(const float* acc, int rows, int dv, const float* rescale) {
  const __m512 limit = _mm512_set1_ps(kTinyAccumulator), zero = _mm512_setzero_ps();
  __mmask16 tiny = 0;
  for (int r = 0; r < rows; ++r)
    for (int d0 = 0; d0 < dv; d0 += 16) {
      const __mmask16 lanes = dv - d0 >= 16 ? 0xFFFF : __mmask16((1u << (dv - d0)) - 1);
      const __m512 x =
          _mm512_abs_ps(_mm512_mul_ps(_mm512_maskz_loadu_ps(lanes, acc + r * dv + d0), _mm512_set1_ps(rescale[r])));
      tiny |= _mm512_mask_cmp_ps_mask(_mm512_cmp_ps_mask(x, zero, _CMP_NEQ_UQ), x, limit, _CMP_LT_OQ);
    }
  return tiny != 0;
}

}  // namespace

// VCVTNE2PS2BF16 rounds to nearest even like round_to; it flushes subnormal inputs, which the
// check reports as tiny (kTinyInput and kTinyWeight are far above them).
ATTEST_DOT_TARGET
PackCheck pack_rows(const float* src, int rows, int cols, int ld_src, std::uint32_t* dst, int ld_dst, float tiny) {
  Checker check{_mm512_set1_ps(tiny)};
  for (int r = 0; r < rows; ++r) {
    const float* in = src + std::size_t(r) * ld_src;
    std::uint32_t* out = dst + std::size_t(r) * ld_dst;
    for (int k = 0; k < ld_dst; k += 16) {  // 32 elements -> 16 pairs, in their natural order
      const __m512 lo = _mm512_maskz_loadu_ps(first_lanes(cols - 2 * k), in + 2 * k);
      const __m512 hi = _mm512_maskz_loadu_ps(first_lanes(cols - 2 * k - 16), in + 2 * k + 16);
      check.add(lo);
      check.add(hi);
      _mm512_mask_storeu_epi32(out + k, first_lanes(ld_dst - k), (__m512i)_mm512_cvtne2ps_pbh(hi, lo));
    }
  }
  return check.result();
}

ATTEST_DOT_TARGET
PackCheck pack_row_pairs(const float* src, int rows, int cols, int ld_src, std::uint32_t* dst, int ld_dst, float tiny) {
  Checker check{_mm512_set1_ps(tiny)};
  // bf16 lanes [a0..a15, b0..b15] -> [a0, b0, a1, b1, ...]
  const __m512i interleave = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7, 22,
                                              6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
  for (int k = 0; k < (rows + 1) / 2; ++k) {
    const float* even = src + std::size_t(2 * k) * ld_src;
    const bool has_odd = 2 * k + 1 < rows;  // a missing row pairs with 0
    std::uint32_t* out = dst + std::size_t(k) * ld_dst;
    for (int c = 0; c < ld_dst; c += 16) {
      const __mmask16 lanes = first_lanes(cols - c);
      const __m512 a = _mm512_maskz_loadu_ps(lanes, even + c);
      const __m512 b = has_odd ? _mm512_maskz_loadu_ps(lanes, even + ld_src + c) : _mm512_setzero_ps();
      check.add(a);
      check.add(b);
      const __m512i pairs = _mm512_permutexvar_epi16(interleave, (__m512i)_mm512_cvtne2ps_pbh(b, a));
      _mm512_mask_storeu_epi32(out + c, first_lanes(ld_dst - c), pairs);
    }
  }
  return check.result();
}

namespace {

// GCC 12's unpack intrinsics pass an undefined vector through and warn about it (GCC PR 105593).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

// m[i][j] -> m[j][i] for a 16 x 16 block of 32-bit words: 32-bit and 64-bit unpacks give, in each
// 128-bit lane L, column 4L + j of four rows; two rounds of 128-bit shuffles gather the lanes.
[[gnu::always_inline]] ATTEST_DOT_TARGET inline void transpose16(__m512i (&m)[16]) {
  __m512i t[16], r[16];
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_epi32(m[2 * i], m[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_epi32(m[2 * i], m[2 * i + 1]);
  }
  for (int i = 0; i < 4; ++i) {
    r[4 * i] = _mm512_unpacklo_epi64(t[4 * i], t[4 * i + 2]);
    r[4 * i + 1] = _mm512_unpackhi_epi64(t[4 * i], t[4 * i + 2]);
    r[4 * i + 2] = _mm512_unpacklo_epi64(t[4 * i + 1], t[4 * i + 3]);
    r[4 * i + 3] = _mm512_unpackhi_epi64(t[4 * i + 1], t[4 * i + 3]);
  }
  for (int j = 0; j < 4; ++j) {
    const __m512i s0 = _mm512_shuffle_i32x4(r[j], r[4 + j], 0x44), s1 = _mm512_shuffle_i32x4(r[j], r[4 + j], 0xEE);
    const __m512i s2 = _mm512_shuffle_i32x4(r[8 + j], r[12 + j], 0x44);
    const __m512i s3 = _mm512_shuffle_i32x4(r[8 + j], r[12 + j], 0xEE);
    m[j] = _mm512_shuffle_i32x4(s0, s2, 0x88);
    m[4 + j] = _mm512_shuffle_i32x4(s0, s2, 0xDD);
    m[8 + j] = _mm512_shuffle_i32x4(s1, s3, 0x88);
    m[12 + j] = _mm512_shuffle_i32x4(s1, s3, 0xDD);
  }
}

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

}  // namespace

ATTEST_DOT_TARGET
PackCheck pack_transposed(const float* src, int rows, int cols, int ld_src, std::uint32_t* dst, int ld_dst,
                          float tiny) {
  Checker check{_mm512_set1_ps(tiny)};
  const int pairs = (cols + 1) / 2;
  for (int k0 = 0; k0 < pairs; k0 += 16)  // 16 pairs (32 elements) of 16 rows at a time
    for (int c0 = 0; c0 < ld_dst; c0 += 16) {
      __m512i m[16];
      for (int i = 0; i < 16; ++i) {
        if (c0 + i >= rows) {
          m[i] = _mm512_setzero_si512();
          continue;
        }
        const float* in = src + std::size_t(c0 + i) * ld_src + 2 * k0;
        const __m512 lo = _mm512_maskz_loadu_ps(first_lanes(cols - 2 * k0), in);
        const __m512 hi = _mm512_maskz_loadu_ps(first_lanes(cols - 2 * k0 - 16), in + 16);
        check.add(lo);
        check.add(hi);
        m[i] = (__m512i)_mm512_cvtne2ps_pbh(hi, lo);
      }
      transpose16(m);
      for (int j = 0; j < 16 && k0 + j < pairs; ++j) _mm512_storeu_si512(dst + std::size_t(k0 + j) * ld_dst + c0, m[j]);
    }
  return check.result();
}

ATTEST_DOT_TARGET
void scores(const std::uint32_t* q, int rows, int dk2, const std::uint32_t* kt, int ld, int width, float scale,
            float* s) {
  int r = 0;
  for (; r + 4 <= rows; r += 4) scores_rows<4>(q + r * dk2, dk2, kt, ld, width, scale, s + r * ld);
  for (; r < rows; ++r) scores_rows<1>(q + r * dk2, dk2, kt, ld, width, scale, s + r * ld);
}

ATTEST_DOT_TARGET
bool accumulate(float* acc, int rows, int dv, const float* rescale, const std::uint32_t* p, int ld2, int cols2,
                const std::uint32_t* v) {
  if (tiny_after_rescale(acc, rows, dv, rescale)) return false;
  int r = 0;
  for (; r + 4 <= rows; r += 4) accumulate_rows<4>(acc + r * dv, dv, rescale + r, p + r * ld2, ld2, cols2, v);
  for (; r < rows; ++r) accumulate_rows<1>(acc + r * dv, dv, rescale + r, p + r * ld2, ld2, cols2, v);
  return true;
}

#else

PackCheck pack_rows(const float*, int, int, int, std::uint32_t*, int, float) {
  throw std::logic_error("bf16::pack_rows needs AVX-512 BF16");
}
PackCheck pack_row_pairs(const float*, int, int, int, std::uint32_t*, int, float) {
  throw std::logic_error("bf16::pack_row_pairs needs AVX-512 BF16");
}
PackCheck pack_transposed(const float*, int, int, int, std::uint32_t*, int, float) {
  throw std::logic_error("bf16::pack_transposed needs AVX-512 BF16");
}
void scores(const std::uint32_t*, int, int, const std::uint32_t*, int, int, float, float*) {
  throw std::logic_error("bf16::scores needs AVX-512 BF16");
}
bool accumulate(float*, int, int, const float*, const std::uint32_t*, int, int, const std::uint32_t*) {
  throw std::logic_error("bf16::accumulate needs AVX-512 BF16");
}

#endif

}  // namespace attest::kernels::bf16
