/* ggml 0.25.1's CPU flash attention (ggml_flash_attn_ext, as node-llama-cpp 3.22.1 ships it) behind
 * the attest C ABI. One source, built once per K/V type and thread count:
 *   GGML_KV_F16   K and V stored f16 (else f32);   GGML_THREADS  ggml's worker threads (1 or 4);
 *   GGML_V_Q8     K f16 and V q8_0 (ggml's block_q8_0 is attest's ATTEST_Q8 byte for byte);
 *   GGML_V_Q4_0   K f16 and V q4_0 (ggml's block_q4_0 is attest's ATTEST_Q4_0 byte for byte);
 *   GGML_KV_Q8, GGML_KV_Q4_0  K and V both q8_0 or both q4_0: ggml quantizes Q to q8_0 (K's vec_dot
 *                 type), declared as q_entry ATTEST_Q8 (2.6);
 *   GGML_Q_ENTRY_F32_DECLARED  the q8_0 K/V kernel declaring Q used as stored: wrong on purpose;
 *   GGML_Q4_DECLARED  the q4_0 V kernel declaring attest's other nibble order, ATTEST_Q4: wrong on
 *                     purpose, so that a CERTIFIED q4_0 plugin shows the layout is the one ggml reads;
 *   GGML_NULL_MASK  no mask tensor when nothing is masked (else an all-zero one, as llama.cpp passes);
 *   GGML_F32_DECLARED  an f16 kernel declaring f32 arithmetic throughout: wrong on purpose, so
 *                      that a CERTIFIED here shows the honest declaration is the one that holds.
 * GGML_CPU_DIR names the folder of libggml-cpu-*.so; the best one for this CPU is loaded at entry.
 *
 * Where ggml rounds, read from ggml-cpu/ops.cpp (ggml_compute_forward_flash_attn_ext_f16 and the
 * three loops it picks between):
 *   one_chunk  (the scalar online loop): Q is converted to K's vec_dot type, so rounded to f16 for
 *              an f16 cache; q.k summed in f32; exp by expf; P.V summed unnormalised with weights
 *              exp(s - m), in f16 for an f16 V (ggml_vec_mad_f16 rounds after each key), in f32
 *              otherwise; the softmax sum in f32; one division at the end.
 *   tiled      (>= 64 queries, Dv a multiple of the SIMD width): K and V widened to f32, Q used as
 *              stored, a f32 GEMM for scores and for P.V, exp by ggml_v_expf (1.46 + 0.5 ulps).
 *   split_kv   (one query of one sequence, >= 512 keys): one_chunk over a slice of keys per thread,
 *              the partial (m, sum, P.V) merged in f32.
 * ggml has no LSE output. Masked keys are skipped by one_chunk but scored by tiled (their scores
 * then get -inf from the mask): the inputs are declared MASKED_SCORED. */
#include <stddef.h>
#include <stdint.h>

#include "attest/attest_abi.h"
#include "ggml_cpu_variant.h"
#include "ggml_flash_attn_call.h"

