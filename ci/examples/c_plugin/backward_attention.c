/* A training kernel in plain C99 behind the attest C ABI 2.3: forward and backward (dQ, dK, dV,
 * dsinks) in float32, with the mask terms, GQA, LSE, softcap and sinks. The backward is the
 * textbook one, as llm.c's, ggml's and autograd's are, row by row: P recomputed from the forward's
 * LSE, D = sum_j P_j dP_j from that P (not dO . O from the O it is handed: attest's gradient bound
 * charges either), dS = P (dP - D) times softcap's slope 1 - tanh^2; it runs on one thread in a
 * fixed order, so it declares deterministic gradients.
 *
 *   cc -std=c99 -O2 -fPIC -shared -I impl/abi/include backward_attention.c -lm -o libbackward_attention.so
 *   attest certify --kernel ./libbackward_attention.so
 *
 * The build compiles the same file with one of these defined to get other plugins:
 *   TWO_PATHS                  the forward reports a path by Tq's parity (backward evidence still counts);
 *   CAUSAL_ONLY                a causal language model's: causal its only mask term, Tq == Tk only;
 *   BROKEN_DROPS_D             dS = P dP: the D term forgotten (gradient_ds_rows_sum_to_zero);
 *   BROKEN_SOFTCAP_SLOPE       softcap's 1 - tanh^2 left out of dS (gradient_matches_reference);
 *   BROKEN_BACKWARD_NULL       declares ATTEST_CAP_BACKWARD with no backward function (load error);
 *   BROKEN_BF16_BACKWARD       declares bf16 K/V storage with a backward (refused: not certifiable yet). */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "attest/attest_abi.h"

/* Whether query i of batch entry b sees key j: every enabled mask term must allow it. */
static int visible(const attest_problem_v2* p, int b, int i, int j) {
  const int64_t pos = p->q_offset + i;
  if (p->q_valid && i >= p->q_valid[b]) return 0;
  if (p->causal && j > pos) return 0;
  if (p->window && pos - j >= p->window) return 0;
  if (p->kv_valid && j >= p->kv_valid[b]) return 0;
  if (p->q_segment && p->q_segment[(size_t)b * p->q_len + i] != p->k_segment[(size_t)b * p->k_len + j]) return 0;
  if (p->explicit_mask && !p->explicit_mask[((size_t)b * p->q_len + i) * p->k_len + j]) return 0;
  return 1;
}

static const float* row_of(const void* base, size_t row, int width) { return (const float*)base + row * width; }

/* The logit of query row (b, h, i) for key j (-INFINITY when masked), and d logit / d (scale q.k). */
static float logit(const attest_problem_v2* p, int b, int h, int i, int j, float* slope) {
  const int g = h / (p->heads / p->kv_heads); /* GQA: the query heads of a group share kv head g */
  *slope = 1.0f;
  if (!visible(p, b, i, j)) return -INFINITY;
  const float* q = row_of(p->q, ((size_t)b * p->heads + h) * p->q_len + i, p->head_dim);
  const float* k = row_of(p->k, ((size_t)b * p->kv_heads + g) * p->k_len + j, p->head_dim);
  float x = 0.0f;
  for (int c = 0; c < p->head_dim; ++c) x += q[c] * k[c];
  x *= (float)p->scale;
  if (p->softcap > 0) {
    const float cap = (float)p->softcap, t = tanhf(x / cap);
#ifndef BROKEN_SOFTCAP_SLOPE
    *slope = 1.0f - t * t;
#endif
    x = cap * t;
  }
  return x;
}

static attest_status forward(void* user, const attest_problem_v2* p, attest_outputs_v2* out) {
  (void)user;
  const int tk = p->k_len, dv = p->value_dim, group = p->heads / p->kv_heads;
  for (int b = 0; b < p->batch; ++b)
    for (int h = 0; h < p->heads; ++h)
      for (int i = 0; i < p->q_len; ++i) {
        const size_t row = ((size_t)b * p->heads + h) * p->q_len + i;
        float* o = (float*)out->o + row * dv;
        const float sink = p->sinks ? p->sinks[h] : -INFINITY;
        float max = sink, sum = 0.0f, slope;
        for (int j = 0; j < tk; ++j) max = fmaxf(max, logit(p, b, h, i, j, &slope));
        for (int c = 0; c < dv; ++c) o[c] = 0.0f;
        if (max == -INFINITY) { /* a row that sees no key (and has no sink): O = 0, LSE = -inf */
          if (out->lse) out->lse[row] = -INFINITY;
          continue;
        }
        if (p->sinks) sum = expf(sink - max);
        for (int j = 0; j < tk; ++j) {
          const float s = logit(p, b, h, i, j, &slope);
          if (s == -INFINITY) continue;
          const float w = expf(s - max);
          const float* v = row_of(p->v, ((size_t)b * p->kv_heads + h / group) * tk + j, dv);
          sum += w;
          for (int c = 0; c < dv; ++c) o[c] += w * v[c];
        }
        for (int c = 0; c < dv; ++c) o[c] /= sum;
        if (out->lse) out->lse[row] = max + logf(sum);
      }
#ifdef TWO_PATHS
  strcpy(out->path, p->q_len % 2 ? "c-loop-odd" : "c-loop-even");
#else
  strcpy(out->path, "c-loop");
#endif
  return ATTEST_OK;
}

