/* attest C ABI: how a shared library presents an attention kernel to attest.
 *
 * The library exports one symbol, ATTEST_ENTRY_SYMBOL ("attest_kernel_entry"), returning a
 * pointer to a static descriptor whose first field is its ABI version:
 *   - version 2 (attest_kernel_v2, below): the kernel declares its contract (what problems it
 *     accepts), where it rounds (precision), its tiles, and the features it supports;
 *   - version 1 (attest_kernel): still loaded as before; it means "any problem of the declared
 *     features, float32 everywhere".
 * Every call returns an attest_status; nothing may unwind across this boundary. On a non-OK
 * status, last_error() returns a message that stays valid until the next call. Layouts are
 * row-major and contiguous (docs/design.md#problem-semantics):
 *   q [B][H][Tq][Dk], k [B][Hkv][Tk][Dk], v [B][Hkv][Tk][Dv], o [B][H][Tq][Dv], lse [B][H][Tq].
 * Query i sits at position q_offset + i, key j at j. The mask is the conjunction of every
 * enabled term; a row that sees no key follows the declared empty-row policy.
 *
 * attest sends only problems inside the declared contract and features. ATTEST_UNSUPPORTED on
 * a problem inside them is a failure (with the problem saved), not a skip.
 *
 * Version 2.1 (same abi_version 2; ATTEST_ABI_MINOR below) gives fields that 2.0 reserved a
 * meaning, each zero by default so that a 2.0 descriptor means what it meant: self-attention-only
 * and standard-ALiBi-only contracts and the input domain (attest_contract); the bias's storage,
 * a softmax sum apart from the P.V accumulator, P.V before normalising and rounding on entry
 * (attest_precision_spec, with attest_problem_v2.bias_stored for a 16-bit bias); and, after attest_kernel_v2's reserved
 * pointers (read only when struct_size reaches them), the precision of each internal path.
 *
 * Version 2.2 appends to attest_kernel_v2 (read only when struct_size reaches it) the kernel's
 * internal paths with the problems each takes (attest_path_predicate): attest then draws every
 * path's problems from its predicate instead of discovering paths, and a call served by another
 * path than the declaration names fails.
 *
 * Version 2.3 gives the reserved `backward` slot its function (with ATTEST_CAP_BACKWARD: dO -> dQ,
 * dK, dV and dsinks, docs/design.md#backward) and contract.reserved[0] its meaning (deterministic_backward).
 *
 * Version 2.4 (serving caches, docs/design.md#serving-caches): K and V may be stored in a quantized format
 * (attest_precision's 2.4 codes, laid out as ATTEST_Q8 says), a q8_head session receives its static
 * scales through the decode configuration's first reserved pointers, and, appended to
 * attest_kernel_v2 (read only when struct_size reaches them), a decoder declares which cached
 * positions it keeps (attest_cache_policy) and, for an explicit policy, reports them, and may read
 * its cache through block tables attest owns (page_tokens, page_bytes, decode_paged).
 *
 * Version 2.6 gives the first reserved pointer after `backward` its function: with ATTEST_CAP_MERGE,
 * `merge` merges partial attention states (split-KV, cascade, ring attention) into one.
 *
 * Version 2.7 appends to attest_kernel_v2 (read only when struct_size reaches them) a contract's value
 * width apart from Dk (value_dim, value_dims) and alibi_excludes_bias, and gives attest_path_predicate's
 * first reserved int its meaning: key_tile, the keys per online-softmax tile of that declared path
 * (0: the contract's key_tile).
 *
 * Version 2.8 appends to attest_kernel_v2 (read only when struct_size reaches ATTEST_KERNEL_V2_8_SIZE)
 * forward_packed: with ATTEST_CAP_PACKED the kernel also takes the packed variable-length layout
 * (attest_packed_problem: sequences concatenated with cu_seqlens offsets and no padding, as
 * FlashAttention's varlen functions take them).
 *
 * Version 2.9 gives attest_precision_spec's reserved byte its meaning (no struct grows):
 * flush_subnormals = 1 declares that the kernel may flush subnormals (FTZ/DAZ, a wasm or GPU
 * build): any value below 2^-126 in magnitude (float's smallest normal, and bf16's; f16 and fp8
 * hold nothing so small), an input as read, an intermediate or an output, may be replaced by a
 * zero of the same sign. The bound charges it (docs/design.md#tolerance-model); a value at or
 * above 2^-126 must not be flushed.
 *
 * Version 2.10 gives attest_packed_problem's first two reserved pointers their meaning (no struct
 * grows): with ATTEST_CAP_PACKED_INT64 as well as ATTEST_CAP_PACKED, the offsets come as int64
 * (cu_seqlens_q64, cu_seqlens_k64; cu_seqlens_q and cu_seqlens_k NULL), as FlashAttention and
 * cuDNN take them for totals past 2^31. */
