/* One attest problem through ggml_flash_attn_ext on a CPU graph: attest's mask terms and ALiBi
 * distances become ggml's f16 mask, its sinks ggml's sink tensor, and ggml's permuted output
 * ([B][Tq][H][Dv]) goes back to attest's layout ([B][H][Tq][Dv]). */
#ifndef GGML_FLASH_ATTN_CALL_H
#define GGML_FLASH_ATTN_CALL_H
#include <stddef.h>

#include "attest/attest_abi.h"
#include "ggml.h"
#include "ggml_cpu_variant.h"

typedef struct ggml_flash_attn_options {
  enum ggml_type k_type, v_type; /* F32, F16, Q8_0 or Q4_0 (attest's ATTEST_Q8, ATTEST_Q4_0) */
  int threads;
  float alibi_max_bias; /* passed to ggml when the problem has ALiBi slopes (the standard set) */
  int mask_always;      /* 1: a mask on every call, all zero when nothing is hidden (llama.cpp's call);
                           0: mask NULL when no term hides a key and there is no ALiBi (ggml allows it) */
} ggml_flash_attn_options;

/* The name of the path ggml 0.25.1's ggml_compute_forward_flash_attn_ext_f16 takes for this problem
 * (ggml-cpu/ops.cpp): with K and V both f32 or both f16, "split_kv" for one query of one sequence
 * over >= 512 keys, "tiled" for >= 64 queries when Dv is a multiple of the SIMD width; "one_chunk"
 * otherwise. */
const char* ggml_flash_attn_path(const ggml_flash_attn_options* options, const attest_problem_v2* p, int f32_per_simd);

attest_status ggml_flash_attn_forward(const ggml_cpu_variant* cpu, const ggml_flash_attn_options* options,
                                      const attest_problem_v2* p, float* o, char path[32], char* error,
                                      size_t error_size);

#endif
