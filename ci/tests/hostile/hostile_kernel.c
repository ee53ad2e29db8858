/* A correct attention kernel (the textbook loop of ci/examples/c_plugin/example_attention.c)
 * that CMake builds once per hostile behaviour: libhostile_<name>.so with -DHOSTILE_<NAME>.
 * Each behaviour imitates a real bug or a real hostile kernel; hostile_test.py says what attest
 * must make of it. Without a HOSTILE_ define (HOSTILE_GOOD) the kernel is correct.
 *
 * Every variant creates the file named by $HOSTILE_LOADED_MARKER, if set, when it is loaded:
 * the replay tests prove with it that a library named inside a file is never loaded. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <math.h>
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

static attest_kernel kernel = {
    .abi_version = ATTEST_ABI_VERSION,
    .name = HOSTILE_KERNEL_NAME,
    .capabilities = ATTEST_CAP_CAUSAL | ATTEST_CAP_WINDOW | ATTEST_CAP_KEY_PADDING | ATTEST_CAP_QUERY_PADDING |
                    ATTEST_CAP_SEGMENTS | ATTEST_CAP_EXPLICIT_MASK | ATTEST_CAP_GQA | ATTEST_CAP_LSE |
                    ATTEST_CAP_ROPE,
    .empty_rows = ATTEST_EMPTY_ZERO,
    .precision = ATTEST_F32,
    .key_tile = 0,
    .user = NULL,
    .forward = forward,
    .last_error = error,
};

const attest_kernel* attest_kernel_entry(void) {
  const char* marker = getenv("HOSTILE_LOADED_MARKER");
  if (marker) close(open(marker, O_CREAT | O_WRONLY, 0644));
#ifdef HOSTILE_LONG_NAME
  /* A generated name (model, shape, dtype, build hash...) of 240 characters. */
  static char name[241];
  memset(name, 'n', 240);
  memcpy(name, "hostile-long-name-", 18);
  kernel.name = name;
#endif
#ifdef HOSTILE_NON_UTF8_NAME
  /* A name built from uninitialised or Latin-1 bytes, with a control character. */
  kernel.name = "hostile-\xff\xfe-\x01-name";
#endif
  return &kernel;
}