#ifndef ATTEST_ABI_H
#define ATTEST_ABI_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define ATTEST_ABI_VERSION_1 1u
#define ATTEST_ABI_VERSION_2 2u
#define ATTEST_ABI_VERSION ATTEST_ABI_VERSION_1 /* what a version-1 descriptor declares */
#define ATTEST_ABI_MINOR 10                     /* version 2.10: the fields and values marked 2.1 to 2.10 below */
#define ATTEST_ENTRY_SYMBOL "attest_kernel_entry"
/* Every constant below has its row, with the version that added it, in the .def files of attest/abi/interface/
 * (interface_table_test checks both ways). */

typedef enum attest_status {
  ATTEST_OK = 0,
  ATTEST_INVALID_ARGUMENT = 1, /* the problem is outside what the kernel accepts */
  ATTEST_UNSUPPORTED = 2,      /* a feature the kernel did not declare */
  ATTEST_INTERNAL_ERROR = 3
} attest_status;

/* Capability bits: the features a kernel supports (impl/model/src/features.cpp is the table). */
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
/* Version 2: */
#define ATTEST_CAP_CHUNK (1u << 10)     /* chunked local attention */
#define ATTEST_CAP_SOFTCAP (1u << 11)   /* logit softcap c * tanh(x / c) */
#define ATTEST_CAP_ALIBI (1u << 12)     /* ALiBi slopes, one per query head */
#define ATTEST_CAP_BIAS (1u << 13)      /* an additive float bias (-inf masks a key) */
#define ATTEST_CAP_SINKS (1u << 14)     /* attention sinks: one logit per query head, denominator only */
#define ATTEST_CAP_LOOKAHEAD (1u << 15) /* keys ahead of the query: visible iff j - (q_offset + i) < lookahead */
/* Version 2.3: */
#define ATTEST_CAP_BACKWARD (1u << 16) /* the backward entry: dQ, dK, dV (and dsinks) from dO */
/* Version 2.6: */
#define ATTEST_CAP_MERGE (1u << 17) /* the merge entry: partial states (O_i, LSE_i) -> (O, LSE) */
/* Version 2.8: */
#define ATTEST_CAP_PACKED                                                                    \
  (1u << 18) /* layout = packed: forward_packed takes varlen batches (attest_packed_problem) \
              */
/* Version 2.10: */
#define ATTEST_CAP_PACKED_INT64 (1u << 19) /* with PACKED: forward_packed reads int64 cu_seqlens_q64/k64 */

/* The integer mask terms: one int32 parameter each (0 = off), a field of that name in
 * attest_problem_v2 and attest_decode_config_v2, listed here in the order they travel on the
 * process protocol (one i32 array). A new term: its capability bit, its field at the end of both
 * structs, and its line here (attest's adapter and wire iterate this list). A field added after
 * `reserved` holds a value only for a kernel that declares its bit: read it only then. */
#define ATTEST_INTEGER_MASK_TERMS(X) \
  X(window, ATTEST_CAP_WINDOW)       \
  X(chunk, ATTEST_CAP_CHUNK)         \
  X(lookahead, ATTEST_CAP_LOOKAHEAD)

typedef enum attest_empty_rows { ATTEST_EMPTY_ZERO = 0, ATTEST_EMPTY_NAN = 1 } attest_empty_rows;

/* Outputs reach the kernel filled with this quiet NaN (float32 bits; 16-bit outputs with its top
 * half): an element still holding it was never written, any other NaN was computed. */
