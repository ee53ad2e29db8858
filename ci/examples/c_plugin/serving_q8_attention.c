/* A serving decoder as a plugin (ABI 2.4, docs/design.md#serving-caches): K and V stored q8, read through attest's
 * block tables, decode-only.
 *
 * attest sends K and V as q8 rows: per group of 32 values, its f16 scale (2 bytes, little endian)
 * then 32 int8 codes; a value is scale * code. This kernel keeps the rows as they arrive. A slot
 * (one token) holds, per kv head, the K row then the V row; a page holds 16 slots. Sessions keep
 * their slots in one growing array per sequence; decode_paged reads and writes the pages of
 * attest's pool, slot t % 16 of page tables[b][t / 16]. Both attend with the same loop: causal,
 * narrowed by the window and the chunk, GQA, LSE, a two-pass softmax in float. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "attest/attest_abi.h"

enum { kPageTokens = 16 };

static char last_error[256];

static attest_status fail(attest_status status, const char* message) {
  strcpy(last_error, message);
  return status;
}

/* Bytes of one q8 row of `width` values, and of one slot (every kv head's K and V rows). */
static size_t row_bytes(int width) { return (size_t)(width + 31) / 32 * 2 + (size_t)width; }
static size_t slot_bytes(const attest_decode_config_v2* c) {
  return (size_t)c->kv_heads * (row_bytes(c->head_dim) + row_bytes(c->value_dim));
}

static float half_to_float(uint16_t h) {
  const int exponent = (h >> 10) & 0x1F, mantissa = h & 0x3FF;
  float v = exponent == 0    ? ldexpf((float)mantissa, -24)
            : exponent == 31 ? (mantissa ? NAN : INFINITY)
                             : ldexpf((float)(mantissa | 0x400), exponent - 25);
  return (h & 0x8000) ? -v : v;
}

/* The values of a q8 row. */
static void dequantize(const uint8_t* row, int width, float* out) {
  for (int g0 = 0; g0 < width; g0 += 32) {
    const float d = half_to_float((uint16_t)(row[0] | row[1] << 8));
    const int n = width - g0 < 32 ? width - g0 : 32;
    for (int i = 0; i < n; ++i) out[g0 + i] = d * (float)(int8_t)row[2 + i];
    row += 2 + n;
  }
}

/* Where position j's slot of one sequence lives: a session's array, or attest's pages. */
typedef struct slots {
  const uint8_t* base;  /* session: the sequence's array; paged: the pool */
  const int32_t* table; /* paged: the sequence's table; NULL for a session */
  size_t stride;        /* session: bytes a slot; paged: bytes a page */
  size_t slot;          /* bytes a slot */
} slots;

static const uint8_t* slot_at(const slots* s, int j) {
  if (!s->table) return s->base + (size_t)j * s->stride;
#ifdef BROKEN_CONTIGUOUS_PAGES /* the bug: a sequence's pages taken as consecutive from its first */
  return s->base + (size_t)(s->table[0] + j / kPageTokens) * s->stride + (size_t)(j % kPageTokens) * s->slot;
#endif
  return s->base + (size_t)s->table[j / kPageTokens] * s->stride + (size_t)(j % kPageTokens) * s->slot;
}

/* One query at position pos, query head h, over its sequence's slots. scratch: pos + 1 + Dk + Dv floats. */
static void attend(const attest_decode_config_v2* c, const slots* s, int h, int pos, const float* query, float* out,
                   float* lse, float* scratch) {
  const int Hkv = c->kv_heads, g = h / (c->heads / Hkv), dk = c->head_dim, dv = c->value_dim;
  const size_t k_bytes = row_bytes(dk), v_bytes = row_bytes(dv);
  float *score = scratch, *key = scratch + pos + 1, *value = key + dk;
  int first = 0;
  if (c->window && pos - c->window + 1 > first) first = pos - c->window + 1;
  if (c->chunk && pos / c->chunk * c->chunk > first) first = pos / c->chunk * c->chunk;
  float max = -INFINITY;
  for (int j = first; j <= pos; ++j) {
    dequantize(slot_at(s, j) + (size_t)g * (k_bytes + v_bytes), dk, key);
    float dot = 0.0f;
    for (int i = 0; i < dk; ++i) dot += query[i] * key[i];
    score[j] = dot * (float)c->scale;
    if (score[j] > max) max = score[j];
  }
  float sum = 0.0f; /* the key at pos is always visible: the row is never empty */
  for (int j = first; j <= pos; ++j) sum += score[j] = expf(score[j] - max);
  for (int i = 0; i < dv; ++i) out[i] = 0.0f;
  for (int j = first; j <= pos; ++j) {
    dequantize(slot_at(s, j) + (size_t)g * (k_bytes + v_bytes) + k_bytes, dv, value);
    const float w = score[j] / sum;
    for (int i = 0; i < dv; ++i) out[i] += w * value[i];
  }
  if (lse) *lse = max + logf(sum);
}

