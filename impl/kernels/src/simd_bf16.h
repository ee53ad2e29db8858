// The bf16 building blocks of tiled_bf16: rounding to bf16, packing into the pair layouts the
// AVX-512 BF16 dot product reads, and the two dot-product micro-kernels (Q.K^T and P.V) on
// VDPBF16PS. A pair is two bf16 values in one 32-bit word, the even element in the low half.
//
// VDPBF16PS treats subnormal inputs as zero and flushes subnormal results (DAZ/FTZ), which the
// f32 accumulator the kernel declares does not. Packing therefore reports values whose products
// could reach the subnormal range, and the caller sends those tiles to the f32 micro-kernels
// (simd_ops.h) instead: the dot products only see magnitudes that keep every partial sum normal.
#pragma once

#include <cstdint>

namespace attest::kernels::bf16 {

// Whether the CPU has the AVX-512 BF16 dot product.
bool has_dot_products();

// What packing saw: a nonzero magnitude below the caller's threshold, or a non-finite value.
struct PackCheck {
  bool tiny = false;
  bool nonfinite = false;
  bool dot_safe() const { return !tiny && !nonfinite; }
};

// Below these (nonzero) magnitudes the dot product could flush a partial sum. With
// |q|, |k|, |v| >= 2^-48 and weights >= 2^-32 every product is a multiple of 2^-110 (scores)
// or 2^-94 (P.V), so a nonzero partial sum never falls below 2^-126.
inline constexpr float kTinyInput = 0x1p-48f;
inline constexpr float kTinyWeight = 0x1p-32f;
// A rescaled accumulator below this is not handed to the dot product (see accumulate).
inline constexpr float kTinyAccumulator = 0x1p-100f;

// x[i] = x rounded to the nearest bf16 (ties to even; NaN stays NaN), in place.
void round(float* x, int n);

// simd::softmax_fold_rows (same contract), the rows of a panel interleaved.
void softmax_fold_rows(float* s, int rows, int ld, int cols, float* row_max, float* row_sum, float* rescale);

// The functions below need has_dot_products(). Packing rounds to nearest even; a value the check
// reports as tiny may be packed as 0 (the conversion flushes subnormals): such a tile is not for
// the dot product.

// Pairs along rows: dst[r * ld_dst + k] = pair(src[r * ld_src + 2k], src[r * ld_src + 2k + 1])
// for r < rows, k < ld_dst; elements at or past cols are 0. Values are rounded to bf16.
PackCheck pack_rows(const float* src, int rows, int cols, int ld_src, std::uint32_t* dst, int ld_dst, float tiny);

// Pairs across rows: dst[k * ld_dst + c] = pair(src[2k * ld_src + c], src[(2k + 1) * ld_src + c])
// for k < (rows + 1) / 2, c < ld_dst; rows at or past `rows` and columns at or past cols are 0.
PackCheck pack_row_pairs(const float* src, int rows, int cols, int ld_src, std::uint32_t* dst, int ld_dst, float tiny);

// Pairs along rows, stored transposed: dst[k * ld_dst + c] = pair(src[c * ld_src + 2k],
// src[c * ld_src + 2k + 1]) for k < (cols + 1) / 2, c < ld_dst (a multiple of 16); rows at or
// past `rows` and elements at or past cols are 0. The key tile, as scores reads it.
PackCheck pack_transposed(const float* src, int rows, int cols, int ld_src, std::uint32_t* dst, int ld_dst, float tiny);

// s[r * ld + c] = scale * sum_k q[r][k] * K[c][k], for r < rows, c < width (width a multiple of
// 16, <= ld). q: rows x dk2 pairs (pack_rows); kt: dk2 x ld pairs, the key tile transposed
// (pack_transposed). Products are exact; sums are f32.
void scores(const std::uint32_t* q, int rows, int dk2, const std::uint32_t* kt, int ld, int width, float scale,
            float* s);

// For every row r < rows: acc_r = acc_r * rescale[r] + sum_c p_r[c] * v[c][:], p: rows x ld2 pairs
// of weights (pack_rows), v: cols2 x dv pairs of values (pack_row_pairs of the value tile).
// Returns false, leaving acc untouched, when a rescaled accumulator would be a nonzero magnitude
// below kTinyAccumulator (the dot product would flush it); the caller then uses the f32 path.
bool accumulate(float* acc, int rows, int dv, const float* rescale, const std::uint32_t* p, int ld2, int cols2,
                const std::uint32_t* v);

}  // namespace attest::kernels::bf16