#define ATTEST_UNWRITTEN_F32 0x7FCAFE00u
/* Number formats: storage of a buffer, or the precision an operation is carried out in. */
typedef enum attest_precision {
  ATTEST_F32 = 0,
  ATTEST_BF16 = 1,
  ATTEST_F16 = 2,
  /* 2.4: storage of K and V only (precision.k, precision.v), the formats of docs/design.md#serving-caches. A buffer
   * holds rows (one token of one kv head: Dk or Dv values), each row's groups one after another, a
   * group being its f16 scale d (2 bytes, little endian) then its codes; a value is d * code:
   *   ATTEST_Q8        groups of 32, int8 codes in [-127, 127] (ggml's q8_0)
   *   ATTEST_Q4        groups of 32, codes in [-8, 7] stored as code + 8, two per byte: elements
   *                    2m and 2m + 1 in byte m, low nibble first (an odd group's last byte has 8 in
   *                    its high nibble). Not ggml's order: that is ATTEST_Q4_0.
   *   ATTEST_Q4_0      (2.6) ggml's block_q4_0 byte for byte: groups of 32, codes as ATTEST_Q4's, but
   *                    byte j holds element j in its low nibble and element j + 16 in its high one
   *                    (a group of n < 32: j and j + ceil(n / 2); a missing element is code 0)
   *   ATTEST_Q8_TOKEN  one group per row, int8 codes
   *   ATTEST_Q8_HEAD   one static scale per (sequence, kv head): in a problem the group is all the
   *                    rows of that kv head ([Tk][D] values, one scale first); in a decode step the
   *                    rows carry int8 codes only, the scales came with the configuration
   *   ATTEST_E4M3, ATTEST_E5M2  fp8, one byte per value, no scale (e4m3: no infinity, saturates at 448)
   * attest sends only values the format holds exactly (canonical scales: the group's largest
   * magnitude over 127, or its signed largest over -8 for q4 and q4_0, rounded to f16). */
  ATTEST_E4M3 = 3,
  ATTEST_E5M2 = 4,
  ATTEST_Q8 = 5,
  ATTEST_Q4 = 6,
  ATTEST_Q8_TOKEN = 7,
  ATTEST_Q8_HEAD = 8,
  ATTEST_Q4_0 = 9
} attest_precision;

/* 2.4: which cached positions a decoder's sessions keep for the query at position p (docs/design.md#serving-caches). */
typedef enum attest_cache_policy {
  ATTEST_CACHE_FULL = 0,         /* every position */
  ATTEST_CACHE_WINDOW = 1,       /* key j iff p - j < cache_recent */
  ATTEST_CACHE_SINKS_RECENT = 2, /* key j iff j < cache_sinks or p - j < cache_recent */
  ATTEST_CACHE_EXPLICIT = 3      /* the positions decode_retained reports after each step */
} attest_cache_policy;
/* A precision in a field whose zero means "not declared apart" (precision.weight_sum). */
#define ATTEST_IN(precision) ((precision) + 1)

/* 2.1: which ALiBi slope vectors a kernel accepts (contract.alibi_slopes). */
typedef enum attest_alibi_slopes {
  ATTEST_ALIBI_ARBITRARY = 0, /* any vector of H slopes */
  ATTEST_ALIBI_STANDARD = 1   /* only the geometric set for H heads, n = 2^floor(log2 H): head h < n has
                                 2^(-max_bias (h + 1) / n), head h >= n has 2^(-max_bias (2 (h - n) + 1) / 2n)
                                 (computed in double, sent as float: a kernel may compare them) */
} attest_alibi_slopes;

/* 2.1: what the kernel promises about its inputs (contract.inputs), so how attest poisons masked keys. */
typedef enum attest_input_domain {
  ATTEST_INPUTS_MASKED_MAY_BE_NONFINITE = 0, /* masked and bias-hidden keys may hold NaN, inf, huge values */
  ATTEST_INPUTS_FINITE = 1,                  /* every input finite (masked keys are poisoned with +-1e30 only) */
  /* 2.5: an additive mask: every key is scored, then a masked one gets -inf (a float mask). Masked
   * keys are finite and each of their scores stays inside the declared score format's range. */
  ATTEST_INPUTS_MASKED_SCORED = 2
} attest_input_domain;

/* ------------------------------------------------------------------------------------------
 * Version 1 (unchanged; new kernels use version 2 below).
 * ------------------------------------------------------------------------------------------ */

typedef struct attest_problem {
  int32_t batch, heads, kv_heads, q_len, k_len, head_dim, value_dim;
  double scale;             /* always explicit (1/sqrt(Dk) when the user left it default) */
  int64_t q_offset;         /* always explicit (Tk - Tq when the user left it default) */
  int32_t causal;           /* 0 or 1: key j visible iff j <= q_offset + i */
  int32_t window;           /* 0 = none, else visible iff q_offset + i - j < window */
  const int32_t* kv_valid;  /* NULL or [B]: key j visible iff j < kv_valid[b] */
  const int32_t* q_valid;   /* NULL or [B]: query i sees nothing unless i < q_valid[b] */
  const int32_t* q_segment; /* NULL or [B][Tq]; with k_segment [B][Tk]: equal ids only */
  const int32_t* k_segment;
  const uint8_t* explicit_mask; /* NULL or [B][Tq][Tk], nonzero = visible */
  int32_t rope;                 /* 0 or 1: rotate pairs (2m, 2m+1) of q and k by pos * base^(-2m/Dk) */
  double rope_base;
  const float* q;
  const float* k;
  const float* v;
} attest_problem;

