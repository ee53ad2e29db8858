/* A decode-only attention kernel: no one-shot forward, only a growing KV cache per session.
 *
 * decode_open allocates a session; each decode_step appends the K/V of n new tokens and
 * attends their queries causally (the query of new token t sits at position len + t and sees
 * keys 0..len + t, narrowed by the window and the chunk); decode_close frees the session. The
 * contract says decode_only, so attest certifies it through decode sessions alone and lists
 * the checks that need a forward call as not covered.
 *
 * attest's layouts per step: q [B][H][n][Dk], k [B][Hkv][n][Dk], v [B][Hkv][n][Dv] ->
 * o [B][H][n][Dv], lse [B][H][n]. The cache is token-major, [T][B][Hkv][D], so that
 * appending tokens is a realloc and a copy. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attest/attest_abi.h"

static char last_error[256];

typedef struct session {
  attest_decode_config_v2 config;
  int len, capacity; /* tokens cached, tokens allocated */
  float* k_cache;    /* [capacity][B][Hkv][Dk] */
  float* v_cache;    /* [capacity][B][Hkv][Dv] */
  float* score;      /* [capacity]: one row's scores */
} session;

static attest_status fail(attest_status status, const char* message) {
  strcpy(last_error, message);
  return status;
}

static attest_status decode_open(void* user, const attest_decode_config_v2* c, void** out) {
  (void)user;
  if (c->batch < 1 || c->kv_heads < 1 || c->heads % c->kv_heads || c->head_dim < 1 || c->value_dim < 1)
    return fail(ATTEST_INVALID_ARGUMENT, "a shape with B, H, Dk, Dv >= 1 and Hkv dividing H");
  if (c->rope || c->softcap != 0 || c->alibi_slopes || c->sinks)
    return fail(ATTEST_UNSUPPORTED, "no RoPE and no score modifier (not declared)");
  session* s = calloc(1, sizeof(session));
  if (!s) return fail(ATTEST_INTERNAL_ERROR, "out of memory");
  s->config = *c;
  *out = s;
  return ATTEST_OK;
}

/* Makes room for `tokens` cached tokens, doubling so that appending one at a time stays cheap. */
static int reserve(session* s, int tokens) {
  if (tokens <= s->capacity) return 1;
  const attest_decode_config_v2* c = &s->config;
  const int capacity = tokens > 2 * s->capacity ? tokens : 2 * s->capacity;
  const size_t per_token = (size_t)c->batch * c->kv_heads;
  float* k = realloc(s->k_cache, sizeof(float) * capacity * per_token * c->head_dim);
  if (k) s->k_cache = k;
  float* v = realloc(s->v_cache, sizeof(float) * capacity * per_token * c->value_dim);
  if (v) s->v_cache = v;
  float* score = realloc(s->score, sizeof(float) * capacity);
  if (score) s->score = score;
  if (!k || !v || !score) return 0;
  s->capacity = capacity;
  return 1;
}

static attest_status decode_step(void* user, void* handle, int32_t n, const void* q_in, const void* k_in,
                                 const void* v_in, void* o_out, float* lse, char path[32]) {
  (void)user;
  session* s = handle;
  const attest_decode_config_v2* c = &s->config;
  const int B = c->batch, H = c->heads, Hkv = c->kv_heads, dk = c->head_dim, dv = c->value_dim;
  const float *q = q_in, *k = k_in, *v = v_in;
  float* o = o_out;
  if (n < 1) return fail(ATTEST_INVALID_ARGUMENT, "a step appends at least one token");
  if (!reserve(s, s->len + n)) return fail(ATTEST_INTERNAL_ERROR, "out of memory");

  /* Append: token t of (b, g) goes to cache row len + t. */
  for (int b = 0; b < B; ++b)
    for (int g = 0; g < Hkv; ++g)
      for (int t = 0; t < n; ++t) {
        const size_t from = ((size_t)b * Hkv + g) * n + t, to = ((size_t)(s->len + t) * B + b) * Hkv + g;
        memcpy(s->k_cache + to * dk, k + from * dk, sizeof(float) * dk);
        memcpy(s->v_cache + to * dv, v + from * dv, sizeof(float) * dv);
      }

  const float scale = (float)c->scale;
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < H; ++h) {
      const int g = h / (H / Hkv); /* GQA: the key/value head of query head h */
      for (int t = 0; t < n; ++t) {
        const int pos = s->len + t;
        /* Causal: keys up to pos; the window and the chunk raise the first visible key. */
        int first = 0;
        if (c->window && pos - c->window + 1 > first) first = pos - c->window + 1;
        if (c->chunk && pos / c->chunk * c->chunk > first) first = pos / c->chunk * c->chunk;
        const size_t row = ((size_t)b * H + h) * n + t;
        const float* query = q + row * dk;
        float max = -INFINITY;
        for (int j = first; j <= pos; ++j) {
          const float* key = s->k_cache + (((size_t)j * B + b) * Hkv + g) * dk;
          float dot = 0.0f;
          for (int i = 0; i < dk; ++i) dot += query[i] * key[i];
          s->score[j] = dot * scale;
          if (s->score[j] > max) max = s->score[j];
        }
        float sum = 0.0f; /* key pos is always visible: the row is never empty */
        for (int j = first; j <= pos; ++j) sum += s->score[j] = expf(s->score[j] - max);
        float* out = o + row * dv;
        for (int i = 0; i < dv; ++i) out[i] = 0.0f;
        for (int j = first; j <= pos; ++j) {
          const float w = s->score[j] / sum;
          const float* value = s->v_cache + (((size_t)j * B + b) * Hkv + g) * dv;
          for (int i = 0; i < dv; ++i) out[i] += w * value[i];
        }
        if (lse) lse[row] = max + logf(sum);
      }
    }
  s->len += n;
  strcpy(path, "decode-cache");
  return ATTEST_OK;
}

static void decode_close(void* user, void* handle) {
  (void)user;
  session* s = handle;
  if (!s) return;
  free(s->k_cache), free(s->v_cache), free(s->score);
  free(s);
}

static const char* error(void* user) {
  (void)user;
  return last_error;
}

static const attest_kernel_v2 kernel = {
    .abi_version = ATTEST_ABI_VERSION_2,
    .struct_size = sizeof(attest_kernel_v2),
    .name = "decode-only",
    .capabilities =
        ATTEST_CAP_CAUSAL | ATTEST_CAP_DECODE | ATTEST_CAP_LSE | ATTEST_CAP_GQA | ATTEST_CAP_WINDOW | ATTEST_CAP_CHUNK,
    .empty_rows = ATTEST_EMPTY_ZERO,
    .precision = {.q = ATTEST_F32,
                  .k = ATTEST_F32,
                  .v = ATTEST_F32,
                  .o = ATTEST_F32,
                  .scores = ATTEST_F32,
                  .p = ATTEST_F32,
                  .accumulator = ATTEST_F32,
                  .exp_ulps = 1.0},
    .contract = {.decode_only = 1}, /* no forward: certified through decode sessions only */
    .forward = NULL,
    .decode_open = decode_open,
    .decode_step = decode_step,
    .decode_close = decode_close,
    .last_error = error,
};

const attest_kernel_v2* attest_kernel_entry(void) { return &kernel; }
