/* ggml_flash_attn_ext with a logit softcap and no mask, on the tiled path (64 queries, Dv = 16):
 * the tile's padding keys (past Tk = 5 in a 64-key tile) are set to -inf before the softcap, and
 * softcap(-inf) = -c, so they take softmax weight. With an all-zero mask (what llama.cpp always
 * passes) the padding keys stay at -inf and the output is right.
 * Attest's counterexample: H=2/1 Tq=64 Tk=5 Dk=1 Dv=16; here H=1 and Q, K chosen by hand. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ggml.h"
#include "run_graph.h"

enum { TQ = 64, TK = 5, DV = 16 };
static const float softcap = 5.0f;

static int run(int with_mask, float out[TQ][DV]) {
  static float q[TQ], k[TK], v[TK][DV];
  static ggml_fp16_t mask[TQ][TK]; /* all zero: every key visible */
  for (int i = 0; i < TQ; ++i) q[i] = 4.0f;
  for (int j = 0; j < TK; ++j) k[j] = (float)j - 2.0f; /* scores 4 * (j - 2): -8 .. 8 */
  memset(v, 0, sizeof v);
  for (int j = 0; j < TK; ++j) v[j][j] = 1.0f; /* V = I: O[i][j] is key j's softmax weight */
  struct ggml_init_params init = {1 << 20, NULL, 1};
  struct ggml_context* ctx = ggml_init(init);
  struct ggml_tensor* tq = ggml_new_tensor_4d(ctx, GGML_TYPE_F32, 1, TQ, 1, 1);
  struct ggml_tensor* tk = ggml_new_tensor_4d(ctx, GGML_TYPE_F32, 1, TK, 1, 1);
  struct ggml_tensor* tv = ggml_new_tensor_4d(ctx, GGML_TYPE_F32, DV, TK, 1, 1);
  struct ggml_tensor* tm = ggml_new_tensor_4d(ctx, GGML_TYPE_F16, TK, TQ, 1, 1);
  tq->data = q, tk->data = k, tv->data = v, tm->data = mask;
  struct ggml_tensor* o = ggml_flash_attn_ext(ctx, tq, tk, tv, with_mask ? tm : NULL, 1.0f, 0.0f, softcap);
  o->data = out;
  const int status = run_graph(ctx, o, 1);
  ggml_free(ctx);
  return status;
}

int main(void) {
  static float no_mask[TQ][DV], zero_mask[TQ][DV];
  if (run(0, no_mask) || run(1, zero_mask)) return 2;
  double weight[TK], sum = 0;
  for (int j = 0; j < TK; ++j) sum += weight[j] = exp(softcap * tanh(4.0 * (j - 2.0) / softcap));
  printf("softcap 5, Tq 64, Tk 5: the weight of each key for query 0\n");
  printf("key  exact      no mask    zero mask\n");
  for (int j = 0; j < TK; ++j) printf("%d    %.7f  %.7f  %.7f\n", j, weight[j] / sum, no_mask[0][j], zero_mask[0][j]);
  double total = 0;
  for (int j = 0; j < TK; ++j) total += no_mask[0][j];
  printf("no mask: the five weights sum to %.7f\n", total);
  return 0;
}