typedef struct attest_outputs {
  float* o;      /* [B][H][Tq][Dv], to be fully written */
  float* lse;    /* [B][H][Tq] natural log, or NULL when not wanted */
  char path[32]; /* optional: the internal path that served the call, NUL-terminated */
} attest_outputs;

typedef struct attest_decode_config {
  int32_t batch, heads, kv_heads, head_dim, value_dim;
  double scale;
  int32_t window; /* 0 = none; decode is always causal */
  int32_t rope;
  double rope_base;
} attest_decode_config;

typedef struct attest_kernel {
  uint32_t abi_version; /* ATTEST_ABI_VERSION_1 */
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
  attest_status (*decode_step)(void* user, void* session, int32_t n, const float* q, const float* k, const float* v,
                               float* o, float* lse);
  void (*decode_close)(void* user, void* session);
  const char* (*last_error)(void* user);
} attest_kernel;

/* ------------------------------------------------------------------------------------------
 * Version 2: contract, precision, tiles; room for score modifiers, backward and quantized K/V.
 * ------------------------------------------------------------------------------------------ */

/* An inclusive range; {0, 0} means "no limit" (any value the problem model allows). */
typedef struct attest_range {
  int64_t min, max;
} attest_range;

/* What the kernel accepts. attest generates only problems inside it, reports the properties
 * that need problems outside it as "not covered" (with the reason), and treats
 * ATTEST_UNSUPPORTED on a problem inside it as a failure. */
typedef struct attest_contract {
  const int32_t* head_dims; /* NULL: any head width within head_dim; else the only widths (Dk) */
  int32_t head_dim_count;
  attest_range head_dim; /* Dk (and Dv unless dk_equals_dv says more) */
  attest_range batch, heads, q_len, k_len;
  attest_range q_offset;        /* {0, 0}: any */
  int32_t dk_equals_dv;         /* 1: only Dv == Dk */
  int32_t default_scale_only;   /* 1: only scale = 1/sqrt(Dk) */
  int32_t causal_required;      /* 1: only causal problems (bottom-right, q_offset = Tk - Tq) */
  int32_t decode_only;          /* 1: no forward; certified through decode_open/step only */
  int32_t query_tile, key_tile; /* the kernel's tile sizes (0: none): lengths are drawn around
                                   them, and the error bound counts key tiles */
  int32_t decode_lse_optional;  /* 1: decode_step accepts lse == NULL */
  /* 2.1 (these were reserved and zero in 2.0): */
  int32_t self_attention_only; /* 1: only Tq == Tk with q_offset 0 (a training kernel's shape) */
  int32_t alibi_slopes;        /* attest_alibi_slopes */
  int32_t inputs;              /* attest_input_domain */
  double alibi_max_bias;       /* with ATTEST_ALIBI_STANDARD: the formula's max_bias (0 means 8) */
  double max_abs_value;        /* 0: any; else the largest |V| of a visible key the kernel is built for
                                  (at least 1): an unnormalised 16-bit P.V sum holds up to keys x |V| */
  /* 2.3 (reserved and zero before): */
  int32_t deterministic_backward; /* 1: the backward's gradients are bitwise the same on every call with the
                                     same inputs, whatever attest_backward_inputs.threads says */
} attest_contract;

/* Where the kernel rounds (docs/design.md#precision). Buffers arrive and leave in their storage types:
 * a BF16 or F16 buffer holds 16-bit values (uint16_t bits), an F32 one floats. attest draws
 * inputs representable in each storage type, computes the reference on the stored values,
 * bounds the error from where the kernel says it rounds, and runs its precision gate against
 * a model kernel rounding at exactly those places (ci/examples/c_plugin/fp16_kv_attention.c). */
