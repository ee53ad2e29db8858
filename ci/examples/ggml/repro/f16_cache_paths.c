/* Why an f16 K/V cache cannot be declared as f32 arithmetic, and why each ggml path has its own
 * declaration: two keys with equal scores and V = 1 and V = 2^-11, whose exact mean is
 * 0.500244140625. ggml's scalar loop (one query: one_chunk) sums P.V in f16: 1 + 2^-11 is a tie
 * that rounds to 1, and it prints 0.5. Its tiled path (64 queries, Dv = 16) widens V to f32 and
 * prints the exact mean. ggml_f16_t1_declared_f32 claims f32 everywhere: NOT CERTIFIED. */
#include <stdio.h>
#include <string.h>

#include "ggml.h"
#include "run_graph.h"

enum { TK = 2, D = 16, MAX_TQ = 64 };

/* O[0][0] of Tq queries of zeros against two keys of zeros (equal scores). */
static int first_output(int queries, float* result) {
  static float q[MAX_TQ][D], out[MAX_TQ][D];
  static ggml_fp16_t k[TK][D], v[TK][D];
  memset(q, 0, sizeof q);
  for (int c = 0; c < D; ++c) {
    k[0][c] = k[1][c] = ggml_fp32_to_fp16(0.0f);
    v[0][c] = ggml_fp32_to_fp16(1.0f);
    v[1][c] = ggml_fp32_to_fp16(1.0f / 2048.0f);
  }
  struct ggml_init_params init = {1 << 20, NULL, 1};
  struct ggml_context* ctx = ggml_init(init);
  struct ggml_tensor* tq = ggml_new_tensor_4d(ctx, GGML_TYPE_F32, D, queries, 1, 1);
  struct ggml_tensor* tk = ggml_new_tensor_4d(ctx, GGML_TYPE_F16, D, TK, 1, 1);
  struct ggml_tensor* tv = ggml_new_tensor_4d(ctx, GGML_TYPE_F16, D, TK, 1, 1);
  struct ggml_tensor* tm = ggml_new_tensor_4d(ctx, GGML_TYPE_F16, TK, queries, 1, 1);
  static ggml_fp16_t mask[MAX_TQ][TK]; /* all zero: both keys visible, as llama.cpp passes */
  tq->data = q, tk->data = k, tv->data = v, tm->data = mask;
  struct ggml_tensor* o = ggml_flash_attn_ext(ctx, tq, tk, tv, tm, 1.0f, 0.0f, 0.0f);
  o->data = out;
  const int status = run_graph(ctx, o, 1);
  ggml_free(ctx);
  *result = out[0][0];
  return status;
}

int main(void) {
  float one_chunk, tiled;
  if (first_output(1, &one_chunk) || first_output(64, &tiled)) return 2;
  printf("mean of V = 1 and V = 2^-11, f16 K/V cache\n");
  printf("exact                 0.500244140625\n");
  printf("one_chunk (Tq = 1)    %.12f\n", one_chunk);
  printf("tiled     (Tq = 64)   %.12f\n", tiled);
  return 0;
}