#ifndef GGML_THREADS
#define GGML_THREADS 1
#endif
#define STR2(x) #x
#define STR(x) STR2(x)
#ifdef GGML_NULL_MASK /* an encoder's call: no mask term, no ALiBi (ggml needs a mask for it) */
#define MASK_ALWAYS 0
#define NAME_SUFFIX "-null-mask"
#define FEATURES (ATTEST_CAP_GQA | ATTEST_CAP_SOFTCAP | ATTEST_CAP_SINKS)
#elif defined(GGML_F32_DECLARED)
#define MASK_ALWAYS 1
#define NAME_SUFFIX "-declared-f32"
#elif defined(GGML_Q4_DECLARED)
#define MASK_ALWAYS 1
#define NAME_SUFFIX "-declared-q4"
#elif defined(GGML_Q_ENTRY_F32_DECLARED)
#define MASK_ALWAYS 1
#define NAME_SUFFIX "-declared-q-f32"
#else
#define MASK_ALWAYS 1
#define NAME_SUFFIX ""
#endif
#ifdef GGML_Q_ENTRY_F32_DECLARED
#define QUANTIZED_Q_ENTRY ATTEST_F32
#else
#define QUANTIZED_Q_ENTRY ATTEST_Q8
#endif
/* llama.cpp's -ctk q8_0 -ctv q8_0 (or q4_0): only the scalar loop takes quantized K. */
#if defined(GGML_KV_Q8) || defined(GGML_KV_Q4_0)
#ifdef GGML_KV_Q8
#define K_TYPE GGML_TYPE_Q8_0
#define K_STORAGE ATTEST_Q8
#define KV_NAME "q8_0"
#else
#define K_TYPE GGML_TYPE_Q4_0
#define K_STORAGE ATTEST_Q4_0
#define KV_NAME "q4_0"
#endif
#define V_TYPE K_TYPE
#define V_STORAGE K_STORAGE
#define MAX_ABS_VALUE 0.0
#define LOOP_Q_ENTRY QUANTIZED_Q_ENTRY /* Q to q8_0 blocks; q.k then exact per block, blocks summed in f32 */
#define LOOP_ACCUMULATOR ATTEST_F32
#define LOOP_WEIGHT_SUM 0
#define FIRST_PATH 2
#define QUANTIZED_ROWS 1
/* llama.cpp's -ctk f16 -ctv q8_0 or q4_0: only the scalar loop takes mixed types. */
#elif defined(GGML_V_Q8) || defined(GGML_V_Q4_0)
#define K_TYPE GGML_TYPE_F16
#define K_STORAGE ATTEST_F16
#ifdef GGML_V_Q8
#define V_TYPE GGML_TYPE_Q8_0
#define V_STORAGE ATTEST_Q8
#define KV_NAME "f16-q8_0"
#else
#define V_TYPE GGML_TYPE_Q4_0
#define V_STORAGE (GGML_Q4_DECLARED_ORDER ? ATTEST_Q4 : ATTEST_Q4_0)
#define KV_NAME "f16-q4_0"
#endif
#define MAX_ABS_VALUE 0.0
#define LOOP_Q_ENTRY ATTEST_F16
#define LOOP_ACCUMULATOR ATTEST_F32 /* a q8_0 or q4_0 V is widened to f32 (exactly) and summed in f32 */
#define LOOP_WEIGHT_SUM 0
#define FIRST_PATH 2 /* one_chunk only */
#define QUANTIZED_ROWS 1
#elif defined(GGML_KV_F16)
#define K_TYPE GGML_TYPE_F16
#define V_TYPE GGML_TYPE_F16
#define K_STORAGE ATTEST_F16
#define V_STORAGE ATTEST_F16
#define KV_NAME "f16"
/* The scalar loop's P.V sum is f16 and unnormalised: keys x |V| must stay below 65504. */
#define MAX_ABS_VALUE 8.0
#ifndef GGML_F32_DECLARED
#define LOOP_Q_ENTRY ATTEST_F16
#define LOOP_ACCUMULATOR ATTEST_F16
#define LOOP_WEIGHT_SUM ATTEST_IN(ATTEST_F32)
#endif
#else
#define K_TYPE GGML_TYPE_F32
#define V_TYPE GGML_TYPE_F32
#define K_STORAGE ATTEST_F32
#define V_STORAGE ATTEST_F32
#define KV_NAME "f32"
#define MAX_ABS_VALUE 0.0
#endif
#ifdef GGML_Q4_DECLARED
#define GGML_Q4_DECLARED_ORDER 1
#else
#define GGML_Q4_DECLARED_ORDER 0
#endif
#ifdef QUANTIZED_ROWS
/* ggml's q8_0 and q4_0 rows are whole blocks of 32: a quantized V's Dv, and a quantized K's Dk, a
 * multiple of 32 (each apart from the other: ggml takes DK and DV from K's and V's rows). */
static const int32_t q8_widths[] = {32, 64, 96, 128, 160, 192, 224, 256};
#define VALUE_DIMS q8_widths
#define VALUE_DIM_COUNT 8
#else
#define VALUE_DIMS NULL
#define VALUE_DIM_COUNT 0
#endif
#if defined(QUANTIZED_ROWS) && (defined(GGML_KV_Q8) || defined(GGML_KV_Q4_0))
#define HEAD_DIMS q8_widths
#define HEAD_DIM_COUNT 8
#else /* an f16 or f32 K row takes any Dk */
#define HEAD_DIMS NULL
#define HEAD_DIM_COUNT 0
#endif
#ifndef LOOP_Q_ENTRY /* f32 K/V, or GGML_F32_DECLARED's claim for f16 */
#define LOOP_Q_ENTRY ATTEST_F32
#define LOOP_ACCUMULATOR ATTEST_F32
#define LOOP_WEIGHT_SUM 0
#endif
#ifndef FEATURES
#define FEATURES                                                                                                     \
  (ATTEST_CAP_CAUSAL | ATTEST_CAP_WINDOW | ATTEST_CAP_KEY_PADDING | ATTEST_CAP_QUERY_PADDING | ATTEST_CAP_SEGMENTS | \
   ATTEST_CAP_EXPLICIT_MASK | ATTEST_CAP_GQA | ATTEST_CAP_CHUNK | ATTEST_CAP_LOOKAHEAD | ATTEST_CAP_SOFTCAP |        \
   ATTEST_CAP_ALIBI | ATTEST_CAP_SINKS)