typedef struct attest_precision_spec {
  int32_t q, k, v, o;  /* storage of each buffer: attest_precision */
  int32_t scores;      /* precision q.k is accumulated in */
  int32_t p;           /* P is rounded to this before P.V (ATTEST_F32: not rounded) */
  int32_t accumulator; /* precision P.V is accumulated in (and the softmax sum, unless weight_sum) */
  double exp_ulps;     /* worst error of one exp, in ulps (0 means 1) */
  /* 2.1 (these were reserved and zero in 2.0): */
  int32_t bias;            /* storage of the bias: ATTEST_F32 (problem.bias), or ATTEST_BF16 / ATTEST_F16
                              (problem.bias_stored holds 16-bit values and problem.bias is NULL) */
  int32_t weight_sum;      /* 0: the softmax sum is accumulated in `accumulator`; else ATTEST_IN(its precision) */
  int32_t pv_unnormalised; /* 1: P.V is summed with weights exp(s - m) and divided by the sum at the end */
  int8_t q_entry, k_entry, v_entry; /* rounding on entry: the kernel rounds that input to this precision
                                       before using it (ATTEST_F32: used as stored); attest still sends
                                       the storage type and charges the rounding to the kernel's bound.
                                       2.6: q_entry may be ATTEST_Q8, Q quantized per 32 values of a row
                                       as ggml's quantize_row_q8_0 does (d = max|x| / 127 stored f16,
                                       codes x * 127 / max|x| rounded to nearest): ggml's Q for a q8_0
                                       or q4_0 K */
  int8_t flush_subnormals;          /* 2.9 (reserved and zero before): 1 = subnormals may be flushed to a zero
                                       of the same sign, read or written (ABI 2.9 above); 0 = they are kept.
                                       The kernel's own field: a path's must be 0 or the same */
} attest_precision_spec;

typedef struct attest_problem_v2 {
  int32_t batch, heads, kv_heads, q_len, k_len, head_dim, value_dim;
  double scale;
  int64_t q_offset;
  int32_t causal, window;
  int32_t chunk; /* 0 = none, else visible iff floor((q_offset + i) / chunk) == floor(j / chunk) */
  const int32_t* kv_valid;
  const int32_t* q_valid;
  const int32_t* q_segment;
  const int32_t* k_segment;
  const uint8_t* explicit_mask;
  int32_t rope;
  double rope_base;
  const void* q; /* in the declared storage types (float for ATTEST_F32) */
  const void* k;
  const void* v;
  /* Score modifiers (docs/design.md#score-modifiers), each absent unless the kernel declares it: with
   * x = scale * q.k, the logit is softcap(x) + alibi[h] * (j - qpos(i)) + bias[b][h][i][j];
   * masked keys are excluded after that; a sink joins only the softmax denominator. */
  double softcap;            /* 0: none, else c > 0 and softcap(x) = c * tanh(x / c) */
  const float* alibi_slopes; /* NULL or [H] */
  const float* bias;         /* NULL or [B or 1][H or 1][Tq][Tk] */
  int32_t bias_per_batch;    /* 0: one bias for every batch entry (first dimension is 1) */
  int32_t bias_per_head;     /* 0: one bias for every head (second dimension is 1) */
  const float* sinks;        /* NULL or [H] */
  /* 2.1: the bias in its declared storage type (precision.bias), NULL when there is none. An F32
   * bias is the same buffer as `bias`; a BF16 / F16 one holds uint16_t values and `bias` is NULL.
   * -inf masks the key in every storage type. */
  const void* bias_stored;
  const void* reserved[3]; /* quantized K/V scales later; NULL */
  int32_t lookahead;       /* 0 = none, else visible iff j - (q_offset + i) < lookahead */
} attest_problem_v2;

typedef struct attest_outputs_v2 {
  void* o;    /* [B][H][Tq][Dv] in the declared O storage type, to be fully written */
  float* lse; /* [B][H][Tq] natural log, or NULL when not wanted */
  char path[32];
} attest_outputs_v2;

typedef struct attest_decode_config_v2 {
  int32_t batch, heads, kv_heads, head_dim, value_dim;
  double scale;
  int32_t window; /* 0 = none; decode is always causal */
  int32_t chunk;  /* 0 = none */
  int32_t rope;
  double rope_base;
  double softcap;            /* as in attest_problem_v2 */
  const float* alibi_slopes; /* NULL or [H] */
  const float* sinks;        /* NULL or [H] */
  /* reserved[0], reserved[1] (2.4): with K and V stored ATTEST_Q8_HEAD, the static scales of K and V,
   * each const float* [B][Hkv] (f16 values); NULL otherwise. reserved[2], reserved[3]: NULL.
   * Every pointer of a configuration is valid for the call that receives it only: a session copies
   * what it keeps (slopes, sinks, scales). */
  const void* reserved[4];
  int32_t lookahead; /* 0 = none (a no-op in a causal session, carried for uniformity) */
} attest_decode_config_v2;

/* 2.3: the backward (ATTEST_CAP_BACKWARD, docs/design.md#backward) of the forward of the same problem. It is
 * given the forward's O and LSE as attest computed them (LSE -inf on a row that sees no key) and the
 * loss gradient dO; it writes dQ, dK, dV with the shapes of q, k, v (dK and dV summed over each GQA
 * group's query heads) and, when the problem has sinks, dsinks [H]. Every buffer is in the storage
 * type of its forward counterpart (dO as O, dQ as Q, ...); this attest sends a backward only to a
 * kernel whose storage and arithmetic are float32 (a 16-bit backward's bound is not derived yet). */
