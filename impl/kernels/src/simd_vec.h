// The vector primitives both vectorized files share (simd_ops.cpp, simd_bf16.cpp): 16-float
// values in GCC vector extensions, lane reductions and the softmax's exp. Internal to the kernels.
#pragma once

#include <cstdint>
#include <cstring>
#include <limits>

// GCC only: clang 14 compiles a function whose header declaration lacks the attribute as one
// body for the first target (AVX-512 code with no dispatch: SIGILL on an AVX2 machine), and its
// resolver for "arch=" clones never picks one. Clang builds (the fuzz targets) take baseline code.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(ATTEST_NO_MULTIVERSION)
#define ATTEST_MULTIVERSION __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define ATTEST_MULTIVERSION
#endif

namespace attest::kernels::simd {

// 16 floats as one value; GCC and clang lower it to whatever each clone has (2 x AVX2, 1 x AVX-512,
// 4 x SSE), so the register blocking below is written once and stays portable.
using vec16 = float __attribute__((vector_size(64)));

[[gnu::always_inline]] inline vec16 load16(const float* p) {
  vec16 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
[[gnu::always_inline]] inline void store16(float* p, vec16 v) { std::memcpy(p, &v, sizeof v); }

using vec16i = std::int32_t __attribute__((vector_size(64)));

[[gnu::always_inline]] inline vec16 splat(float a) { return vec16{} + a; }

// Horizontal max and sum by halving, so the reduction is four shuffles, not fifteen scalar steps.
[[gnu::always_inline]] inline float max_lanes(vec16 v) {
  vec16 s = __builtin_shufflevector(v, v, 8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7);
  v = v > s ? v : s;
  s = __builtin_shufflevector(v, v, 4, 5, 6, 7, 0, 1, 2, 3, 12, 13, 14, 15, 8, 9, 10, 11);
  v = v > s ? v : s;
  s = __builtin_shufflevector(v, v, 2, 3, 0, 1, 6, 7, 4, 5, 10, 11, 8, 9, 14, 15, 12, 13);
  v = v > s ? v : s;
  s = __builtin_shufflevector(v, v, 1, 0, 3, 2, 5, 4, 7, 6, 9, 8, 11, 10, 13, 12, 15, 14);
  v = v > s ? v : s;
  return v[0];
}
[[gnu::always_inline]] inline float sum_lanes(vec16 v) {
  v += __builtin_shufflevector(v, v, 8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7);
  v += __builtin_shufflevector(v, v, 4, 5, 6, 7, 0, 1, 2, 3, 12, 13, 14, 15, 8, 9, 10, 11);
  v += __builtin_shufflevector(v, v, 2, 3, 0, 1, 6, 7, 4, 5, 10, 11, 8, 9, 14, 15, 12, 13);
  v += __builtin_shufflevector(v, v, 1, 0, 3, 2, 5, 4, 7, 6, 9, 8, 11, 10, 13, 12, 15, 14);
  return v[0];
}

// exp(x) for x <= 0 (the argument of a softmax weight) on 16 lanes, branch-free:
// x = n ln2 + r with |r| <= ln2/2 (Cody-Waite; n rounded by the 1.5 * 2^23 trick), e^r by a
// degree-6 polynomial (Cephes expf), times 2^n split in two factors so that subnormal results
// stay correct; -inf and far below give 0, NaN stays NaN.
[[gnu::always_inline]] inline vec16 exp_nonpositive16(vec16 x) {
  const vec16 clamped = x < -104.0f ? splat(-104.0f) : x;
  const vec16 n = (clamped * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  vec16 r = clamped - n * 0.693359375f;
  r = r + n * 2.12194440e-4f;
  vec16 p = splat(1.9875691500e-4f);
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  const vec16i ni = __builtin_convertvector(n, vec16i);
  const vec16i half = ni >> 1;
  const vec16 result = p * (vec16)((half + 127) << 23) * (vec16)((ni - half + 127) << 23);
  const vec16 finite = x < -103.9f ? splat(0.0f) : result;
  return x == x ? finite : x;
}

// The same function for one value (row tails, rescale factors), so every lane agrees with it.
[[gnu::always_inline]] inline float exp_nonpositive(float x) { return exp_nonpositive16(splat(x))[0]; }

}  // namespace attest::kernels::simd