#endif
#ifndef FIRST_PATH
#define FIRST_PATH 0 /* all three */
#endif
#define ALIBI_MAX_BIAS 8.0f /* llama.cpp's f_max_alibi_bias for the ALiBi models it runs */

static char last_error[256];
static const ggml_cpu_variant* cpu;

#define PRECISION(q_entry_, accumulator_, weight_sum_, exp_ulps_)                                            \
  {                                                                                                          \
    .q = ATTEST_F32, .k = K_STORAGE, .v = V_STORAGE, .o = ATTEST_F32, .scores = ATTEST_F32, .p = ATTEST_F32, \
    .accumulator = accumulator_, .exp_ulps = exp_ulps_, .weight_sum = weight_sum_, .pv_unnormalised = 1,     \
    .q_entry = q_entry_                                                                                      \
  }

static const attest_path_precision path_precisions[] = {
    {"split_kv", PRECISION(LOOP_Q_ENTRY, LOOP_ACCUMULATOR, LOOP_WEIGHT_SUM, 1.0)},
    {"tiled", PRECISION(ATTEST_F32, ATTEST_F32, 0, 2.0)},
    {"one_chunk", PRECISION(LOOP_Q_ENTRY, LOOP_ACCUMULATOR, LOOP_WEIGHT_SUM, 1.0)},
};

/* ggml's own dispatch, narrowest first; tiled's Dv multiple is set at entry from the loaded build. */
static attest_path_predicate path_predicates[] = {
    {.path = "split_kv", .batch = {1, 1}, .q_len = {1, 1}, .k_len = {512, 1 << 30}},
    {.path = "tiled", .q_len = {64, 1 << 30}, .value_dim_multiple = 16},
    {.path = "one_chunk"},
};

static attest_status forward(void* user, const attest_problem_v2* p, attest_outputs_v2* out) {
  (void)user;
  if (!cpu) return ATTEST_INTERNAL_ERROR; /* last_error says why the CPU library did not load */
  const ggml_flash_attn_options options = {K_TYPE, V_TYPE, GGML_THREADS, ALIBI_MAX_BIAS, MASK_ALWAYS};
  return ggml_flash_attn_forward(cpu, &options, p, out->o, out->path, last_error, sizeof last_error);
}

static const char* error(void* user) {
  (void)user;
  return last_error;
}

static attest_kernel_v2 kernel = {
    .abi_version = ATTEST_ABI_VERSION_2,
    .struct_size = sizeof(attest_kernel_v2),
    .name = "ggml-flash-attn-" KV_NAME "-t" STR(GGML_THREADS) NAME_SUFFIX,
    .capabilities = FEATURES,
    .empty_rows = ATTEST_EMPTY_ZERO, /* a row with no visible key sums to 0 and ggml writes 0 */
    .precision = PRECISION(LOOP_Q_ENTRY, LOOP_ACCUMULATOR, LOOP_WEIGHT_SUM, 1.0),
    .contract = {.head_dims = HEAD_DIMS,
                 .head_dim_count = HEAD_DIM_COUNT,
                 .head_dim = {1, 256},
                 .q_len = {1, 4096},
                 .k_len = {1, 4096},
                 .query_tile = 64,
                 .key_tile = 64,
                 .alibi_slopes = FEATURES & ATTEST_CAP_ALIBI ? ATTEST_ALIBI_STANDARD : ATTEST_ALIBI_ARBITRARY,
                 .alibi_max_bias = FEATURES & ATTEST_CAP_ALIBI ? ALIBI_MAX_BIAS : 0.0,
                 .inputs = ATTEST_INPUTS_MASKED_SCORED,
                 .max_abs_value = MAX_ABS_VALUE},
    .forward = forward,
    .last_error = error,
    .paths = path_precisions + FIRST_PATH,
    .path_count = 3 - FIRST_PATH,
    .path_predicates = path_predicates + FIRST_PATH,
    .path_predicate_count = 3 - FIRST_PATH,
    .value_dims = VALUE_DIMS,
    .value_dim_count = VALUE_DIM_COUNT,
};

const attest_kernel_v2* attest_kernel_entry(void) {
  cpu = ggml_cpu_variant_load(GGML_CPU_DIR, last_error, sizeof last_error);
  if (cpu) path_predicates[1].value_dim_multiple = cpu->f32_per_simd;
  return &kernel;
}
