/* A training kernel's forward pass: self-attention only, as a training step computes it. One
 * sequence attends to itself, so there are as many keys as queries (Tq == Tk) and query i sits at
 * position i (q_offset 0). The loop relies on both: it runs its keys over the query count and
 * takes i as the query's position. ABI 2.1 lets it say so (`contract.self_attention_only`);
 * attest then draws only square problems with q_offset 0, and reports what needs others (decode
 * equals prefill, a shifted query block) as not covered, with the reason.
 *
 *   cc -std=c99 -O2 -fPIC -shared -I impl/abi/include self_attention_attention.c -lm -o libself_attention_attention.so
 *   attest certify --kernel ./libself_attention_attention.so
 *
 * The build compiles two more copies for ci/tests/cli_test.py:
 *   SELF_ATTENTION_UNDECLARED  the same loop without the declaration: attest sends Tq != Tk, and
 *                              the loop's assumption gives wrong outputs (NOT CERTIFIED);
 *   BROKEN_CAUSAL_DIAGONAL     declared, but the causal mask hides the diagonal (j < i, not j <= i). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attest/attest_abi.h"

static char last_error[256];

static attest_status forward(void* user, const attest_problem_v2* p, attest_outputs_v2* out) {
  (void)user;
  const int t = p->q_len, dk = p->head_dim, dv = p->value_dim, group = p->heads / p->kv_heads;
  const float* q_all = p->q;
  const float* k_all = p->k;
  const float* v_all = p->v;
  float* o_all = out->o;
  float* score = malloc(sizeof(float) * (size_t)t);
  if (!score) {
    strcpy(last_error, "out of memory");
    return ATTEST_INTERNAL_ERROR;
  }
  for (int b = 0; b < p->batch; ++b)
    for (int h = 0; h < p->heads; ++h) {
      const size_t kv = (size_t)b * p->kv_heads + h / group;
      for (int i = 0; i < t; ++i) {
        const size_t row = ((size_t)b * p->heads + h) * t + i;
        const float* q = q_all + row * dk;
        float* o = o_all + row * dv;
        const int valid = p->kv_valid ? p->kv_valid[b] : t;
        float max = -INFINITY;
        for (int j = 0; j < t; ++j) { /* keys: as many as queries */
#ifdef BROKEN_CAUSAL_DIAGONAL
          const int hidden = p->causal && j >= i;
#else
          const int hidden = p->causal && j > i; /* position i: q_offset is 0 */
#endif
          score[j] = -INFINITY;
          if (hidden || j >= valid) continue;
          const float* k = k_all + (kv * t + j) * dk;
          float dot = 0.0f;
          for (int c = 0; c < dk; ++c) dot += q[c] * k[c];
          score[j] = dot * (float)p->scale;
          if (score[j] > max) max = score[j];
        }
        for (int c = 0; c < dv; ++c) o[c] = 0.0f;
        if (max == -INFINITY) { /* no visible key: the zero policy */
          if (out->lse) out->lse[row] = -INFINITY;
          continue;
        }
        float sum = 0.0f;
        for (int j = 0; j < t; ++j)
          if (score[j] != -INFINITY) sum += score[j] = expf(score[j] - max);
        for (int j = 0; j < t; ++j) {
          if (score[j] == -INFINITY) continue;
          const float* v = v_all + (kv * t + j) * dv;
          for (int c = 0; c < dv; ++c) o[c] += score[j] / sum * v[c];
        }
        if (out->lse) out->lse[row] = max + logf(sum);
      }
    }
  free(score);
  strcpy(out->path, "self-attention");
  return ATTEST_OK;
}

static const char* error(void* user) {
  (void)user;
  return last_error;
}

#ifdef SELF_ATTENTION_UNDECLARED
#define SELF_ATTENTION_ONLY 0
#else
#define SELF_ATTENTION_ONLY 1
#endif

static const attest_kernel_v2 kernel = {
    .abi_version = ATTEST_ABI_VERSION_2,
    .struct_size = sizeof(attest_kernel_v2),
    .name = "self-attention",
    .capabilities = ATTEST_CAP_CAUSAL | ATTEST_CAP_KEY_PADDING | ATTEST_CAP_GQA | ATTEST_CAP_LSE,
    .empty_rows = ATTEST_EMPTY_ZERO,
    .precision = {.q = ATTEST_F32,
                  .k = ATTEST_F32,
                  .v = ATTEST_F32,
                  .o = ATTEST_F32,
                  .scores = ATTEST_F32,
                  .p = ATTEST_F32,
                  .accumulator = ATTEST_F32,
                  .exp_ulps = 1.0},
    .contract = {.head_dim = {1, 256},
                 .q_len = {1, 4096},
                 .k_len = {1, 4096},
                 .self_attention_only = SELF_ATTENTION_ONLY},
    .user = NULL,
    .forward = forward,
    .last_error = error,
};

const attest_kernel_v2* attest_kernel_entry(void) { return &kernel; }
