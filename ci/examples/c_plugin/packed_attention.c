/* A varlen attention kernel in plain C99 (ABI 2.8, ATTEST_CAP_PACKED): besides attest's padded
 * layout it takes FlashAttention's packed one, every sequence's tokens one after another with
 * cu_seqlens offsets (q [total_q][H][Dk], k [total_k][Hkv][Dk], v [total_k][Hkv][Dv],
 * o [total_q][H][Dv], lse [H][total_q]). Both layouts run the same per-sequence loop, given where a
 * sequence's first row is and how far apart its rows are: the packed call reads the packed buffers
 * directly, with no unpacking to padding. Causal, key and query padding, GQA, LSE; float32.
 *
 * BROKEN_CU_SEQLENS_PAST_END: the workspace is sized by a loop over b <= batch, reading
 * cu_seqlens_q[batch + 1], one past the end. Its value only makes the workspace larger, so nothing
 * shows in the outputs: attest's guard page right after cu_seqlens turns the read into a fault.
 *
 * PACKED_INT64 (ABI 2.10): declares ATTEST_CAP_PACKED_INT64 and reads int64 offsets (cu_seqlens_q64,
 * cu_seqlens_k64), as FlashAttention takes them for totals past 2^31. BROKEN_INT64_AS_INT32 declares
 * int64 offsets but reads them through int32 pointers, as a kernel compiled for the other dtype does:
 * every second entry it reads is the high half of an offset. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attest/attest_abi.h"

static char last_error[256];

/* One sequence of one query head: nq query rows over nk keys, rows `*_step` floats apart. */
typedef struct {
  const float *q, *k, *v;
  float *o, *lse;
  size_t q_step, k_step, v_step, o_step;
  int nq, nk, dk, dv;
} sequence_rows;

static void attend(const sequence_rows* s, int causal, int64_t q_offset, float scale, float* scores) {
  for (int i = 0; i < s->nq; ++i) {
    const float* q = s->q + i * s->q_step;
    float* o = s->o + i * s->o_step;
    int64_t visible = causal ? q_offset + i + 1 : s->nk; /* keys 0 .. visible - 1 */
    if (visible > s->nk) visible = s->nk;
    const int end = visible > 0 ? (int)visible : 0;
    for (int c = 0; c < s->dv; ++c) o[c] = 0.0f;
    if (end == 0) { /* no visible key: the zero empty-row policy */
      if (s->lse) s->lse[i] = -INFINITY;
      continue;
    }
    float max = -INFINITY, sum = 0.0f;
    for (int j = 0; j < end; ++j) {
      const float* k = s->k + j * s->k_step;
      float dot = 0.0f;
      for (int c = 0; c < s->dk; ++c) dot += q[c] * k[c];
      scores[j] = dot * scale;
      if (scores[j] > max) max = scores[j];
    }
    for (int j = 0; j < end; ++j) sum += scores[j] = expf(scores[j] - max);
    for (int j = 0; j < end; ++j) {
      const float* v = s->v + j * s->v_step;
      const float w = scores[j] / sum;
      for (int c = 0; c < s->dv; ++c) o[c] += w * v[c];
    }
    if (s->lse) s->lse[i] = max + logf(sum);
  }
}

static attest_status out_of_memory(void) {
  strcpy(last_error, "out of memory");
  return ATTEST_INTERNAL_ERROR;
}

static attest_status forward(void* user, const attest_problem_v2* p, attest_outputs_v2* out) {
  (void)user;
  const int dk = p->head_dim, dv = p->value_dim, tq = p->q_len, tk = p->k_len, group = p->heads / p->kv_heads;
  float* scores = malloc(sizeof(float) * tk);
  if (!scores) return out_of_memory();
  for (int b = 0; b < p->batch; ++b)
    for (int h = 0; h < p->heads; ++h) {
      const size_t row = ((size_t)b * p->heads + h) * tq, key = ((size_t)b * p->kv_heads + h / group) * tk;
      sequence_rows s = {.q = (const float*)p->q + row * dk,
                         .q_step = dk,
                         .k = (const float*)p->k + key * dk,
                         .k_step = dk,
                         .v = (const float*)p->v + key * dv,
                         .v_step = dv,
                         .o = (float*)out->o + row * dv,
                         .o_step = dv,
                         .lse = out->lse ? out->lse + row : NULL,
                         .nq = p->q_valid ? p->q_valid[b] : tq,
                         .nk = p->kv_valid ? p->kv_valid[b] : tk,
                         .dk = dk,
                         .dv = dv};
      attend(&s, p->causal, p->q_offset, (float)p->scale, scores);
      for (int i = s.nq; i < tq; ++i) { /* padded queries: empty rows */
        memset(s.o + (size_t)i * dv, 0, sizeof(float) * dv);
        if (s.lse) s.lse[i] = -INFINITY;
      }
    }
  free(scores);
  strcpy(out->path, "padded");
  return ATTEST_OK;
}

