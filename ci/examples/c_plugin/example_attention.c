/* An attention kernel in plain C99 behind the attest C ABI, version 2: the full problem model
 * (every mask term including chunked attention, GQA, LSE, RoPE, the zero empty-row policy) and
 * two score modifiers (logit softcap, attention sinks) in float32, and the merge of partial
 * attention states (ABI 2.6, split-KV and cascade attention). Copy it as the skeleton of your
 * own plugin: fill in forward(), then declare in `kernel` below what you support (capabilities)
 * and what you accept (the contract).
 *
 *   cc -std=c99 -O2 -fPIC -shared -I impl/abi/include example_attention.c -lm -o libexample_attention.so
 *   attest certify --kernel ./libexample_attention.so
 *
 * The build compiles the same file with one of these defined to get other plugins:
 *   NARROW_LSE_GQA          the same kernel declaring only LSE + GQA (a narrower certificate);
 *   BROKEN_SOFTCAP_AFTER_MASK, BROKEN_SINK_IN_NUMERATOR  a modifier implemented wrongly, the way
 *                           real kernels got it wrong (see forward());
 *   BROKEN_SEGFAULT, BROKEN_HANG, BROKEN_WRITE_PAST, BROKEN_NO_WRITE, BROKEN_ABI_VERSION,
 *   BROKEN_UNSUPPORTED_DK7  broken plugins for the command-line tests (ci/tests/cli_test.py);
 *   BROKEN_MERGE_WITHOUT_MAX, BROKEN_MERGE_EMPTY_PART_NAN  a merge gone wrong (see merge()). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "attest/attest_abi.h"

static char last_error[256];

/* floor(a / b) for b > 0, also for negative a (query positions are negative when q_offset < 0). */
static int64_t floor_div(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

/* Whether query i of batch entry b sees key j: every enabled mask term must allow it. */
static int visible(const attest_problem_v2* p, int b, int i, int j) {
  const int64_t pos = p->q_offset + i;
  if (p->q_valid && i >= p->q_valid[b]) return 0;
  if (p->causal && j > pos) return 0;
  if (p->window && pos - j >= p->window) return 0;
  if (p->chunk && floor_div(pos, p->chunk) != floor_div(j, p->chunk)) return 0;
  if (p->kv_valid && j >= p->kv_valid[b]) return 0;
  if (p->q_segment && p->q_segment[(size_t)b * p->q_len + i] != p->k_segment[(size_t)b * p->k_len + j]) return 0;
  if (p->explicit_mask && !p->explicit_mask[((size_t)b * p->q_len + i) * p->k_len + j]) return 0;
  return 1;
}

/* Rotates interleaved pairs of x by pos * base^(-2m/d), angles in double. */
static void rotate(float* x, int d, int64_t pos, double base) {
  for (int m = 0; m < d / 2; ++m) {
    const double angle = (double)pos * pow(base, -2.0 * m / d);
    const float c = (float)cos(angle), s = (float)sin(angle);
    const float a = x[2 * m], b = x[2 * m + 1];
    x[2 * m] = a * c - b * s;
    x[2 * m + 1] = a * s + b * c;
  }
}

static attest_status forward(void* user, const attest_problem_v2* p, attest_outputs_v2* out) {
  (void)user;
  const int dk = p->head_dim, dv = p->value_dim, tq = p->q_len, tk = p->k_len, group = p->heads / p->kv_heads;
  /* The buffers hold the declared storage type: float32 everywhere (see .precision below). */
  const float* q_all = p->q;
  const float* k_all = p->k;
  const float* v_all = p->v;
  float* o_all = out->o;
  if (p->rope && dk % 2) {
    strcpy(last_error, "rope needs an even head_dim");
    return ATTEST_INVALID_ARGUMENT;
  }
#ifdef BROKEN_UNSUPPORTED_DK7
  /* Refuses a width its contract accepts: attest must fail it, not skip the case. */
  if (dk == 7) {
    strcpy(last_error, "head_dim 7 is not implemented");
    return ATTEST_UNSUPPORTED;
  }
#endif
#ifdef BROKEN_SEGFAULT
  if (tk > 1) *(volatile int*)0 = 1;
#endif
#ifdef BROKEN_HANG
  if (tk > 1)
    for (;;) pause();
#endif
  float* query = malloc(sizeof(float) * dk);
  float* key = malloc(sizeof(float) * dk);
  float* score = malloc(sizeof(float) * tk);
  if (!query || !key || !score) {
    free(query), free(key), free(score);
    strcpy(last_error, "out of memory");
    return ATTEST_INTERNAL_ERROR;
  }
  const float scale = (float)p->scale; /* always explicit: 1/sqrt(Dk) when the user left it default */
  const float cap = (float)p->softcap; /* 0: no softcap (attest sends 0 unless the kernel declares it) */
  for (int b = 0; b < p->batch; ++b)
    for (int h = 0; h < p->heads; ++h) {
      const int g = h / group; /* GQA: `group` query heads share key/value head g */
      for (int i = 0; i < tq; ++i) {
        const size_t row = ((size_t)b * p->heads + h) * tq + i;
        float* o = o_all + row * dv;
        memcpy(query, q_all + row * dk, sizeof(float) * dk);
        if (p->rope) rotate(query, dk, p->q_offset + i, p->rope_base);
        /* The row's max runs over its logits and its sink: the sink is one more exponent in the
         * denominator, and exp(sink - max) must not overflow when the sink dominates (1e4 is allowed). */
        const float sink = p->sinks ? p->sinks[h] : -INFINITY; /* -INFINITY: no sink */
        float max = sink;
        for (int j = 0; j < tk; ++j) {
          score[j] = -INFINITY;
          if (!visible(p, b, i, j)) continue;
          memcpy(key, k_all + (((size_t)b * p->kv_heads + g) * tk + j) * dk, sizeof(float) * dk);
          if (p->rope) rotate(key, dk, j, p->rope_base);
          float dot = 0.0f;
          for (int c = 0; c < dk; ++c) dot += query[c] * key[c];
          score[j] = dot * scale;
#ifndef BROKEN_SOFTCAP_AFTER_MASK
          /* Softcap bounds the scaled score itself (before ALiBi or a bias would be added), and only
           * a visible key's: a masked key has no logit, so there is nothing to cap. */
          if (cap > 0) score[j] = cap * tanhf(score[j] / cap);
#endif
          if (score[j] > max) max = score[j];
        }
#ifdef BROKEN_SOFTCAP_AFTER_MASK
        /* The bug: the cap runs over the whole row after masking and turns a masked key's -inf into
         * -cap, a finite logit: every masked key now takes weight exp(-cap - max). */
        if (cap > 0)
          for (int j = 0; j < tk; ++j) {
            score[j] = cap * tanhf(score[j] / cap);
            if (score[j] > max) max = score[j];
          }
#endif
#ifndef BROKEN_NO_WRITE
        for (int c = 0; c < dv; ++c) o[c] = 0.0f;
#else
        (void)o;
#endif
        if (max == -INFINITY) { /* empty row without a sink: the zero policy */
          if (out->lse) out->lse[row] = -INFINITY;
          continue;
        }
        /* Stable softmax: exponents relative to the row's maximum. The sink starts the sum and
         * never reaches O. A row with a sink but no visible key is not empty: max = sink, sum = 1,
         * so O stays 0 and LSE = sink, whatever the empty-row policy (docs/design.md#problem-semantics). */
        float sum = p->sinks ? expf(sink - max) : 0.0f;
        for (int j = 0; j < tk; ++j)
          if (score[j] != -INFINITY) sum += score[j] = expf(score[j] - max);
        for (int j = 0; j < tk; ++j) {
          if (score[j] == -INFINITY) continue;
          const float w = score[j] / sum;
          const float* v = v_all + (((size_t)b * p->kv_heads + g) * tk + j) * dv;
#ifndef BROKEN_NO_WRITE
          for (int c = 0; c < dv; ++c) o[c] += w * v[c];
#else
          (void)w, (void)v;
#endif
        }
#ifdef BROKEN_SINK_IN_NUMERATOR
        /* The bug: the sink taken for a first token (StreamingLLM's sink token) rather than a logit
         * with no value: its share of the row goes to key 0's value. */
        if (p->sinks) {
          const float* v0 = v_all + ((size_t)b * p->kv_heads + g) * tk * dv;
          for (int c = 0; c < dv; ++c) o[c] += expf(sink - max) / sum * v0[c];
        }
#endif
        if (out->lse) out->lse[row] = max + logf(sum);
      }
    }
#ifdef BROKEN_WRITE_PAST
  o_all[(size_t)p->batch * p->heads * tq * dv] = 0.0f;
#endif
  strcpy(out->path, "c-reference-loop"); /* names the path that served the call in the certificate */
  free(query), free(key), free(score);
  return ATTEST_OK;
}

/* A partial O value: f32, or bf16 (the top half of an f32's bits). */
static float part_value(const attest_merge_inputs* in, size_t i) {
  if (in->storage == ATTEST_F32) return ((const float*)in->o)[i];
  const uint32_t bits = (uint32_t)((const uint16_t*)in->o)[i] << 16;
  float x;
  memcpy(&x, &bits, sizeof x);
  return x;
}

/* Partial states over disjoint keys into the state over all of them: each part weighted by
 * exp(lse_i - m), m the largest lse (so no weight overflows), and a part that saw no key of the
 * row (lse -inf, its O NaN) skipped. */
static attest_status merge(void* user, const attest_merge_inputs* in, attest_merge_outputs* out) {
  (void)user;
  if (in->storage != ATTEST_F32 && in->storage != ATTEST_BF16) {
    strcpy(last_error, "merge: partial O must be f32 or bf16");
    return ATTEST_INVALID_ARGUMENT;
  }
  const size_t rows = (size_t)in->rows, width = (size_t)in->value_dim;
  for (size_t r = 0; r < rows; ++r) {
    float m = -INFINITY;
    for (int i = 0; i < in->parts; ++i) m = fmaxf(m, in->lse[(size_t)i * rows + r]);
    float* o = out->o + r * width;
    for (size_t c = 0; c < width; ++c) o[c] = 0.0f;
    if (m == -INFINITY) { /* no part saw a key */
      out->lse[r] = -INFINITY;
      continue;
    }
#ifdef BROKEN_MERGE_WITHOUT_MAX
    m = 0.0f; /* exp(lse_i) overflows once an lse passes 88 */
#endif
    float sum = 0.0f;
    for (int i = 0; i < in->parts; ++i) {
      const float l = in->lse[(size_t)i * rows + r];
#ifndef BROKEN_MERGE_EMPTY_PART_NAN /* weighting an empty part by 0 still reads its NaN: 0 * NaN */
      if (l == -INFINITY) continue;
#endif
      const float w = expf(l - m);
      sum += w;
      for (size_t c = 0; c < width; ++c) o[c] += w * part_value(in, ((size_t)i * rows + r) * width + c);
    }
    for (size_t c = 0; c < width; ++c) o[c] /= sum;
    out->lse[r] = m + logf(sum);
  }
  return ATTEST_OK;
}

static const char* error(void* user) {
  (void)user;
  return last_error;
}

#ifdef NARROW_LSE_GQA
#define CAPABILITIES (ATTEST_CAP_GQA | ATTEST_CAP_LSE)
#else
#define CAPABILITIES                                                                                              \
  (ATTEST_CAP_CAUSAL | ATTEST_CAP_WINDOW | ATTEST_CAP_CHUNK | ATTEST_CAP_KEY_PADDING | ATTEST_CAP_QUERY_PADDING | \
   ATTEST_CAP_SEGMENTS | ATTEST_CAP_EXPLICIT_MASK | ATTEST_CAP_GQA | ATTEST_CAP_LSE | ATTEST_CAP_ROPE |           \
   ATTEST_CAP_SOFTCAP | ATTEST_CAP_SINKS | ATTEST_CAP_MERGE)
#endif

static const attest_kernel_v2 kernel = {
#ifdef BROKEN_ABI_VERSION
    .abi_version = ATTEST_ABI_VERSION_2 + 1,
#else
    .abi_version = ATTEST_ABI_VERSION_2,
#endif
    .struct_size = sizeof(attest_kernel_v2),
    .name = "example-c", /* baselines match kernels by name */
    .capabilities = CAPABILITIES,
    .empty_rows = ATTEST_EMPTY_ZERO,
    /* float32 storage, scores, P and accumulation; expf within 1 ulp. */
    .precision = {.q = ATTEST_F32,
                  .k = ATTEST_F32,
                  .v = ATTEST_F32,
                  .o = ATTEST_F32,
                  .scores = ATTEST_F32,
                  .p = ATTEST_F32,
                  .accumulator = ATTEST_F32,
                  .exp_ulps = 1.0},
    /* What forward() accepts; attest sends nothing else. Ranges are inclusive, {0, 0} = no limit.
     * This loop takes any width and length: the limits only show how a contract is written
     * (see causal_loop_attention.c for one that restricts). */
    .contract = {.head_dim = {1, 256}, .q_len = {1, 4096}, .k_len = {1, 4096}},
    .user = NULL,
    .forward = forward,
    .last_error = error,
    .merge = merge, /* ABI 2.6: declared by ATTEST_CAP_MERGE */
};

const attest_kernel_v2* attest_kernel_entry(void) { return &kernel; }
