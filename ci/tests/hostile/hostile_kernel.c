/* A correct attention kernel (the textbook loop of ci/examples/c_plugin/example_attention.c)
 * that CMake builds once per hostile behaviour: libhostile_<name>.so with -DHOSTILE_<NAME>.
 * Each behaviour imitates a real bug or a real hostile kernel; hostile_test.py says what attest
 * must make of it. Without a HOSTILE_ define (HOSTILE_GOOD) the kernel is correct.
 *
 * Every variant creates the file named by $HOSTILE_LOADED_MARKER, if set, when it is loaded:
 * the replay tests prove with it that a library named inside a file is never loaded. */
#define _GNU_SOURCE /* NOLINT(bugprone-reserved-identifier): the feature-test macro glibc reads */
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include "attest/attest_abi.h"

#ifndef HOSTILE_KERNEL_NAME
#define HOSTILE_KERNEL_NAME "hostile-good"
#endif

#ifdef HOSTILE_HUGE_LAST_ERROR
static char last_error[(1 << 20) + 1]; /* 1 MB of message */
#else
static char last_error[256];
#endif

static int visible(const attest_problem* p, int b, int i, int j) {
  const int64_t pos = p->q_offset + i;
  if (p->q_valid && i >= p->q_valid[b]) return 0;
  if (p->causal && j > pos) return 0;
  if (p->window && pos - j >= p->window) return 0;
  if (p->kv_valid && j >= p->kv_valid[b]) return 0;
  if (p->q_segment && p->q_segment[(size_t)b * p->q_len + i] != p->k_segment[(size_t)b * p->k_len + j]) return 0;
  if (p->explicit_mask && !p->explicit_mask[((size_t)b * p->q_len + i) * p->k_len + j]) return 0;
#ifdef HOSTILE_DROP_LAST_KEY
  /* An off-by-one in the key loop's bound, only past 64 keys (from a second 64-key tile on). */
  if (p->k_len > 64 && j == p->k_len - 1) return 0;
#endif
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

/* The correct forward pass; the hostile behaviours wrap it. */
static attest_status attention(const attest_problem* p, attest_outputs* out) {
  const int dk = p->head_dim, dv = p->value_dim, tq = p->q_len, tk = p->k_len, group = p->heads / p->kv_heads;
  if (p->rope && dk % 2) {
    strcpy(last_error, "rope needs an even head_dim");
    return ATTEST_INVALID_ARGUMENT;
  }
  float* query = malloc(sizeof(float) * dk);
  float* key = malloc(sizeof(float) * dk);
  float* score = malloc(sizeof(float) * tk);
  if (!query || !key || !score) {
    free(query), free(key), free(score);
    strcpy(last_error, "out of memory");
    return ATTEST_INTERNAL_ERROR;
  }
  const float scale = (float)p->scale;
  for (int b = 0; b < p->batch; ++b)
    for (int h = 0; h < p->heads; ++h) {
      const int g = h / group;
      for (int i = 0; i < tq; ++i) {
        const size_t row = ((size_t)b * p->heads + h) * tq + i;
        float* o = out->o + row * dv;
        memcpy(query, p->q + row * dk, sizeof(float) * dk);
        if (p->rope) rotate(query, dk, p->q_offset + i, p->rope_base);
        float max = -INFINITY;
        for (int j = 0; j < tk; ++j) {
          score[j] = -INFINITY;
          if (!visible(p, b, i, j)) continue;
          memcpy(key, p->k + (((size_t)b * p->kv_heads + g) * tk + j) * dk, sizeof(float) * dk);
          if (p->rope) rotate(key, dk, j, p->rope_base);
          float dot = 0.0f;
          for (int c = 0; c < dk; ++c) dot += query[c] * key[c];
          score[j] = dot * scale;
          if (score[j] > max) max = score[j];
        }
        for (int c = 0; c < dv; ++c) o[c] = 0.0f;
        if (max == -INFINITY) { /* empty row: the zero policy */
          if (out->lse) out->lse[row] = -INFINITY;
          continue;
        }
        float sum = 0.0f;
        for (int j = 0; j < tk; ++j)
          if (score[j] != -INFINITY) sum += score[j] = expf(score[j] - max);
        for (int j = 0; j < tk; ++j) {
          if (score[j] == -INFINITY) continue;
          const float w = score[j] / sum;
          const float* v = p->v + (((size_t)b * p->kv_heads + g) * tk + j) * dv;
          for (int c = 0; c < dv; ++c) o[c] += w * v[c];
        }
        if (out->lse) out->lse[row] = max + logf(sum);
      }
    }
#ifdef HOSTILE_RANDOM_PATH
  /* A kernel that puts a call counter into its path name: a new "path" on every call. */
  static unsigned calls;
  snprintf(out->path, sizeof out->path, "call-%u", ++calls);
#else
  strcpy(out->path, "hostile-loop");
#endif
  free(query), free(key), free(score);
  return ATTEST_OK;
}

static attest_status forward(void* user, const attest_problem* p, attest_outputs* out) {
  (void)user;
  const size_t o_floats = (size_t)p->batch * p->heads * p->q_len * p->value_dim;
  (void)o_floats;
#ifdef HOSTILE_HUGE_LAST_ERROR
  /* A kernel that dumps a whole log into its error message. */
  memset(last_error, 'e', sizeof last_error - 1);
  return ATTEST_INTERNAL_ERROR;
#endif
#ifdef HOSTILE_MEMORY_HOG
  /* A leak: 1 GiB workspaces, each touched and never freed, until malloc says no. Capped at
   * 8 GiB (not 64) so that an unenforced limit shows as a certified run, not a machine-wide OOM;
   * once refused, every call fails at once (no run of hundreds of 1 GiB memsets). */
  static int leaked_gib;
  for (; leaked_gib < 8; ++leaked_gib) {
    void* block = malloc((size_t)1 << 30);
    if (!block) {
      strcpy(last_error, "out of memory");
      return ATTEST_INTERNAL_ERROR;
    }
    memset(block, 1, (size_t)1 << 30);
  }
#endif
#ifdef HOSTILE_SPIN
  /* A kernel stuck in a busy loop (a lost wake-up, a wrong loop bound). */
  for (volatile int spin = 1; spin;) {
  }
#endif
#ifdef HOSTILE_SLOW
  /* A kernel just under the per-call timeout on every call. */
  usleep(800 * 1000);
#endif
#ifdef HOSTILE_TENFOLD
  /* Correct and ten times slower than the correct loop (a debug build, a slower machine). */
  for (int r = 0; r < 9; ++r) attention(p, out);
#endif
#ifdef HOSTILE_SLEEPS_BY_WORK
  /* Correct, and from 512 keys on as slow as its size whatever the machine's load: B x H x Tq x
   * Tk / 2 microseconds of sleep per call (512 x 512: 0.13 s); from $HOSTILE_CLIFF_KEYS queries
   * and keys on, $HOSTILE_CLIFF_FACTOR times that (a cache cliff), or never an answer when the
   * factor is 0 (a hang at long sizes). */
  if (p->k_len >= 512) {
    const char* cliff_keys = getenv("HOSTILE_CLIFF_KEYS");
    const char* cliff_factor = getenv("HOSTILE_CLIFF_FACTOR");
    double us = (double)p->batch * p->heads * p->q_len * p->k_len / 2.0;
    if (cliff_keys && p->q_len >= atoi(cliff_keys) && p->k_len >= atoi(cliff_keys)) {
      const double factor = cliff_factor ? atof(cliff_factor) : 1.0;
      if (factor == 0)
        for (;;) pause();
      us *= factor;
    }
    const struct timespec nap = {(time_t)(us / 1e6), (long)fmod(us, 1e6) * 1000};
    nanosleep(&nap, NULL);
  }
#endif
#ifdef HOSTILE_FORK_KEEPS_STDERR
  /* A kernel that starts a helper (a compiler daemon, a profiler) which outlives the run with
   * attest's stderr open. */
  static int forked;
  if (!forked++ && fork() == 0) {
    sleep(90);
    _exit(0);
  }
#endif
#ifdef HOSTILE_SETSID_GRANDCHILD
  /* A helper that means to outlive everything: a grandchild that clears the death signal it
   * inherited, leaves the session and process group, and sleeps. */
  static int started;
  if (!started++ && fork() == 0) {
    if (fork() == 0) {
      prctl(PR_SET_PDEATHSIG, 0);
      setsid();
      sleep(300);
    }
    _exit(0);
  }
#endif
#ifdef HOSTILE_CRASH_AFTER_FORK
  /* A kernel whose helper process survives it, then crashes: the helper holds its pipes open. */
  if (fork() == 0) {
    sleep(60);
    _exit(0);
  }
  *(volatile int*)0 = 1;
#endif
#ifdef HOSTILE_PRINTF
  /* Debug output left in a kernel, on stdout. */
  printf("hostile-printf: forward B=%d H=%d Tq=%d Tk=%d\n", p->batch, p->heads, p->q_len, p->k_len);
  fflush(stdout);
#endif
  attest_status status = attention(p, out);
#ifdef HOSTILE_WRITE_BEFORE_O
  /* An off-by-a-row index that stores before the output, past any small canary. */
  out->o[-100] = 0.0f;
#endif
#ifdef HOSTILE_WRITE_FAR_BEFORE_O
  out->o[-2000] = 0.0f;
#endif
#ifdef HOSTILE_WRITE_AFTER_O
  /* A tile loop that stores a whole tile past the last row. */
  out->o[o_floats + 100] = 0.0f;
#endif
#ifdef HOSTILE_READ_PAST_K
  /* A vectorized load that reads one element past the end of K; its lane is multiplied by 0,
   * so only a NaN or infinity after K would ever show. */
  {
    const size_t k_floats = (size_t)p->batch * p->kv_heads * p->k_len * p->head_dim;
    out->o[0] += 0.0f * p->k[k_floats];
  }
#endif
#if defined(HOSTILE_WRITES_NAN) || defined(HOSTILE_LONG_NAME)
  /* A kernel that is simply wrong: NaN everywhere. */
  for (size_t i = 0; i < o_floats; ++i) out->o[i] = NAN;
#endif
  return status;
}

static const char* error(void* user) {
  (void)user;
  return last_error;
}

/* The ABI 2 variants' precision: float32 storage and arithmetic, exp within 1 ulp. */
#define HOSTILE_F32_THROUGHOUT                                                                                 \
  {                                                                                                            \
    .q = ATTEST_F32, .k = ATTEST_F32, .v = ATTEST_F32, .o = ATTEST_F32, .scores = ATTEST_F32, .p = ATTEST_F32, \
    .accumulator = ATTEST_F32, .exp_ulps = 1.0                                                                 \
  }

__attribute__((unused)) static attest_kernel kernel = {
    .abi_version = ATTEST_ABI_VERSION,
    .name = HOSTILE_KERNEL_NAME,
    .capabilities = ATTEST_CAP_CAUSAL | ATTEST_CAP_WINDOW | ATTEST_CAP_KEY_PADDING | ATTEST_CAP_QUERY_PADDING |
                    ATTEST_CAP_SEGMENTS | ATTEST_CAP_EXPLICIT_MASK | ATTEST_CAP_GQA | ATTEST_CAP_LSE | ATTEST_CAP_ROPE,
    .empty_rows = ATTEST_EMPTY_ZERO,
    .precision = ATTEST_F32,
    .key_tile = 0,
    .user = NULL,
    .forward = forward,
    .last_error = error,
};

#ifdef HOSTILE_SWAPS_REQUEST_FD
/* A correct kernel with a thread that, during its first call, swaps the descriptor its kernel
 * host reads requests from (the first of ATTEST_PROTOCOL_FDS, stdin without it) for the read end
 * of an empty pipe, and keeps the real one open: the host then waits on the empty pipe forever
 * while attest's next request fills the real one, which nobody reads. ABI 2, so that its contract
 * (Dk 64, Tk 600 to 700) makes every request over a pipe's 64 KiB: attest blocks in write()
 * unless its writes are polled against the call's deadline. */
static void* swap_request_fd(void* unused) {
  (void)unused;
  const char* fds = getenv("ATTEST_PROTOCOL_FDS");
  const int requests = fds ? atoi(fds) : 0;
  int empty[2];
  if (pipe(empty) != 0) return NULL;
  if (dup(requests) < 0) return NULL; /* the real request pipe stays open, unread */
  dup2(empty[0], requests);
  return NULL;
}

static attest_status swapping_forward(void* user, const attest_problem_v2* p, attest_outputs_v2* out) {
  static int swapped;
  pthread_t thread;
  if (!swapped++ && pthread_create(&thread, NULL, swap_request_fd, NULL) == 0) pthread_join(thread, NULL);
  const attest_problem v1 = {.batch = p->batch,
                             .heads = p->heads,
                             .kv_heads = p->kv_heads,
                             .q_len = p->q_len,
                             .k_len = p->k_len,
                             .head_dim = p->head_dim,
                             .value_dim = p->value_dim,
                             .scale = p->scale,
                             .q_offset = p->q_offset,
                             .causal = p->causal,
                             .q = p->q,
                             .k = p->k,
                             .v = p->v};
  attest_outputs v1_out = {out->o, out->lse, {0}};
  const attest_status status = forward(user, &v1, &v1_out);
  memcpy(out->path, v1_out.path, sizeof out->path);
  return status;
}

static const attest_kernel_v2 swapping_kernel = {
    .abi_version = ATTEST_ABI_VERSION_2,
    .struct_size = sizeof(attest_kernel_v2),
    .name = HOSTILE_KERNEL_NAME,
    .capabilities = ATTEST_CAP_CAUSAL | ATTEST_CAP_LSE,
    .empty_rows = ATTEST_EMPTY_ZERO,
    .precision = HOSTILE_F32_THROUGHOUT,
    .contract = {.head_dim = {64, 64}, .k_len = {600, 700}},
    .forward = swapping_forward,
    .last_error = error,
};

const attest_kernel_v2* attest_kernel_entry(void) { return &swapping_kernel; }
#elif defined(HOSTILE_PAGED)
/* A correct decode-only kernel over attest's block tables (ABI 2.4), f32 everywhere: a slot holds,
 * per kv head, the K row then the V row; sessions keep each sequence's slots in one array. Its
 * declaration comes from the environment, as a hostile or careless author might set it:
 *   HOSTILE_PAGE_BYTES  pages padded to this many bytes (a huge page size);
 *   HOSTILE_PAGE_VARIES page_bytes doubles on every other call (a size that changes per call);
 *   HOSTILE_PAGE_TOKENS tokens per page (default 16; -1: a declaration error);
 *   HOSTILE_PATHS       this many declared path names (a descriptor too long to send). */
enum { kSlotAlign = 64 };
static int page_tokens_declared = 16;

static size_t slot_bytes(const attest_decode_config_v2* c) {
  return (size_t)c->kv_heads * (size_t)(c->head_dim + c->value_dim) * sizeof(float);
}

static size_t natural_page_bytes(const attest_decode_config_v2* c) {
  size_t bytes = ((size_t)page_tokens_declared * slot_bytes(c) + kSlotAlign - 1) / kSlotAlign * kSlotAlign;
  const char* padded = getenv("HOSTILE_PAGE_BYTES");
  if (padded && (size_t)atoll(padded) > bytes) bytes = (size_t)atoll(padded);
  return bytes;
}

static attest_status paged_page_bytes(void* user, const attest_decode_config_v2* c, int64_t* bytes) {
  (void)user;
  static unsigned calls;
  *bytes = (int64_t)natural_page_bytes(c);
  if (getenv("HOSTILE_PAGE_VARIES") && calls++ % 2) *bytes *= 2;
  return ATTEST_OK;
}

/* One query at `pos` of query head h over the slots of one sequence; scratch: pos + 1 floats. */
static void paged_attend(const attest_decode_config_v2* c, const uint8_t* const* slots, int h, int pos,
                         const float* query, float* out, float* lse, float* scratch) {
  const int g = h / (c->heads / c->kv_heads), dk = c->head_dim, dv = c->value_dim;
  float max = -INFINITY;
  for (int j = 0; j <= pos; ++j) {
    const float* key = (const float*)slots[j] + (size_t)g * (dk + dv);
    float dot = 0.0f;
    for (int i = 0; i < dk; ++i) dot += query[i] * key[i];
    scratch[j] = dot * (float)c->scale;
    if (scratch[j] > max) max = scratch[j];
  }
  float sum = 0.0f;
  for (int j = 0; j <= pos; ++j) sum += scratch[j] = expf(scratch[j] - max);
  for (int i = 0; i < dv; ++i) out[i] = 0.0f;
  for (int j = 0; j <= pos; ++j) {
    const float* value = (const float*)slots[j] + (size_t)g * (dk + dv) + dk;
    for (int i = 0; i < dv; ++i) out[i] += scratch[j] / sum * value[i];
  }
  if (lse) *lse = max + logf(sum);
}

/* Token t of n new rows (K and V [Hkv][n][D]) into its slot. */
static void paged_write_slot(const attest_decode_config_v2* c, uint8_t* slot, const float* k, const float* v, int n,
                             int t) {
  const int dk = c->head_dim, dv = c->value_dim;
  for (int g = 0; g < c->kv_heads; ++g) {
    memcpy((float*)slot + (size_t)g * (dk + dv), k + ((size_t)g * n + t) * dk, sizeof(float) * dk);
    memcpy((float*)slot + (size_t)g * (dk + dv) + dk, v + ((size_t)g * n + t) * dv, sizeof(float) * dv);
  }
}

/* Appends n tokens to one sequence whose slot j is slots[j] (slots[len .. len + n) to be written)
 * and attends its new queries (q [H][n][Dk] -> o [H][n][Dv]). */
static attest_status paged_sequence(const attest_decode_config_v2* c, uint8_t** slots, int len, int n, const float* q,
                                    const float* k, const float* v, float* o, float* lse) {
  float* scratch = malloc(sizeof(float) * ((size_t)len + n));
  if (!scratch) return strcpy(last_error, "out of memory"), ATTEST_INTERNAL_ERROR;
  for (int t = 0; t < n; ++t) paged_write_slot(c, slots[len + t], k, v, n, t);
  for (int h = 0; h < c->heads; ++h)
    for (int t = 0; t < n; ++t) {
      const size_t row = (size_t)h * n + t;
      paged_attend(c, (const uint8_t* const*)slots, h, len + t, q + row * c->head_dim, o + row * c->value_dim,
                   lse ? lse + row : NULL, scratch);
    }
  free(scratch);
  return ATTEST_OK;
}

static int paged_config_ok(const attest_decode_config_v2* c) {
  if (c->rope || c->softcap != 0 || c->alibi_slopes || c->sinks || c->window || c->chunk) {
    strcpy(last_error, "no RoPE, window, chunk or score modifier (not declared)");
    return 0;
  }
  return 1;
}

static attest_status paged_decode(void* user, const attest_decode_config_v2* c, attest_paged_step* step) {
  (void)user;
  if (!paged_config_ok(c)) return ATTEST_UNSUPPORTED;
  const size_t slot = slot_bytes(c), page_size = natural_page_bytes(c);
  size_t token0 = 0;
  for (int b = 0; b < c->batch; ++b) {
    const int n = step->counts[b], len = (int)step->lengths[b];
    if (n == 0) continue;
    uint8_t** slots = malloc(sizeof(uint8_t*) * ((size_t)len + n));
    if (!slots) return strcpy(last_error, "out of memory"), ATTEST_INTERNAL_ERROR;
    const int32_t* table = step->tables + (size_t)b * step->table_width;
    for (int j = 0; j < len + n; ++j)
      slots[j] = (uint8_t*)step->pool + (size_t)table[j / page_tokens_declared] * page_size +
                 (size_t)(j % page_tokens_declared) * slot;
    const attest_status status = paged_sequence(
        c, slots, len, n, (const float*)step->q + token0 * c->heads * c->head_dim,
        (const float*)step->k + token0 * c->kv_heads * c->head_dim,
        (const float*)step->v + token0 * c->kv_heads * c->value_dim, (float*)step->o + token0 * c->heads * c->value_dim,
        step->lse ? step->lse + token0 * c->heads : NULL);
    free(slots);
    if (status != ATTEST_OK) return status;
    token0 += (size_t)n;
  }
  strcpy(step->path, "paged");
  return ATTEST_OK;
}

typedef struct paged_session {
  attest_decode_config_v2 config;
  int len;
  uint8_t** cache; /* [B] growing arrays of slots */
} paged_session;

static attest_status paged_open(void* user, const attest_decode_config_v2* c, void** out) {
  (void)user;
  if (!paged_config_ok(c)) return ATTEST_UNSUPPORTED;
  paged_session* s = calloc(1, sizeof(paged_session));
  if (s) s->cache = calloc((size_t)c->batch, sizeof(uint8_t*));
  if (!s || !s->cache) return free(s), strcpy(last_error, "out of memory"), ATTEST_INTERNAL_ERROR;
  s->config = *c;
  s->config.alibi_slopes = NULL, s->config.sinks = NULL;
  *out = s;
  return ATTEST_OK;
}

static attest_status paged_step(void* user, void* handle, int32_t n, const void* q, const void* k, const void* v,
                                void* o, float* lse, char path[32]) {
  (void)user;
  paged_session* s = handle;
  const attest_decode_config_v2* c = &s->config;
  const size_t slot = slot_bytes(c);
  uint8_t** slots = malloc(sizeof(uint8_t*) * ((size_t)s->len + n));
  if (!slots) return strcpy(last_error, "out of memory"), ATTEST_INTERNAL_ERROR;
  for (int b = 0; b < c->batch; ++b) {
    uint8_t* grown = realloc(s->cache[b], ((size_t)s->len + n) * slot);
    if (!grown) return free(slots), strcpy(last_error, "out of memory"), ATTEST_INTERNAL_ERROR;
    s->cache[b] = grown;
    for (int j = 0; j < s->len + n; ++j) slots[j] = grown + (size_t)j * slot;
    const attest_status status = paged_sequence(
        c, slots, s->len, n, (const float*)q + (size_t)b * c->heads * n * c->head_dim,
        (const float*)k + (size_t)b * c->kv_heads * n * c->head_dim,
        (const float*)v + (size_t)b * c->kv_heads * n * c->value_dim,
        (float*)o + (size_t)b * c->heads * n * c->value_dim, lse ? lse + (size_t)b * c->heads * n : NULL);
    if (status != ATTEST_OK) return free(slots), status;
  }
  free(slots);
  s->len += n;
  strcpy(path, "session");
  return ATTEST_OK;
}

static void paged_close(void* user, void* handle) {
  (void)user;
  paged_session* s = handle;
  for (int b = 0; s && b < s->config.batch; ++b) free(s->cache[b]);
  if (s) free(s->cache);
  free(s);
}

static attest_kernel_v2 paged_kernel = {
    .abi_version = ATTEST_ABI_VERSION_2,
    .struct_size = sizeof(attest_kernel_v2),
    .name = HOSTILE_KERNEL_NAME,
    .capabilities = ATTEST_CAP_CAUSAL | ATTEST_CAP_DECODE | ATTEST_CAP_LSE | ATTEST_CAP_GQA,
    .empty_rows = ATTEST_EMPTY_ZERO,
    .precision = HOSTILE_F32_THROUGHOUT,
    .contract = {.decode_only = 1},
    .decode_open = paged_open,
    .decode_step = paged_step,
    .decode_close = paged_close,
    .last_error = error,
    .cache_policy = ATTEST_CACHE_FULL,
    .page_tokens = 16,
    .page_bytes = paged_page_bytes,
    .decode_paged = paged_decode,
};

const attest_kernel_v2* attest_kernel_entry(void) {
  const char* tokens = getenv("HOSTILE_PAGE_TOKENS");
  if (tokens) paged_kernel.page_tokens = page_tokens_declared = atoi(tokens);
  const char* paths = getenv("HOSTILE_PATHS");
  if (paths && atoi(paths) > 0) {
    /* Shape-hashed names, one per (B, H, Tk) bucket a generator might emit. */
    const int count = atoi(paths);
    attest_path_predicate* declared = calloc((size_t)count, sizeof(attest_path_predicate));
    char* names = calloc((size_t)count, 32);
    for (int i = 0; declared && names && i < count; ++i) {
      snprintf(names + (size_t)i * 32, 32, "shape-%08x", (unsigned)i * 2654435761u);
      declared[i].path = names + (size_t)i * 32;
    }
    paged_kernel.path_predicates = declared;
    paged_kernel.path_predicate_count = count;
  }
  return &paged_kernel;
}
#else
const attest_kernel* attest_kernel_entry(void) {
  const char* marker = getenv("HOSTILE_LOADED_MARKER");
  if (marker) close(open(marker, O_CREAT | O_WRONLY, 0644));
#ifdef HOSTILE_LONG_NAME
  /* A generated name (model, shape, dtype, build hash...) of 240 characters. */
  static char name[241];
  memset(name, 'n', 240);
  memcpy(name, "hostile-long-name-", 18); /* NOLINT(bugprone-not-null-terminated-result): a prefix; NUL at 240 */
  kernel.name = name;
#endif
#ifdef HOSTILE_NON_UTF8_NAME
  /* A name built from uninitialised or Latin-1 bytes, with a control character. */
  kernel.name = "hostile-\xff\xfe-\x01-name";
#endif
  return &kernel;
}
#endif
