/* A decode-only kernel with an explicit cache (it keeps every position) whose decode_retained
 * answers ATTEST_OK with a count of -1. attest must fail the check on one line that
 * names the field, its value and the kernel as at fault, and save the counterexample.
 *
 * Layouts per step: q [B][H][n][Dk], k [B][Hkv][n][Dk], v [B][Hkv][n][Dv] -> o [B][H][n][Dv],
 * lse [B][H][n]; the cache is [B][Hkv][capacity][D]. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attest/attest_abi.h"

static char last_error[128];

typedef struct session {
  attest_decode_config_v2 config;
  int len, capacity;
  float *k, *v;
} session;

static attest_status fail(attest_status status, const char* message) {
  strcpy(last_error, message);
  return status;
}

static attest_status decode_open(void* user, const attest_decode_config_v2* c, void** out) {
  (void)user;
  if (c->rope || c->softcap != 0 || c->alibi_slopes || c->sinks || c->window || c->chunk)
    return fail(ATTEST_UNSUPPORTED, "causal attention only (nothing else declared)");
  session* s = calloc(1, sizeof(session));
  if (!s) return fail(ATTEST_INTERNAL_ERROR, "out of memory");
  s->config = *c;
  *out = s;
  return ATTEST_OK;
}

static int reserve(session* s, int tokens) {
  if (tokens <= s->capacity) return 1;
  const attest_decode_config_v2* c = &s->config;
  const int capacity = tokens > 2 * s->capacity ? tokens : 2 * s->capacity;
  const size_t rows = (size_t)c->batch * c->kv_heads;
  float* k = calloc(rows * capacity * c->head_dim, sizeof(float));
  float* v = calloc(rows * capacity * c->value_dim, sizeof(float));
  if (!k || !v) return free(k), free(v), 0;
  for (size_t r = 0; r < rows; ++r) {
    if (s->k)
      memcpy(k + r * capacity * c->head_dim, s->k + r * s->capacity * c->head_dim,
             sizeof(float) * s->len * c->head_dim);
    if (s->v)
      memcpy(v + r * capacity * c->value_dim, s->v + r * s->capacity * c->value_dim,
             sizeof(float) * s->len * c->value_dim);
  }
  free(s->k), free(s->v);
  s->k = k, s->v = v, s->capacity = capacity;
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
  if (n < 1 || !reserve(s, s->len + n)) return fail(ATTEST_INTERNAL_ERROR, "no room");
  for (int bg = 0; bg < B * Hkv; ++bg)
    for (int t = 0; t < n; ++t) {
      memcpy(s->k + ((size_t)bg * s->capacity + s->len + t) * dk, k + ((size_t)bg * n + t) * dk, sizeof(float) * dk);
      memcpy(s->v + ((size_t)bg * s->capacity + s->len + t) * dv, v + ((size_t)bg * n + t) * dv, sizeof(float) * dv);
    }
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < H; ++h) {
      const size_t bg = (size_t)b * Hkv + h / (H / Hkv);
      for (int t = 0; t < n; ++t) {
        const int pos = s->len + t;
        const size_t row = ((size_t)b * H + h) * n + t;
        double max = -INFINITY, sum = 0;
        for (int j = 0; j <= pos; ++j) {
          double dot = 0;
          for (int i = 0; i < dk; ++i) dot += q[row * dk + i] * s->k[(bg * s->capacity + j) * dk + i];
          if (dot * c->scale > max) max = dot * c->scale;
        }
        for (int i = 0; i < dv; ++i) o[row * dv + i] = 0;
        double acc[1024] = {0};
        for (int j = 0; j <= pos; ++j) {
          double dot = 0;
          for (int i = 0; i < dk; ++i) dot += q[row * dk + i] * s->k[(bg * s->capacity + j) * dk + i];
          const double w = exp(dot * c->scale - max);
          sum += w;
          for (int i = 0; i < dv && i < 1024; ++i) acc[i] += w * s->v[(bg * s->capacity + j) * dv + i];
        }
        for (int i = 0; i < dv && i < 1024; ++i) o[row * dv + i] = (float)(acc[i] / sum);
        if (lse) lse[row] = (float)(max + log(sum));
      }
    }
  s->len += n;
  strcpy(path, "decode");
  return ATTEST_OK;
}

/* The defect: every position is kept, but the count written is -1. */
static attest_status decode_retained(void* user, void* handle, int32_t b, int32_t t, int64_t* positions,
                                     int32_t capacity, int32_t* count) {
  (void)user, (void)handle, (void)b, (void)t, (void)positions, (void)capacity;
  *count = -1;
  return ATTEST_OK;
}

static void decode_close(void* user, void* handle) {
  (void)user;
  session* s = handle;
  if (s) free(s->k), free(s->v), free(s);
}

static const char* error(void* user) {
  (void)user;
  return last_error;
}

static const attest_kernel_v2 kernel = {
    .abi_version = ATTEST_ABI_VERSION_2,
    .struct_size = sizeof(attest_kernel_v2),
    .name = "hostile-negative-retained",
    .capabilities = ATTEST_CAP_CAUSAL | ATTEST_CAP_DECODE | ATTEST_CAP_LSE,
    .empty_rows = ATTEST_EMPTY_ZERO,
    .precision = {.q = ATTEST_F32,
                  .k = ATTEST_F32,
                  .v = ATTEST_F32,
                  .o = ATTEST_F32,
                  .scores = ATTEST_F32,
                  .p = ATTEST_F32,
                  .accumulator = ATTEST_F32,
                  .exp_ulps = 1.0},
    .contract = {.decode_only = 1, .head_dim = {1, 1024}},
    .decode_open = decode_open,
    .decode_step = decode_step,
    .decode_close = decode_close,
    .last_error = error,
    .decode_retained = decode_retained,
    .cache_policy = ATTEST_CACHE_EXPLICIT,
};

const attest_kernel_v2* attest_kernel_entry(void) { return &kernel; }