typedef struct attest_backward_inputs {
  const void* o;           /* [B][H][Tq][Dv] */
  const float* lse;        /* [B][H][Tq] natural log */
  const void* d_o;         /* [B][H][Tq][Dv] */
  int32_t threads;         /* the workers the call may use (CPU threads, or the splits of a GPU kernel's
                              reductions); 0: the kernel's own choice. attest varies it to test a
                              deterministic backward; a kernel may ignore it */
  int32_t reserved_int;    /* zero */
  const void* reserved[4]; /* NULL (dLSE later) */
} attest_backward_inputs;

typedef struct attest_gradients {
  void* dq;      /* [B][H][Tq][Dk], to be fully written */
  void* dk;      /* [B][Hkv][Tk][Dk] */
  void* dv;      /* [B][Hkv][Tk][Dv] */
  float* dsinks; /* [H] when the problem has sinks, else NULL */
  char path[32]; /* optional: the internal path that served the call */
} attest_gradients;

/* 2.6: partial attention states over disjoint sets of keys (ATTEST_CAP_MERGE), to be merged into the
 * state over their union: o = sum_i w_i o_i / sum_i w_i with w_i = exp(lse_i), lse = log(sum_i w_i).
 * A row whose part saw no key has lse -inf and an o that must not be read (attest sends NaN there);
 * a row no part saw merges to o = 0, lse = -inf. */
typedef struct attest_merge_inputs {
  int32_t parts, rows, value_dim; /* each >= 1 */
  int32_t storage;                /* o's storage: ATTEST_F32 or ATTEST_BF16 */
  const void* o;                  /* [parts][rows][value_dim] in `storage` */
  const float* lse;               /* [parts][rows] natural log */
  const void* reserved[2];        /* NULL */
} attest_merge_inputs;

typedef struct attest_merge_outputs {
  float* o;      /* [rows][value_dim] float32, to be fully written */
  float* lse;    /* [rows] natural log */
  char path[32]; /* optional: the internal path that served the call */
} attest_merge_outputs;

/* 2.4: one call of a block-table decoder (page_tokens > 0, docs/design.md#serving-caches). attest owns the pages
 * and the tables: it hands out pages, shares a prompt's pages between sequences and copies a shared
 * page before a sequence appends to it. Sequence b holds lengths[b] tokens and appends counts[b] >= 0
 * (one call's sequences may differ in both): position t lives in slot t % page_tokens of page
 * tables[b][t / page_tokens], in the kernel's own layout of page_bytes bytes. The call writes its
 * new tokens' slots and nothing else of the pool (attest compares every other page byte for byte),
 * then attends each new query causally over its own sequence. */
typedef struct attest_paged_step {
  void* pool;            /* the physical pages, one after another, 64-byte aligned */
  int64_t pool_bytes;    /* a whole number of pages */
  const int32_t* tables; /* [B][table_width]: logical page -> physical page (entries past a sequence's pages: -1) */
  int32_t table_width;
  const int64_t* lengths; /* [B] */
  const int32_t* counts;  /* [B] */
  /* The new tokens, sequence after sequence, in the storage types: sequence b's q [H][n_b][Dk],
   * k and v [Hkv][n_b][D] (q8_head: codes alone), o [H][n_b][Dv], lse [H][n_b] (NULL: not wanted). */
  const void* q;
  const void* k;
  const void* v;
  void* o;
  float* lse;
  char path[32]; /* optional: the internal path that served the call */
} attest_paged_step;

/* 2.8: a packed variable-length batch (ATTEST_CAP_PACKED, docs/design.md#packed-batches). Sequence b has
 * queries cu_seqlens_q[b] .. cu_seqlens_q[b + 1] and keys cu_seqlens_k[b] .. cu_seqlens_k[b + 1], either
 * possibly empty; query i of a sequence sits at position q_offset + i (the same q_offset for every
 * sequence), key j at j. The mask terms and score modifiers apply within each sequence; no key of
 * one sequence is seen by another. There is no padding mask, segment, explicit mask or bias, and
 * every buffer is float32. Each cu_seqlens array ends flush against a guard page: reading
 * cu_seqlens[batch + 1] faults. 2.10: a kernel declaring ATTEST_CAP_PACKED_INT64 gets the offsets in
 * cu_seqlens_q64/k64 (the int32 pointers NULL), likewise guarded; any other gets them in the int32
 * pointers (the int64 ones NULL). */
