// Vectorized building blocks of the fast kernels, written once with GCC vector extensions
// (16-float values); on x86-64 each is cloned for baseline, x86-64-v3 (AVX2 + FMA) and
// x86-64-v4 (AVX-512), one picked at run time (target_clones).
#pragma once

namespace attest::kernels::simd {

// s[r * ld + c] = scale * sum_k q[r * dk + k] * kt[k * ld + c], for r < rows, c < width <= ld.
// kt is the key tile transposed (Dk x ld), zero-padded past the real keys; a width rounded up
// to 16 from the real keys keeps a short tile from paying for the whole ld.
void scores(const float* q, int rows, int dk, const float* kt, int ld, int width, float scale, float* s);

// Largest of x[0..n).
float max_of(const float* x, int n);

// x[c] = exp(x[c] - shift) (exactly 0 for x[c] = -inf); returns the sum of the results.
// exp is a polynomial of at most 2 ulp error (exp_ulps in the kernel's capabilities).
float exp_shift_sum(float* x, int n, float shift);

// One step of the online softmax for rows r < rows of scores s (stride ld, -inf where masked,
// columns [0, cols) read): folds each row into its running (row_max[r], row_sum[r]), leaves the
// weights exp(s - new max) in s (0 where masked; all 0 and the state unchanged when the whole row
// is masked) and sets rescale[r], the factor the row's accumulator must be scaled by (0 on the
// first visible tile).
void softmax_fold_rows(float* s, int rows, int ld, int cols, float* row_max, float* row_sum, float* rescale);

// For every row r < rows: acc_r = acc_r * rescale[r] + sum_c p_r[c] * v[c][:], with p_r the
// row r of p (stride ld) and acc_r of acc (stride dv). Four rows share each V load; a key
// whose weight is 0 in a row never touches that row (its V may hold NaN or inf).
void rescale_accumulate_rows(float* acc, int rows, int dv, const float* rescale, const float* p, int ld, int cols,
                             const float* v);

// dst[k * ld + c] = src[c * cols + k] for c < rows, 0 for rows <= c < ld (a tile of rows x cols
// loaded transposed and zero-padded to ld columns).
void transpose(const float* src, int rows, int cols, float* dst, int ld);

// x[d] *= a.
void scale(float* x, int n, float a);

}  // namespace attest::kernels::simd
