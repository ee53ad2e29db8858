/* A causal kernel with ALiBi as inference libraries ship it: the slopes are not an input but the
 * standard geometric set, computed from one max_bias (8 here) and the head count. The kernel
 * reads attest's slope vector only to know that ALiBi is on. ABI 2.1 lets it say so
 * (`contract.alibi_slopes = ATTEST_ALIBI_STANDARD`): attest then sends exactly that set, where
 * it would otherwise draw arbitrary slopes that this kernel would silently replace.
 *
 *   cc -std=c99 -O2 -fPIC -shared -I impl/abi/include standard_alibi_attention.c -lm -o libstandard_alibi_attention.so
 *   attest certify --kernel ./libstandard_alibi_attention.so
 *
 * The build compiles two more copies for ci/tests/cli_test.py:
 *   ALIBI_UNDECLARED        the same kernel declaring arbitrary slopes: attest's slopes are not
 *                           the ones it uses (NOT CERTIFIED);
 *   BROKEN_SLOPE_EXPONENT   declared, but head h gets 2^(-8 h / n) instead of 2^(-8 (h + 1) / n). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attest/attest_abi.h"

#define MAX_BIAS 8.0

static char last_error[256];

/* The standard slopes: n = 2^floor(log2 H); heads h < n get m0^(h + 1), the others the odd powers
 * m1^(2 (h - n) + 1), with m0 = 2^(-max_bias / n) and m1 = 2^(-max_bias / 2n). */
static float alibi_slope(int h, int heads) {
  int n = 1;
  while (n * 2 <= heads) n *= 2;
  const double m0 = exp2(-MAX_BIAS / n), m1 = exp2(-MAX_BIAS / 2 / n);
#ifdef BROKEN_SLOPE_EXPONENT
  return (float)(h < n ? pow(m0, h) : pow(m1, 2 * (h - n) + 1));
#else
  return (float)(h < n ? pow(m0, h + 1) : pow(m1, 2 * (h - n) + 1));
#endif
}

static attest_status forward(void* user, const attest_problem_v2* p, attest_outputs_v2* out) {
  (void)user;
  const int tq = p->q_len, tk = p->k_len, dk = p->head_dim, dv = p->value_dim, group = p->heads / p->kv_heads;
  const float* q_all = p->q;
  const float* k_all = p->k;
  const float* v_all = p->v;
  float* o_all = out->o;
  float* score = malloc(sizeof(float) * (size_t)tk);
  if (!score) {
    strcpy(last_error, "out of memory");
    return ATTEST_INTERNAL_ERROR;
  }
  for (int b = 0; b < p->batch; ++b)
    for (int h = 0; h < p->heads; ++h) {
      const size_t kv = (size_t)b * p->kv_heads + h / group;
      const float slope = p->alibi_slopes ? alibi_slope(h, p->heads) : 0.0f;
      for (int i = 0; i < tq; ++i) {
        const size_t row = ((size_t)b * p->heads + h) * tq + i;
        const int64_t pos = p->q_offset + i;
        const float* q = q_all + row * dk;
        float* o = o_all + row * dv;
        float max = -INFINITY;
        for (int j = 0; j < tk; ++j) {
          score[j] = -INFINITY;
          if (p->causal && j > pos) continue;
          const float* k = k_all + (kv * tk + j) * dk;
          float dot = 0.0f;
          for (int c = 0; c < dk; ++c) dot += q[c] * k[c];
          score[j] = dot * (float)p->scale + slope * (float)(j - pos); /* the ALiBi term */
          if (score[j] > max) max = score[j];
        }
        for (int c = 0; c < dv; ++c) o[c] = 0.0f;
        if (max == -INFINITY) { /* no visible key: the zero policy */
          if (out->lse) out->lse[row] = -INFINITY;
          continue;
        }
        float sum = 0.0f;
        for (int j = 0; j < tk; ++j)
          if (score[j] != -INFINITY) sum += score[j] = expf(score[j] - max);
        for (int j = 0; j < tk; ++j) {
          if (score[j] == -INFINITY) continue;
          const float* v = v_all + (kv * tk + j) * dv;
          for (int c = 0; c < dv; ++c) o[c] += score[j] / sum * v[c];
        }
        if (out->lse) out->lse[row] = max + logf(sum);
      }
    }
  free(score);
  strcpy(out->path, "alibi-loop");
  return ATTEST_OK;
}

static const char* error(void* user) {
  (void)user;
  return last_error;
}

#ifdef ALIBI_UNDECLARED
#define SLOPES ATTEST_ALIBI_ARBITRARY
#else
#define SLOPES ATTEST_ALIBI_STANDARD
#endif

static const attest_kernel_v2 kernel = {
    .abi_version = ATTEST_ABI_VERSION_2,
    .struct_size = sizeof(attest_kernel_v2),
    .name = "standard-alibi",
    .capabilities = ATTEST_CAP_CAUSAL | ATTEST_CAP_GQA | ATTEST_CAP_LSE | ATTEST_CAP_ALIBI,
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
                 .alibi_slopes = SLOPES,
                 .alibi_max_bias = MAX_BIAS},
    .user = NULL,
    .forward = forward,
    .last_error = error,
};

const attest_kernel_v2* attest_kernel_entry(void) { return &kernel; }