typedef struct attest_packed_problem {
  int32_t batch; /* sequences */
  int32_t heads, kv_heads, head_dim, value_dim;
  int32_t max_seqlen_q, max_seqlen_k; /* the longest sequence of each */
  double scale;
  int64_t q_offset;
  int32_t causal, window, chunk, lookahead; /* as in attest_problem_v2 (0 = off) */
  int32_t rope;
  double rope_base;
  double softcap;                /* 0: none */
  const float* alibi_slopes;     /* NULL or [H] */
  const float* sinks;            /* NULL or [H] */
  const int32_t* cu_seqlens_q;   /* [batch + 1], from 0, non-decreasing */
  const int32_t* cu_seqlens_k;   /* [batch + 1] */
  const float* q;                /* [total_q][H][Dk] */
  const float* k;                /* [total_k][Hkv][Dk] */
  const float* v;                /* [total_k][Hkv][Dv] */
  const int64_t* cu_seqlens_q64; /* 2.10, ATTEST_CAP_PACKED_INT64 only: [batch + 1]; NULL otherwise */
  const int64_t* cu_seqlens_k64; /* 2.10, ATTEST_CAP_PACKED_INT64 only: [batch + 1] */
  const void* reserved[2];       /* NULL */
} attest_packed_problem;

typedef struct attest_packed_outputs {
  float* o;      /* [total_q][H][Dv], to be fully written */
  float* lse;    /* [H][total_q] natural log (FlashAttention's order), or NULL when not wanted */
  char path[32]; /* optional: the internal path that served the call */
} attest_packed_outputs;

typedef struct attest_kernel_v2 {
  uint32_t abi_version; /* ATTEST_ABI_VERSION_2 */
  uint32_t struct_size; /* sizeof(attest_kernel_v2): room to grow */
  const char* name;
  uint32_t capabilities; /* ATTEST_CAP_* bits */
  int32_t empty_rows;    /* attest_empty_rows */
  attest_precision_spec precision;
  attest_contract contract;
  void* user;

  attest_status (*forward)(void* user, const attest_problem_v2* problem, attest_outputs_v2* out);
  /* Decode (only with ATTEST_CAP_DECODE). step appends n >= 1 tokens, buffers in the storage
   * types: q [B][H][n][Dk], k [B][Hkv][n][Dk], v [B][Hkv][n][Dv] -> o [B][H][n][Dv], lse [B][H][n]
   * (lse may be NULL when the contract says decode_lse_optional). */
  attest_status (*decode_open)(void* user, const attest_decode_config_v2* config, void** session);
  attest_status (*decode_step)(void* user, void* session, int32_t n, const void* q, const void* k, const void* v,
                               void* o, float* lse, char path[32]);
  void (*decode_close)(void* user, void* session);
  const char* (*last_error)(void* user);
  /* 2.3 (a reserved NULL pointer before): with ATTEST_CAP_BACKWARD, the backward; NULL otherwise. */
  attest_status (*backward)(void* user, const attest_problem_v2* problem, const attest_backward_inputs* in,
                            attest_gradients* out);
  /* 2.6 (a reserved NULL pointer before): with ATTEST_CAP_MERGE, the merge; NULL otherwise. */
  attest_status (*merge)(void* user, const attest_merge_inputs* in, attest_merge_outputs* out);
  void* reserved[6]; /* NULL */
  /* 2.1: read only when struct_size reaches them (a 2.0 descriptor ends before). */
  const struct attest_path_precision* paths; /* NULL, or path_count internal paths that round elsewhere */
  int32_t path_count;
  /* 2.2: read only when struct_size reaches them (a 2.1 descriptor ends before). */
  const struct attest_path_predicate* path_predicates; /* NULL, or path_predicate_count declared paths */
  int32_t path_predicate_count;
  /* 2.4: read only when struct_size reaches them (a 2.2 or 2.3 descriptor ends before). With
   * ATTEST_CAP_DECODE, the positions its sessions keep: a window or sinks + recent rule
   * (cache_recent >= 1; cache_sinks >= 1 with sinks + recent, 0 otherwise), or ATTEST_CACHE_EXPLICIT
   * with decode_retained, which writes the ascending positions query t of the session's last step
   * attended in sequence b (every query head of the sequence the same) to positions[0 .. *count),
   * at most `capacity` of them (ATTEST_INVALID_ARGUMENT when they do not fit). */
  attest_status (*decode_retained)(void* user, void* session, int32_t b, int32_t t, int64_t* positions,
                                   int32_t capacity, int32_t* count);
  int32_t cache_policy; /* attest_cache_policy */
  int32_t cache_sinks, cache_recent;
  /* With ATTEST_CAP_DECODE, block tables: tokens per page (0: none), the bytes of one page for a
   * configuration, and one call over attest's pages (attest_paged_step). */
  int32_t page_tokens;
  attest_status (*page_bytes)(void* user, const attest_decode_config_v2* config, int64_t* bytes);
  attest_status (*decode_paged)(void* user, const attest_decode_config_v2* config, attest_paged_step* step);
  /* 2.7: read only when struct_size reaches them (a 2.4 to 2.6 descriptor ends before); zero means what
   * it meant before. The contract's value width Dv apart from Dk: value_dim ({0, 0}: contract.head_dim's
   * range) and, if value_dims is not NULL, the only widths Dv takes (a quantized V needs whole blocks:
   * q4_0 multiples of 32); neither with contract.dk_equals_dv. alibi_excludes_bias = 1: ALiBi and
   * a bias never come in one problem (ggml's single mask input takes one or the other); attest still
   * draws each alone. */
  attest_range value_dim;
  const int32_t* value_dims;
  int32_t value_dim_count;
  int32_t alibi_excludes_bias;
  /* 2.8: read only when struct_size reaches it (a 2.7 descriptor ends before). With ATTEST_CAP_PACKED,
   * the forward of a packed variable-length batch; NULL otherwise. */
  attest_status (*forward_packed)(void* user, const attest_packed_problem* problem, attest_packed_outputs* out);
} attest_kernel_v2;