/* Token t of sequence b's new rows into its slot: K row [g][t] of k (n rows a head), V likewise. */
static void write_slot(const attest_decode_config_v2* c, uint8_t* slot, const uint8_t* k, const uint8_t* v, int n,
                       int t) {
  const size_t k_bytes = row_bytes(c->head_dim), v_bytes = row_bytes(c->value_dim);
  for (int g = 0; g < c->kv_heads; ++g) {
    memcpy(slot + (size_t)g * (k_bytes + v_bytes), k + ((size_t)g * n + t) * k_bytes, k_bytes);
    memcpy(slot + (size_t)g * (k_bytes + v_bytes) + k_bytes, v + ((size_t)g * n + t) * v_bytes, v_bytes);
  }
}

static int check_config(const attest_decode_config_v2* c) {
  if (c->batch < 1 || c->kv_heads < 1 || c->heads % c->kv_heads || c->head_dim < 1 || c->value_dim < 1)
    return fail(ATTEST_INVALID_ARGUMENT, "a shape with B, H, Dk, Dv >= 1 and Hkv dividing H"), 0;
  if (c->rope || c->softcap != 0 || c->alibi_slopes || c->sinks)
    return fail(ATTEST_UNSUPPORTED, "no RoPE and no score modifier (not declared)"), 0;
  return 1;
}

/* ---- sessions: each sequence's slots in one array ---- */

typedef struct session {
  attest_decode_config_v2 config;
  int len, capacity;
  uint8_t* cache; /* [B][capacity] slots */
} session;

static attest_status decode_open(void* user, const attest_decode_config_v2* c, void** out) {
  (void)user;
  if (!check_config(c)) return ATTEST_INVALID_ARGUMENT;
  session* s = calloc(1, sizeof(session));
  if (!s) return fail(ATTEST_INTERNAL_ERROR, "out of memory");
  s->config = *c;
  *out = s;
  return ATTEST_OK;
}

static int reserve(session* s, int tokens) {
  if (tokens <= s->capacity) return 1;
  const int capacity = tokens > 2 * s->capacity ? tokens : 2 * s->capacity;
  const size_t slot = slot_bytes(&s->config), batch = (size_t)s->config.batch;
  uint8_t* cache = malloc(batch * capacity * slot);
  if (!cache) return 0;
  for (size_t b = 0; b < batch; ++b)
    if (s->len) memcpy(cache + b * capacity * slot, s->cache + b * s->capacity * slot, (size_t)s->len * slot);
  free(s->cache);
  s->cache = cache, s->capacity = capacity;
  return 1;
}

static attest_status decode_step(void* user, void* handle, int32_t n, const void* q_in, const void* k_in,
                                 const void* v_in, void* o_out, float* lse, char path[32]) {
  (void)user;
  session* s = handle;
  const attest_decode_config_v2* c = &s->config;
  const int B = c->batch, H = c->heads, dk = c->head_dim, dv = c->value_dim;
  if (n < 1) return fail(ATTEST_INVALID_ARGUMENT, "a step appends at least one token");
  if (!reserve(s, s->len + n)) return fail(ATTEST_INTERNAL_ERROR, "out of memory");
  float* scratch = malloc(sizeof(float) * ((size_t)s->len + n + dk + dv));
  if (!scratch) return fail(ATTEST_INTERNAL_ERROR, "out of memory");
  const size_t slot = slot_bytes(c), k_rows = (size_t)c->kv_heads * n * row_bytes(dk),
               v_rows = (size_t)c->kv_heads * n * row_bytes(dv);
  for (int b = 0; b < B; ++b) {
    uint8_t* sequence = s->cache + (size_t)b * s->capacity * slot;
    for (int t = 0; t < n; ++t)
      write_slot(c, sequence + (size_t)(s->len + t) * slot, (const uint8_t*)k_in + b * k_rows,
                 (const uint8_t*)v_in + b * v_rows, n, t);
    const slots where = {sequence, NULL, slot, slot};
    for (int h = 0; h < H; ++h)
      for (int t = 0; t < n; ++t) {
        const size_t row = ((size_t)b * H + h) * n + t;
        attend(c, &where, h, s->len + t, (const float*)q_in + row * dk, (float*)o_out + row * dv,
               lse ? lse + row : NULL, scratch);
      }
  }
  free(scratch);
  s->len += n;
  strcpy(path, "session");
  return ATTEST_OK;
}

