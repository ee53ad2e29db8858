/* What every reproduction does after building its tensors: ggml's CPU build for this machine
 * (ggml_cpu_variant), then one graph computing `out` on `threads` threads. */
#ifndef GGML_REPRO_RUN_GRAPH_H
#define GGML_REPRO_RUN_GRAPH_H
#include "ggml.h"

/* 0 on success; prints the reason and returns 2 when ggml cannot load or compute. */
int run_graph(struct ggml_context* ctx, struct ggml_tensor* out, int threads);

#endif