static attest_status forward_packed(void* user, const attest_packed_problem* p, attest_packed_outputs* out) {
  (void)user;
  const int dk = p->head_dim, dv = p->value_dim, h_all = p->heads, hkv = p->kv_heads, group = h_all / hkv;
#if defined(PACKED_INT64)
  const int64_t *cu_q = p->cu_seqlens_q64, *cu_k = p->cu_seqlens_k64;
#elif defined(BROKEN_INT64_AS_INT32)
  const int32_t *cu_q = (const int32_t*)p->cu_seqlens_q64, *cu_k = (const int32_t*)p->cu_seqlens_k64;
#else
  const int32_t *cu_q = p->cu_seqlens_q, *cu_k = p->cu_seqlens_k;
#endif
  int longest_k = p->max_seqlen_k;
#ifdef BROKEN_CU_SEQLENS_PAST_END
  for (int b = 0; b <= p->batch; ++b) /* off by one: b == batch reads cu_q[batch + 1] */
    if (cu_q[b + 1] - cu_q[b] > longest_k) longest_k = (int)(cu_q[b + 1] - cu_q[b]);
#endif
  for (int b = 0; b < p->batch; ++b) /* room for every sequence the offsets it reads name */
    if (cu_k[b + 1] - cu_k[b] > longest_k) longest_k = (int)(cu_k[b + 1] - cu_k[b]);
  float* scores = malloc(sizeof(float) * (longest_k > 0 ? longest_k : 1));
  if (!scores) return out_of_memory();
  const size_t total_q = (size_t)cu_q[p->batch];
  for (int b = 0; b < p->batch; ++b)
    for (int h = 0; h < h_all; ++h) {
      const size_t first_q = (size_t)cu_q[b], first_k = (size_t)cu_k[b];
      sequence_rows s = {.q = p->q + (first_q * h_all + h) * dk,
                         .q_step = (size_t)h_all * dk,
                         .k = p->k + (first_k * hkv + h / group) * dk,
                         .k_step = (size_t)hkv * dk,
                         .v = p->v + (first_k * hkv + h / group) * dv,
                         .v_step = (size_t)hkv * dv,
                         .o = out->o + (first_q * h_all + h) * dv,
                         .o_step = (size_t)h_all * dv,
                         .lse = out->lse ? out->lse + h * total_q + first_q : NULL,
                         .nq = (int)(cu_q[b + 1] - cu_q[b]),
                         .nk = (int)(cu_k[b + 1] - cu_k[b]),
                         .dk = dk,
                         .dv = dv};
      attend(&s, p->causal, p->q_offset, (float)p->scale, scores);
    }
  free(scores);
  strcpy(out->path, "varlen");
  return ATTEST_OK;
}

static const char* error(void* user) {
  (void)user;
  return last_error;
}

static const attest_kernel_v2 kernel = {
    .abi_version = ATTEST_ABI_VERSION_2,
    .struct_size = sizeof(attest_kernel_v2),
#if defined(BROKEN_CU_SEQLENS_PAST_END)
    .name = "packed-c-past-end",
#elif defined(PACKED_INT64)
    .name = "packed-c-int64",
#elif defined(BROKEN_INT64_AS_INT32)
    .name = "packed-c-int64-as-int32",
#else
    .name = "packed-c",
#endif
    .capabilities = ATTEST_CAP_CAUSAL | ATTEST_CAP_KEY_PADDING | ATTEST_CAP_QUERY_PADDING | ATTEST_CAP_GQA |
                    ATTEST_CAP_LSE | ATTEST_CAP_PACKED
#if defined(PACKED_INT64) || defined(BROKEN_INT64_AS_INT32)
                    | ATTEST_CAP_PACKED_INT64
#endif
    ,
    .empty_rows = ATTEST_EMPTY_ZERO,
    .precision = {.q = ATTEST_F32,
                  .k = ATTEST_F32,
                  .v = ATTEST_F32,
                  .o = ATTEST_F32,
                  .scores = ATTEST_F32,
                  .p = ATTEST_F32,
                  .accumulator = ATTEST_F32,
                  .exp_ulps = 1.0},
    .forward = forward,
    .last_error = error,
    .forward_packed = forward_packed,
};

const attest_kernel_v2* attest_kernel_entry(void) { return &kernel; }
