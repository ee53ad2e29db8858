/* An attention kernel in plain C99 behind the attest C ABI: the full problem model (every
 * mask term, GQA, LSE, RoPE, the zero empty-row policy). Build it as a shared library and
 * certify it with `attest certify --kernel ./libexample_attention.so`.
 *
 * The tests compile the same file with one of these defined to get broken plugins:
 * BROKEN_SEGFAULT, BROKEN_HANG, BROKEN_WRITE_PAST, BROKEN_NO_WRITE, BROKEN_ABI_VERSION. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "attest/attest_abi.h"

static char last_error[256];

static int visible(const attest_problem* p, int b, int i, int j) {
  const int64_t pos = p->q_offset + i;
  if (p->q_valid && i >= p->q_valid[b]) return 0;
  if (p->causal && j > pos) return 0;
  if (p->window && pos - j >= p->window) return 0;
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

static attest_status forward(void* user, const attest_problem* p, attest_outputs* out) {
  (void)user;
  const int dk = p->head_dim, dv = p->value_dim, tq = p->q_len, tk = p->k_len, group = p->heads / p->kv_heads;
  if (p->rope && dk % 2) {
    strcpy(last_error, "rope needs an even head_dim");
    return ATTEST_INVALID_ARGUMENT;
  }
#ifdef BROKEN_SEGFAULT
  if (tk > 1) *(volatile int*)0 = 1;
#endif
#ifdef BROKEN_HANG
  if (tk > 1) for (;;) pause();
#endif
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
#ifndef BROKEN_NO_WRITE
        for (int c = 0; c < dv; ++c) o[c] = 0.0f;
#else
        (void)o;
#endif
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
#ifndef BROKEN_NO_WRITE
          for (int c = 0; c < dv; ++c) o[c] += w * v[c];
#else
          (void)w, (void)v;
#endif
        }
        if (out->lse) out->lse[row] = max + logf(sum);
      }
    }
#ifdef BROKEN_WRITE_PAST
  out->o[(size_t)p->batch * p->heads * tq * dv] = 0.0f;
#endif
  strcpy(out->path, "c-reference-loop");
  free(query), free(key), free(score);
  return ATTEST_OK;
}

static const char* error(void* user) {
  (void)user;
  return last_error;
}

static const attest_kernel kernel = {
#ifdef BROKEN_ABI_VERSION
    .abi_version = ATTEST_ABI_VERSION_2 + 1,
#else
    .abi_version = ATTEST_ABI_VERSION,
#endif
    .name = "example-c",
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

const attest_kernel* attest_kernel_entry(void) { return &kernel; }
