// Vectorizable building blocks of the fast kernels. Each is a plain loop over contiguous
// floats that the compiler turns into SIMD code; the library is compiled twice for x86-64
// (baseline and x86-64-v3: AVX2 + FMA) and picks one at run time (target_clones).
#pragma once

namespace attest::kernels::simd {

// s[r * ld + c] = scale * sum_k q[r * dk + k] * kt[k * ld + c], for r < rows, c < ld.
// kt is the key tile transposed (Dk x ld), zero-padded past the real keys.
void scores(const float* q, int rows, int dk, const float* kt, int ld, float scale, float* s);

// Largest of x[0..n).
float max_of(const float* x, int n);

// x[c] = exp(x[c] - shift) (exactly 0 for x[c] = -inf); returns the sum of the results.
// exp is a polynomial of at most 2 ulp error (exp_ulps in the kernel's capabilities).
float exp_shift_sum(float* x, int n, float shift);

// acc[d] = acc[d] * rescale + sum_c p[c] * v[c * dv + d]   (p[c] = 0 rows are skipped).
void rescale_accumulate(float* acc, int dv, float rescale, const float* p, int cols, const float* v);

// For every row r < rows: acc_r = acc_r * rescale[r] + sum_c p_r[c] * v[c][:], with p_r the
// row r of p (stride ld) and acc_r of acc (stride dv). Pairs of rows share each V load.
void rescale_accumulate_rows(float* acc, int rows, int dv, const float* rescale, const float* p, int ld, int cols,
                             const float* v);

// x[d] *= a.
void scale(float* x, int n, float a);

}  // namespace attest::kernels::simd