static void decode_close(void* user, void* handle) {
  (void)user;
  session* s = handle;
  if (!s) return;
  free(s->cache);
  free(s);
}

/* ---- block tables: attest's pages ---- */

static attest_status page_bytes(void* user, const attest_decode_config_v2* c, int64_t* bytes) {
  (void)user;
  if (!check_config(c)) return ATTEST_INVALID_ARGUMENT;
  *bytes = (int64_t)((kPageTokens * slot_bytes(c) + 63) / 64 * 64);
  return ATTEST_OK;
}

static attest_status decode_paged(void* user, const attest_decode_config_v2* c, attest_paged_step* step) {
  int64_t page = 0;
  if (page_bytes(user, c, &page) != ATTEST_OK) return ATTEST_INVALID_ARGUMENT;
  const int H = c->heads, dk = c->head_dim, dv = c->value_dim;
  const size_t slot = slot_bytes(c);
  int64_t longest = 0;
  for (int b = 0; b < c->batch; ++b)
    if (step->lengths[b] + step->counts[b] > longest) longest = step->lengths[b] + step->counts[b];
  float* scratch = malloc(sizeof(float) * ((size_t)longest + dk + dv));
  if (!scratch) return fail(ATTEST_INTERNAL_ERROR, "out of memory");
  const uint8_t *q = step->q, *k = step->k, *v = step->v;
  size_t token0 = 0; /* the sequence's first new token among the call's */
  for (int b = 0; b < c->batch; ++b) {
    const int n = step->counts[b], len = (int)step->lengths[b];
    const slots where = {step->pool, step->table_width ? step->tables + (size_t)b * step->table_width : NULL,
                         (size_t)page, slot};
    if (n == 0) continue;
    const uint8_t* k_rows = k + token0 * c->kv_heads * row_bytes(dk);
    const uint8_t* v_rows = v + token0 * c->kv_heads * row_bytes(dv);
    for (int t = 0; t < n; ++t) write_slot(c, (uint8_t*)slot_at(&where, len + t), k_rows, v_rows, n, t);
    for (int h = 0; h < H; ++h)
      for (int t = 0; t < n; ++t) {
        const size_t row = token0 * H + (size_t)h * n + t;
        attend(c, &where, h, len + t, (const float*)q + row * dk, (float*)step->o + row * dv,
               step->lse ? step->lse + row : NULL, scratch);
      }
    token0 += (size_t)n;
  }
  free(scratch);
  strcpy(step->path, "paged");
  return ATTEST_OK;
}

static const char* error(void* user) {
  (void)user;
  return last_error;
}

static const attest_kernel_v2 kernel = {
    .abi_version = ATTEST_ABI_VERSION_2,
    .struct_size = sizeof(attest_kernel_v2),
    .name = "serving-q8",
    .capabilities =
        ATTEST_CAP_CAUSAL | ATTEST_CAP_DECODE | ATTEST_CAP_LSE | ATTEST_CAP_GQA | ATTEST_CAP_WINDOW | ATTEST_CAP_CHUNK,
    .empty_rows = ATTEST_EMPTY_ZERO,
    .precision = {.q = ATTEST_F32,
                  .k = ATTEST_Q8,
                  .v = ATTEST_Q8,
                  .o = ATTEST_F32,
                  .scores = ATTEST_F32,
                  .p = ATTEST_F32,
                  .accumulator = ATTEST_F32,
                  .exp_ulps = 1.0},
    .contract = {.decode_only = 1},
    .decode_open = decode_open,
    .decode_step = decode_step,
    .decode_close = decode_close,
    .last_error = error,
    .cache_policy = ATTEST_CACHE_FULL,
    .page_tokens = kPageTokens,
    .page_bytes = page_bytes,
    .decode_paged = decode_paged,
};

const attest_kernel_v2* attest_kernel_entry(void) { return &kernel; }
