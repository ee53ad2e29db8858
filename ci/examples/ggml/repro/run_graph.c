#include "run_graph.h"

#include <stdio.h>
#include <stdlib.h>

#include "ggml_cpu_variant.h"

int run_graph(struct ggml_context* ctx, struct ggml_tensor* out, int threads) {
  char error[256];
  const ggml_cpu_variant* cpu = ggml_cpu_variant_load(GGML_CPU_DIR, error, sizeof error);
  if (!cpu) {
    fprintf(stderr, "%s\n", error);
    return 2;
  }
  struct ggml_cgraph* graph = ggml_new_graph(ctx);
  ggml_build_forward_expand(graph, out);
  struct ggml_cplan plan = cpu->graph_plan(graph, threads, NULL);
  plan.work_data = malloc(plan.work_size + 1);
  const int failed = !plan.work_data || cpu->graph_compute(graph, &plan) != GGML_STATUS_SUCCESS;
  free(plan.work_data);
  if (failed) fprintf(stderr, "ggml_graph_compute failed\n");
  return failed ? 2 : 0;
}
