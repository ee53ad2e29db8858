/* ggml's CPU backend as node-llama-cpp ships it: one libggml-cpu-<isa>.so per x86 ISA level. This
 * picks the one ggml itself would (the highest ggml_backend_score() this CPU supports) and resolves
 * the functions a plugin needs from it. */
#ifndef GGML_CPU_VARIANT_H
#define GGML_CPU_VARIANT_H
#include <stddef.h>

#include "ggml-cpu.h"

typedef struct ggml_cpu_variant {
  char name[64];    /* the file name, e.g. libggml-cpu-sapphirerapids.so */
  int f32_per_simd; /* GGML_F32_EPR of that build: 16 (AVX-512), 8 (AVX), 4 (SSE) */
  struct ggml_cplan (*graph_plan)(const struct ggml_cgraph* graph, int n_threads, struct ggml_threadpool* pool);
  enum ggml_status (*graph_compute)(struct ggml_cgraph* graph, struct ggml_cplan* plan);
} ggml_cpu_variant;

/* Loads the best variant from `directory` once; NULL (with the reason in `error`) when none loads. */
const ggml_cpu_variant* ggml_cpu_variant_load(const char* directory, char* error, size_t error_size);

#endif
