/* A kernel that declares bf16 scores and an 8-ulp exp (ABI v2), the precision of a CPU library's
 * fast path: Q, K, V and O float32, each q.k product and partial sum rounded to bf16, P and the
 * P.V accumulator float32. Correct as declared; built twice for hostile_test.py:
 *   (no define)      the kernel as declared: certified;
 *   HOSTILE_UNIFORM  mixes 10% of uniform attention into every row (o = 0.9 softmax.V + 0.1 mean
 *                    of the visible V rows): a wrong kernel that a 16-bit declaration must not
 *                    hide (it was CERTIFIED at quick). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "attest/attest_abi.h"

#ifdef HOSTILE_UNIFORM
#define UNIFORM_SHARE 0.1f
#define KERNEL_NAME "hostile-uniform-mix"
#else
#define UNIFORM_SHARE 0.0f
#define KERNEL_NAME "hostile-bf16-scores"
#endif

static char last_error[128];

/* x rounded to the nearest bf16 value (ties to even), kept in a float. */
static float round_to_bf16(float x) {
  uint32_t bits;
  memcpy(&bits, &x, sizeof bits);
  if ((bits & 0x7F800000u) == 0x7F800000u) return x; /* inf, NaN */
  bits += 0x7FFFu + ((bits >> 16) & 1u);
  bits &= 0xFFFF0000u;
  memcpy(&x, &bits, sizeof x);
  return x;
}

static int visible(const attest_problem_v2* p, int b, int i, int j) {
  const int64_t pos = p->q_offset + i;
  if (p->q_valid && i >= p->q_valid[b]) return 0;
  if (p->causal && j > pos) return 0;
  if (p->kv_valid && j >= p->kv_valid[b]) return 0;
  return 1;
}

static attest_status forward(void* user, const attest_problem_v2* p, attest_outputs_v2* out) {
  (void)user;
  const int dk = p->head_dim, dv = p->value_dim, tq = p->q_len, tk = p->k_len, group = p->heads / p->kv_heads;
  const float *q_all = p->q, *k_all = p->k, *v_all = p->v;
  float* weight = malloc(sizeof(float) * (size_t)tk);
  if (!weight) {
    strcpy(last_error, "out of memory");
    return ATTEST_INTERNAL_ERROR;
  }
  const float scale = (float)p->scale;
  for (int b = 0; b < p->batch; ++b)
    for (int h = 0; h < p->heads; ++h) {
      const int g = h / group;
      const float* k_head = k_all + ((size_t)b * p->kv_heads + g) * tk * dk;
      const float* v_head = v_all + ((size_t)b * p->kv_heads + g) * tk * dv;
      for (int i = 0; i < tq; ++i) {
        const size_t row = ((size_t)b * p->heads + h) * tq + i;
        const float* q = q_all + row * dk;
        float* o = (float*)out->o + row * dv;
        float max = -INFINITY;
        int seen = 0;
        for (int j = 0; j < tk; ++j) {
          weight[j] = -INFINITY;
          if (!visible(p, b, i, j)) continue;
          float dot = 0.0f;
          for (int c = 0; c < dk; ++c) dot = round_to_bf16(dot + round_to_bf16(q[c] * k_head[(size_t)j * dk + c]));
          weight[j] = round_to_bf16(dot * scale);
          if (weight[j] > max) max = weight[j];
          ++seen;
        }
        for (int c = 0; c < dv; ++c) o[c] = 0.0f;
        if (!seen) {
          if (out->lse) out->lse[row] = -INFINITY;
          continue;
        }
        float sum = 0.0f;
        for (int j = 0; j < tk; ++j)
          if (weight[j] != -INFINITY) sum += weight[j] = expf(weight[j] - max);
        for (int j = 0; j < tk; ++j) {
          if (weight[j] == -INFINITY) continue;
          const float w = (1.0f - UNIFORM_SHARE) * weight[j] / sum + UNIFORM_SHARE / (float)seen;
          for (int c = 0; c < dv; ++c) o[c] += w * v_head[(size_t)j * dv + c];
        }
        if (out->lse) out->lse[row] = max + logf(sum);
      }
    }
  strcpy(out->path, "bf16-scores-loop");
  free(weight);
  return ATTEST_OK;
}

static const char* error(void* user) {
  (void)user;
  return last_error;
}

static const attest_kernel_v2 kernel = {
    .abi_version = ATTEST_ABI_VERSION_2,
    .struct_size = sizeof(attest_kernel_v2),
    .name = KERNEL_NAME,
    /* No mask term, like the kernel of the report: only the precision checks can see the mix. */
    .capabilities = ATTEST_CAP_GQA | ATTEST_CAP_LSE,
    .empty_rows = ATTEST_EMPTY_ZERO,
    .precision = {.q = ATTEST_F32,
                  .k = ATTEST_F32,
                  .v = ATTEST_F32,
                  .o = ATTEST_F32,
                  .scores = ATTEST_BF16,
                  .p = ATTEST_F32,
                  .accumulator = ATTEST_F32,
                  .exp_ulps = 8.0},
    .contract = {.head_dim = {1, 256}, .q_len = {1, 4096}, .k_len = {1, 4096}},
    .user = NULL,
    .forward = forward,
    .last_error = error,
};

const attest_kernel_v2* attest_kernel_entry(void) { return &kernel; }
