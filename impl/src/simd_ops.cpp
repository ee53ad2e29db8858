#include "simd_ops.h"

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) && !defined(ATTEST_NO_MULTIVERSION)
#define ATTEST_MULTIVERSION __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define ATTEST_MULTIVERSION
#endif

namespace attest::kernels::simd {
namespace {

// exp(x) for x <= 0 (the argument of a softmax weight), branch-free so loops vectorize:
// x = n ln2 + r with |r| <= ln2/2 (Cody-Waite), e^r by a degree-6 polynomial (Cephes expf),
// times 2^n split in two factors so that subnormal results stay correct.
[[gnu::always_inline]] inline float exp_nonpositive(float x) {
  const float clamped = x < -104.0f ? -104.0f : x;
  const float n = std::nearbyint(clamped * 1.44269504088896341f);
  float r = clamped - n * 0.693359375f;
  r = r + n * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  const std::int32_t ni = static_cast<std::int32_t>(n);
  const std::int32_t half = ni / 2;
  const float scale1 = std::bit_cast<float>((half + 127) << 23);
  const float scale2 = std::bit_cast<float>((ni - half + 127) << 23);
  const float result = p * scale1 * scale2;
  return x < -103.9f ? 0.0f : (x == x ? result : x);  // -inf and far below: 0; NaN stays NaN
}

// Four rows at a time with their LD scores held in registers across the whole dot product.
template <int LD>
[[gnu::always_inline]] inline int scores_blocked(const float* q, int rows, int dk, const float* kt, float scale, float* s) {
  int r = 0;
  for (; r + 4 <= rows; r += 4) {
    float a0[LD] = {}, a1[LD] = {}, a2[LD] = {}, a3[LD] = {};
    const float* q0 = q + r * dk;
    for (int k = 0; k < dk; ++k) {
      const float* krow = kt + k * LD;
      const float x0 = q0[k], x1 = q0[dk + k], x2 = q0[2 * dk + k], x3 = q0[3 * dk + k];
      for (int c = 0; c < LD; ++c) {
        a0[c] += x0 * krow[c];
        a1[c] += x1 * krow[c];
        a2[c] += x2 * krow[c];
        a3[c] += x3 * krow[c];
      }
    }
    for (int c = 0; c < LD; ++c) {
      s[r * LD + c] = a0[c] * scale;
      s[(r + 1) * LD + c] = a1[c] * scale;
      s[(r + 2) * LD + c] = a2[c] * scale;
      s[(r + 3) * LD + c] = a3[c] * scale;
    }
  }
  return r;
}

}  // namespace

ATTEST_MULTIVERSION
void scores(const float* q, int rows, int dk, const float* kt, int ld, float scale, float* s) {
  int done = 0;
  if (ld == 32) done = scores_blocked<32>(q, rows, dk, kt, scale, s);
  if (ld == 64) done = scores_blocked<64>(q, rows, dk, kt, scale, s);
  for (int r = done; r < rows; ++r) {
    float* srow = s + r * ld;
    const float* qrow = q + r * dk;
    for (int c = 0; c < ld; ++c) srow[c] = 0.0f;
    for (int k = 0; k < dk; ++k) {
      const float qk = qrow[k];
      const float* krow = kt + k * ld;
      for (int c = 0; c < ld; ++c) srow[c] += qk * krow[c];
    }
    for (int c = 0; c < ld; ++c) srow[c] *= scale;
  }
}

ATTEST_MULTIVERSION
float max_of(const float* x, int n) {
  float lanes[8];
  for (float& l : lanes) l = -std::numeric_limits<float>::infinity();
  int c = 0;
  for (; c + 8 <= n; c += 8)
    for (int l = 0; l < 8; ++l) lanes[l] = lanes[l] > x[c + l] ? lanes[l] : x[c + l];
  float m = -std::numeric_limits<float>::infinity();
  for (float l : lanes) m = m > l ? m : l;
  for (; c < n; ++c) m = m > x[c] ? m : x[c];
  return m;
}

ATTEST_MULTIVERSION
float exp_shift_sum(float* x, int n, float shift) {
  for (int c = 0; c < n; ++c) x[c] = exp_nonpositive(x[c] - shift);
  float lanes[8] = {};
  int c = 0;
  for (; c + 8 <= n; c += 8)
    for (int l = 0; l < 8; ++l) lanes[l] += x[c + l];
  float sum = 0.0f;
  for (float l : lanes) sum += l;
  for (; c < n; ++c) sum += x[c];
  return sum;
}

ATTEST_MULTIVERSION
void rescale_accumulate(float* acc, int dv, float rescale, const float* p, int cols, const float* v) {
  int d0 = 0;
  // 32 output columns at a time, held in registers across all keys of the tile.
  for (; d0 + 32 <= dv; d0 += 32) {
    float a[32];
    for (int d = 0; d < 32; ++d) a[d] = acc[d0 + d] * rescale;
    for (int c = 0; c < cols; ++c) {
      const float pc = p[c];
      if (pc == 0.0f) continue;  // masked (or underflowed): never touch its value row
      const float* vrow = v + c * dv + d0;
      for (int d = 0; d < 32; ++d) a[d] += pc * vrow[d];
    }
    for (int d = 0; d < 32; ++d) acc[d0 + d] = a[d];
  }
  if (d0 == dv) return;
  for (int d = d0; d < dv; ++d) acc[d] *= rescale;
  for (int c = 0; c < cols; ++c) {
    const float pc = p[c];
    if (pc == 0.0f) continue;
    const float* vrow = v + c * dv;
    for (int d = d0; d < dv; ++d) acc[d] += pc * vrow[d];
  }
}

ATTEST_MULTIVERSION
void rescale_accumulate_rows(float* acc, int rows, int dv, const float* rescale, const float* p, int ld, int cols,
                             const float* v) {
  int r = 0;
  for (; r + 2 <= rows && dv % 32 == 0; r += 2) {
    float* acc0 = acc + r * dv;
    float* acc1 = acc0 + dv;
    const float* p0 = p + r * ld;
    const float* p1 = p0 + ld;
    for (int d0 = 0; d0 < dv; d0 += 32) {
      float a0[32], a1[32];
      for (int d = 0; d < 32; ++d) a0[d] = acc0[d0 + d] * rescale[r], a1[d] = acc1[d0 + d] * rescale[r + 1];
      for (int c = 0; c < cols; ++c) {
        const float x0 = p0[c], x1 = p1[c];
        if (x0 == 0.0f && x1 == 0.0f) continue;  // masked for both rows: never touch the value row
        const float* vrow = v + c * dv + d0;
        if (x0 != 0.0f && x1 != 0.0f) {
          for (int d = 0; d < 32; ++d) a0[d] += x0 * vrow[d], a1[d] += x1 * vrow[d];
        } else if (x0 != 0.0f) {
          for (int d = 0; d < 32; ++d) a0[d] += x0 * vrow[d];
        } else {
          for (int d = 0; d < 32; ++d) a1[d] += x1 * vrow[d];
        }
      }
      for (int d = 0; d < 32; ++d) acc0[d0 + d] = a0[d], acc1[d0 + d] = a1[d];
    }
  }
  for (; r < rows; ++r) rescale_accumulate(acc + r * dv, dv, rescale[r], p + r * ld, cols, v);
}

ATTEST_MULTIVERSION
void scale(float* x, int n, float a) {
  for (int d = 0; d < n; ++d) x[d] *= a;
}

}  // namespace attest::kernels::simd
