/* ggml_flash_attn_ext called the way llama.cpp calls it: Q f32, K and V in the cache type, a
 * contiguous f16 mask of 0 (visible) or -inf (or no mask: options.mask_always), holding the signed distance j - pos
 * instead of 0 when ALiBi is on (ggml multiplies the mask by each head's slope). */
#include "ggml_flash_attn_call.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int64_t floor_div(int64_t a, int64_t b) { return a / b - (a % b != 0 && (a < 0) != (b < 0)); }

/* Every mask term attest may send: query i of batch entry b sees key j when all allow it. */
static int visible(const attest_problem_v2* p, int b, int i, int j) {
  const int64_t pos = p->q_offset + i;
  if (p->q_valid && i >= p->q_valid[b]) return 0;
  if (p->kv_valid && j >= p->kv_valid[b]) return 0;
  if (p->causal && j > pos) return 0;
  if (p->window && pos - j >= p->window) return 0;
  if (p->chunk && floor_div(pos, p->chunk) != j / p->chunk) return 0;
  if (p->lookahead && j - pos >= p->lookahead) return 0;
  if (p->q_segment && p->q_segment[(size_t)b * p->q_len + i] != p->k_segment[(size_t)b * p->k_len + j]) return 0;
  if (p->explicit_mask && !p->explicit_mask[((size_t)b * p->q_len + i) * p->k_len + j]) return 0;
  return 1;
}

static int has_mask_term(const attest_problem_v2* p) {
  return p->q_valid || p->kv_valid || p->causal || p->window || p->chunk || p->lookahead || p->q_segment ||
         p->explicit_mask;
}

/* [B][Tq][Tk] f16: -inf where hidden, else 0, or the distance j - pos that ggml scales by the slope. */
static ggml_fp16_t* build_mask(const attest_problem_v2* p) {
  ggml_fp16_t* mask = malloc(sizeof(ggml_fp16_t) * p->batch * p->q_len * p->k_len);
  if (!mask) return NULL;
  const ggml_fp16_t hidden = ggml_fp32_to_fp16(-INFINITY);
  ggml_fp16_t* m = mask;
  for (int b = 0; b < p->batch; ++b)
    for (int i = 0; i < p->q_len; ++i)
      for (int j = 0; j < p->k_len; ++j)
        *m++ = !visible(p, b, i, j) ? hidden
               : p->alibi_slopes    ? ggml_fp32_to_fp16((float)(j - (p->q_offset + i)))
                                    : ggml_fp32_to_fp16(0.0f);
  return mask;
}

const char* ggml_flash_attn_path(const ggml_flash_attn_options* options, const attest_problem_v2* p, int f32_per_simd) {
  const int float_kv = options->k_type == GGML_TYPE_F32 || options->k_type == GGML_TYPE_F16;
  if (options->k_type != options->v_type || !float_kv) return "one_chunk";
  if (p->q_len == 1 && p->batch == 1 && p->k_len >= 512) return "split_kv";
  if (p->q_len >= 64 && p->value_dim % f32_per_simd == 0) return "tiled";
  return "one_chunk";
}

static struct ggml_tensor* tensor_on(struct ggml_context* ctx, enum ggml_type type, int64_t ne0, int64_t ne1,
                                     int64_t ne2, int64_t ne3, const void* data) {
  struct ggml_tensor* t = ggml_new_tensor_4d(ctx, type, ne0, ne1, ne2, ne3);
  t->data = (void*)data; /* ggml reads inputs in place; nothing writes them */
  return t;
}

attest_status ggml_flash_attn_forward(const ggml_cpu_variant* cpu, const ggml_flash_attn_options* options,
                                      const attest_problem_v2* p, float* o, char path[32], char* error,
                                      size_t error_size) {
  const int use_mask = options->mask_always || has_mask_term(p) || p->alibi_slopes;
  const size_t out_count = (size_t)p->batch * p->q_len * p->heads * p->value_dim;
  ggml_fp16_t* mask = use_mask ? build_mask(p) : NULL;
  float* permuted = malloc(sizeof(float) * out_count);
  struct ggml_init_params init = {ggml_tensor_overhead() * 8 + ggml_graph_overhead_custom(8, 0), NULL, 1};
  struct ggml_context* ctx = ggml_init(init);
  void* work = NULL;
  attest_status status = ATTEST_INTERNAL_ERROR;
  if ((use_mask && !mask) || !permuted || !ctx) {
    snprintf(error, error_size, "out of memory");
    goto done;
  }
  /* attest's row-major [B][H][T][D] is ggml's ne = {D, T, H, B}, contiguous. */
  struct ggml_tensor* q = tensor_on(ctx, GGML_TYPE_F32, p->head_dim, p->q_len, p->heads, p->batch, p->q);
  struct ggml_tensor* k = tensor_on(ctx, options->k_type, p->head_dim, p->k_len, p->kv_heads, p->batch, p->k);
  struct ggml_tensor* v = tensor_on(ctx, options->v_type, p->value_dim, p->k_len, p->kv_heads, p->batch, p->v);
  struct ggml_tensor* m = use_mask ? tensor_on(ctx, GGML_TYPE_F16, p->k_len, p->q_len, 1, p->batch, mask) : NULL;
  const float max_bias = p->alibi_slopes ? options->alibi_max_bias : 0.0f;
  struct ggml_tensor* out = ggml_flash_attn_ext(ctx, q, k, v, m, (float)p->scale, max_bias, (float)p->softcap);
  if (p->sinks) ggml_flash_attn_ext_add_sinks(out, tensor_on(ctx, GGML_TYPE_F32, p->heads, 1, 1, 1, p->sinks));
  out->data = permuted;
  struct ggml_cgraph* graph = ggml_new_graph_custom(ctx, 8, 0);
  ggml_build_forward_expand(graph, out);
  struct ggml_cplan plan = cpu->graph_plan(graph, options->threads, NULL);
  if (plan.work_size && !(work = plan.work_data = malloc(plan.work_size))) {
    snprintf(error, error_size, "out of memory");
    goto done;
  }
  if (cpu->graph_compute(graph, &plan) != GGML_STATUS_SUCCESS) {
    snprintf(error, error_size, "ggml_graph_compute failed");
    goto done;
  }
  /* ggml's result is [B][Tq][H][Dv]; attest's O is [B][H][Tq][Dv]. */
  const size_t row = sizeof(float) * p->value_dim;
  for (int b = 0; b < p->batch; ++b)
    for (int h = 0; h < p->heads; ++h)
      for (int i = 0; i < p->q_len; ++i)
        memcpy(o + (((size_t)b * p->heads + h) * p->q_len + i) * p->value_dim,
               permuted + (((size_t)b * p->q_len + i) * p->heads + h) * p->value_dim, row);
  snprintf(path, 32, "%s", ggml_flash_attn_path(options, p, cpu->f32_per_simd));
  status = ATTEST_OK;
done:
  free(work);
  if (ctx) ggml_free(ctx);
  free(permuted);
  free(mask);
  return status;
}