/* 2.1: an internal path (the name the kernel writes to outputs.path) and where it rounds. Its
 * storage fields (q, k, v, o, bias) must equal the kernel's: a path changes arithmetic, never
 * what crosses the boundary. attest judges each call at the precision of the path that served it. */
typedef struct attest_path_precision {
  const char* path;
  attest_precision_spec precision;
} attest_path_precision;

/* 2.2: an internal path and the problems it takes. A problem is served by the first declared path
 * whose predicate it meets (every range holds, the widths are multiples, Tk's remainder is as
 * stated, the required features are used, the excluded ones and, with no_mask, every mask term
 * are not); one that meets none by a path the kernel does not declare. Declare them in order, the
 * narrowest first, e.g. {"split_kv", batch {1, 1}, q_len {1, 4}, k_len {512, 1 << 30}}. */
typedef struct attest_path_predicate {
  const char* path; /* as the kernel writes it to outputs.path: 1 to 31 characters */
  attest_range batch, heads, q_len, k_len, head_dim, value_dim; /* {0, 0}: any */
  int32_t head_dim_multiple, value_dim_multiple;                /* 0: any width; else Dk (Dv) % it == 0 */
  int32_t k_len_multiple;     /* 0: any Tk; else Tk % it == 0, or != 0 with k_len_not_multiple */
  int32_t k_len_not_multiple; /* 0 or 1 */
  uint32_t required;          /* ATTEST_CAP_* bits of problem features every problem of the path uses */
  uint32_t excluded;          /* ... that none uses */
  int32_t no_mask;            /* 1: only problems with no mask term at all */
  /* 2.7 (reserved and zero before): keys per online-softmax tile on this path, e.g. 1 for a path
   * that rescales per key and 64 for one that tiles by 64; 0: contract.key_tile. attest draws the
   * path's lengths around it and bounds the path's calls with its rescales. */
  int32_t key_tile;
  int32_t reserved[2]; /* zero */
} attest_path_predicate;

/* The size of a 2.0 descriptor: struct_size at least this; the 2.1 fields need ATTEST_KERNEL_V2_1_SIZE,
 * the 2.2 ones ATTEST_KERNEL_V2_2_SIZE (2.3 added no field), the 2.4 ones ATTEST_KERNEL_V2_4_SIZE (2.5 and
 * 2.6 added none: 2.6's merge took a reserved pointer), the 2.7 ones ATTEST_KERNEL_V2_7_SIZE, the 2.8 one
 * ATTEST_KERNEL_V2_8_SIZE. */
#define ATTEST_KERNEL_V2_0_SIZE 368u
#define ATTEST_KERNEL_V2_1_SIZE 384u
#define ATTEST_KERNEL_V2_2_SIZE 400u
#define ATTEST_KERNEL_V2_4_SIZE 440u
#define ATTEST_KERNEL_V2_7_SIZE 472u
#define ATTEST_KERNEL_V2_8_SIZE 480u

/* Returns a pointer to an attest_kernel (version 1) or attest_kernel_v2 (version 2). */
typedef const void* (*attest_kernel_entry_any_fn)(void);
typedef const attest_kernel* (*attest_kernel_entry_fn)(void);

#ifdef __cplusplus
}
#endif

#endif /* ATTEST_ABI_H */
