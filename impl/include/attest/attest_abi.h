/* attest C ABI, version 1: how a shared library presents an attention kernel to attest.
 *
 * The library exports one symbol, ATTEST_ENTRY_SYMBOL ("attest_kernel_entry"), returning a
 * pointer to a static attest_kernel descriptor. Every call returns an attest_status; nothing
 * may unwind across this boundary. On a non-OK status, last_error() returns a message that
 * stays valid until the next call. Layouts are row-major and contiguous (DESIGN.md §2):
 *   q [B][H][Tq][Dk], k [B][Hkv][Tk][Dk], v [B][Hkv][Tk][Dv], o [B][H][Tq][Dv], lse [B][H][Tq].
 * Query i sits at position q_offset + i, key j at j. The mask is the conjunction of every
 * enabled term; a row that sees no key follows the declared empty-row policy. */
#ifndef ATTEST_ABI_H
#define ATTEST_ABI_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define ATTEST_ABI_VERSION 1u
#define ATTEST_ENTRY_SYMBOL "attest_kernel_entry"

typedef enum attest_status {
  ATTEST_OK = 0,
  ATTEST_INVALID_ARGUMENT = 1, /* the problem is outside what the kernel accepts */
  ATTEST_UNSUPPORTED = 2,      /* a feature the kernel did not declare */
  ATTEST_INTERNAL_ERROR = 3
} attest_status;

/* Capability bits. */
#define ATTEST_CAP_CAUSAL (1u << 0)
#define ATTEST_CAP_WINDOW (1u << 1)
#define ATTEST_CAP_KEY_PADDING (1u << 2)
#define ATTEST_CAP_QUERY_PADDING (1u << 3)
#define ATTEST_CAP_SEGMENTS (1u << 4)
#define ATTEST_CAP_EXPLICIT_MASK (1u << 5)
#define ATTEST_CAP_GQA (1u << 6)
#define ATTEST_CAP_LSE (1u << 7)
#define ATTEST_CAP_ROPE (1u << 8)
#define ATTEST_CAP_DECODE (1u << 9)

typedef enum attest_empty_rows { ATTEST_EMPTY_ZERO = 0, ATTEST_EMPTY_NAN = 1 } attest_empty_rows;
typedef enum attest_precision { ATTEST_F32 = 0, ATTEST_BF16 = 1, ATTEST_F16 = 2 } attest_precision;

typedef struct attest_problem {
  int32_t batch, heads, kv_heads, q_len, k_len, head_dim, value_dim;
  double scale;        /* always explicit (1/sqrt(Dk) when the user left it default) */
  int64_t q_offset;    /* always explicit (Tk - Tq when the user left it default) */
  int32_t causal;      /* 0 or 1: key j visible iff j <= q_offset + i */
  int32_t window;      /* 0 = none, else visible iff q_offset + i - j < window */
  const int32_t* kv_valid;       /* NULL or [B]: key j visible iff j < kv_valid[b] */
  const int32_t* q_valid;        /* NULL or [B]: query i sees nothing unless i < q_valid[b] */
  const int32_t* q_segment;      /* NULL or [B][Tq]; with k_segment [B][Tk]: equal ids only */
  const int32_t* k_segment;
  const uint8_t* explicit_mask;  /* NULL or [B][Tq][Tk], nonzero = visible */
  int32_t rope;        /* 0 or 1: rotate pairs (2m, 2m+1) of q and k by pos * base^(-2m/Dk) */
  double rope_base;
  const float* q;
  const float* k;
  const float* v;
} attest_problem;

typedef struct attest_outputs {
  float* o;    /* [B][H][Tq][Dv], to be fully written */
  float* lse;  /* [B][H][Tq] natural log, or NULL when not wanted */
  char path[32]; /* optional: the internal path that served the call, NUL-terminated */
} attest_outputs;

typedef struct attest_decode_config {
  int32_t batch, heads, kv_heads, head_dim, value_dim;
  double scale;
  int32_t window;  /* 0 = none; decode is always causal */
  int32_t rope;
  double rope_base;
} attest_decode_config;

typedef struct attest_kernel {
  uint32_t abi_version; /* ATTEST_ABI_VERSION */
  const char* name;
  uint32_t capabilities; /* ATTEST_CAP_* bits */
  int32_t empty_rows;    /* attest_empty_rows */
  int32_t precision;     /* attest_precision the kernel computes in */
  int32_t key_tile;      /* keys per online-softmax tile, 0 if none */
  void* user;            /* passed back to every call */

  attest_status (*forward)(void* user, const attest_problem* problem, attest_outputs* out);
  /* Decode (only with ATTEST_CAP_DECODE; NULL otherwise). step appends n >= 1 tokens:
   * q [B][H][n][Dk], k [B][Hkv][n][Dk], v [B][Hkv][n][Dv] -> o [B][H][n][Dv], lse [B][H][n]. */
  attest_status (*decode_open)(void* user, const attest_decode_config* config, void** session);
  attest_status (*decode_step)(void* user, void* session, int32_t n, const float* q, const float* k,
                               const float* v, float* o, float* lse);
  void (*decode_close)(void* user, void* session);
  const char* (*last_error)(void* user);
} attest_kernel;

typedef const attest_kernel* (*attest_kernel_entry_fn)(void);

#ifdef __cplusplus
}
#endif

#endif /* ATTEST_ABI_H */