/* Unused in the BROKEN_BACKWARD_NULL build, which declares the capability without it. */
__attribute__((unused)) static attest_status backward(void* user, const attest_problem_v2* p,
                                                      const attest_backward_inputs* in, attest_gradients* out) {
  (void)user; /* in->threads: one thread always, which a deterministic backward may do */
  const int tk = p->k_len, dk = p->head_dim, dv = p->value_dim, group = p->heads / p->kv_heads;
  const size_t rows = (size_t)p->batch * p->heads * p->q_len, keys = (size_t)p->batch * p->kv_heads * tk;
  float* dq_all = out->dq;
  float* dk_all = out->dk;
  float* dv_all = out->dv;
  memset(dq_all, 0, sizeof(float) * rows * dk);
  memset(dk_all, 0, sizeof(float) * keys * dk);
  memset(dv_all, 0, sizeof(float) * keys * dv);
  if (out->dsinks) memset(out->dsinks, 0, sizeof(float) * p->heads);
  const float scale = (float)p->scale;
  for (int b = 0; b < p->batch; ++b)
    for (int h = 0; h < p->heads; ++h)
      for (int i = 0; i < p->q_len; ++i) {
        const size_t row = ((size_t)b * p->heads + h) * p->q_len + i;
        const float lse = in->lse[row];
        if (lse == -INFINITY) continue; /* a row that sees no key contributes nothing */
        const float* q = row_of(p->q, row, dk);
        const float* d_o = row_of(in->d_o, row, dv);
        float d = 0.0f; /* D = sum_j P_j dP_j, the softmax Jacobian's correction, from this row's own P */
        for (int j = 0; j < tk; ++j) {
          float slope;
          const float s = logit(p, b, h, i, j, &slope);
          if (s == -INFINITY) continue;
          const float* v = row_of(p->v, ((size_t)b * p->kv_heads + h / group) * tk + j, dv);
          float dp = 0.0f;
          for (int c = 0; c < dv; ++c) dp += d_o[c] * v[c];
          d += expf(s - lse) * dp;
        }
#ifdef BROKEN_DROPS_D
        d = 0.0f;
#endif
        for (int j = 0; j < tk; ++j) {
          float slope;
          const float s = logit(p, b, h, i, j, &slope);
          if (s == -INFINITY) continue; /* a masked key's dK and dV stay exactly 0 */
          const size_t key = ((size_t)b * p->kv_heads + h / group) * tk + j;
          const float* k = row_of(p->k, key, dk);
          const float* v = row_of(p->v, key, dv);
          const float w = expf(s - lse); /* P, recomputed from the forward's LSE */
          float dp = 0.0f;
          for (int c = 0; c < dv; ++c) dp += d_o[c] * v[c];
          const float ds = w * (dp - d) * slope * scale;
          for (int c = 0; c < dv; ++c) dv_all[key * dv + c] += w * d_o[c]; /* summed over the group's heads */
          for (int c = 0; c < dk; ++c) dq_all[row * dk + c] += ds * k[c];
          for (int c = 0; c < dk; ++c) dk_all[key * dk + c] += ds * q[c];
        }
        if (out->dsinks) out->dsinks[h] -= expf(p->sinks[h] - lse) * d; /* the sink's share times -D */
      }
  strcpy(out->path, "c-loop");
  return ATTEST_OK;
}

static const char* error(void* user) {
  (void)user;
  return "";
}

static const attest_kernel_v2 kernel = {
    .abi_version = ATTEST_ABI_VERSION_2,
    .struct_size = sizeof(attest_kernel_v2),
    .name = "backward-c",
#ifdef CAUSAL_ONLY /* a causal language model's training kernel: no mask term but causal */
    .capabilities = ATTEST_CAP_CAUSAL | ATTEST_CAP_GQA | ATTEST_CAP_LSE | ATTEST_CAP_SOFTCAP | ATTEST_CAP_SINKS |
                    ATTEST_CAP_BACKWARD,
#else
    .capabilities = ATTEST_CAP_CAUSAL | ATTEST_CAP_WINDOW | ATTEST_CAP_KEY_PADDING | ATTEST_CAP_QUERY_PADDING |
                    ATTEST_CAP_SEGMENTS | ATTEST_CAP_EXPLICIT_MASK | ATTEST_CAP_GQA | ATTEST_CAP_LSE |
                    ATTEST_CAP_SOFTCAP | ATTEST_CAP_SINKS | ATTEST_CAP_BACKWARD,
#endif
    .empty_rows = ATTEST_EMPTY_ZERO,
#ifdef BROKEN_BF16_BACKWARD
    .precision = {.q = ATTEST_F32,
                  .k = ATTEST_BF16,
                  .v = ATTEST_BF16,
                  .o = ATTEST_F32,
                  .scores = ATTEST_F32,
                  .p = ATTEST_F32,
                  .accumulator = ATTEST_F32,
                  .exp_ulps = 1.0},
#else
    .precision = {.q = ATTEST_F32,
                  .k = ATTEST_F32,
                  .v = ATTEST_F32,
                  .o = ATTEST_F32,
                  .scores = ATTEST_F32,
                  .p = ATTEST_F32,
                  .accumulator = ATTEST_F32,
                  .exp_ulps = 1.0},
#endif
    /* A loop: lengths kept to what it computes in a few seconds. */
    .contract =
        {
            .head_dim = {1, 256},
            .q_len = {1, 1024},
            .k_len = {1, 1024},
            .deterministic_backward = 1,
#ifdef CAUSAL_ONLY
            .causal_required = 1,
            .self_attention_only = 1,
#endif
        },
    .forward = forward,
#ifndef BROKEN_BACKWARD_NULL
    .backward = backward,
#endif
    .last_error = error,
};

const void* attest_kernel_entry(void) { return &kernel; }
