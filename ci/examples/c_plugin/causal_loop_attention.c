/* The attention loop of a small C inference program (llama2.c style), certified as it is.
 *
 * Per query head: scores q.k_t for every key t <= pos, scaled by 1/sqrt(head_size), a stable
 * softmax, then the weighted sum of the values; kv_mul query heads share one key/value head
 * (GQA). The loop only knows causal attention with Dk == Dv and the default scale, so it says
 * exactly that in its contract (below) instead of being generalized in an adapter: attest then
 * sends only such problems, and reports the properties that need others (permutation
 * equivariance needs non-causal problems) as not covered, with the reason.
 *
 * attest's layouts: q [B][H][Tq][D], k and v [B][Hkv][Tk][D], o [B][H][Tq][D]; query i sits at
 * pos = q_offset + i, which for bottom-right causal attention is Tk - Tq + i. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attest/attest_abi.h"

static char last_error[256];

/* The stable softmax of llama2.c, in place over x[0..size). */
static void softmax(float* x, int size) {
  float max_val = x[0];
  for (int i = 1; i < size; i++)
    if (x[i] > max_val) max_val = x[i];
  float sum = 0.0f;
  for (int i = 0; i < size; i++) {
    x[i] = expf(x[i] - max_val);
    sum += x[i];
  }
  for (int i = 0; i < size; i++) x[i] /= sum;
}

/* Why p lies outside the contract and the declared features, or NULL. attest never sends such
 * a problem; the check is here because a kernel must not compute something it was not built for. */
static const char* outside_contract(const attest_problem_v2* p) {
  if (p->value_dim != p->head_dim) return "needs Dv == Dk";
  if (p->scale != 1.0 / sqrt((double)p->head_dim)) return "needs the default scale 1/sqrt(Dk)";
  if (!p->causal || p->q_offset != (int64_t)p->k_len - p->q_len) return "needs bottom-right causal attention";
  if (p->window || p->chunk || p->kv_valid || p->q_valid || p->q_segment || p->explicit_mask || p->rope)
    return "supports no mask term but causal, and no RoPE";
  if (p->softcap != 0 || p->alibi_slopes || p->bias || p->sinks) return "supports no score modifier";
  return NULL;
}

static attest_status forward(void* user, const attest_problem_v2* p, attest_outputs_v2* out) {
  (void)user;
  const char* why = outside_contract(p);
  if (why) {
    strcpy(last_error, why);
    return ATTEST_UNSUPPORTED;
  }
  const int head_size = p->head_dim, n_heads = p->heads, n_kv_heads = p->kv_heads;
  const int kv_mul = n_heads / n_kv_heads; /* query heads per key/value head */
  const int tq = p->q_len, tk = p->k_len;
  const float* q_all = p->q;
  const float* key_cache = p->k;
  const float* value_cache = p->v;
  float* o_all = out->o;
  float* att = malloc(sizeof(float) * tk);
  if (!att) {
    strcpy(last_error, "out of memory");
    return ATTEST_INTERNAL_ERROR;
  }
  for (int b = 0; b < p->batch; b++)
    for (int h = 0; h < n_heads; h++) {
      const size_t kv = (size_t)b * n_kv_heads + h / kv_mul; /* this head's key/value head */
      for (int i = 0; i < tq; i++) {
        const int pos = tk - tq + i;
        const float* q = q_all + (((size_t)b * n_heads + h) * tq + i) * head_size;
        float* xb = o_all + (((size_t)b * n_heads + h) * tq + i) * head_size;
        memset(xb, 0, head_size * sizeof(float));
        /* With Tq > Tk the first queries come before every key: nothing to attend, the row
         * stays zero (the declared empty-row policy). llama2.c never meets it: pos >= 0. */
        if (pos < 0) continue;
        for (int t = 0; t <= pos; t++) {
          const float* k = key_cache + (kv * tk + t) * head_size;
          float score = 0.0f;
          for (int c = 0; c < head_size; c++) score += q[c] * k[c];
          score /= sqrtf(head_size);
          att[t] = score;
        }
        softmax(att, pos + 1);
        for (int t = 0; t <= pos; t++) {
          const float* v = value_cache + (kv * tk + t) * head_size;
          const float a = att[t];
          for (int c = 0; c < head_size; c++) xb[c] += a * v[c];
        }
      }
    }
  free(att);
  strcpy(out->path, "causal-loop");
  return ATTEST_OK;
}

static const char* error(void* user) {
  (void)user;
  return last_error;
}

static const attest_kernel_v2 kernel = {
    .abi_version = ATTEST_ABI_VERSION_2,
    .struct_size = sizeof(attest_kernel_v2),
    .name = "causal-loop",
    .capabilities = ATTEST_CAP_CAUSAL | ATTEST_CAP_GQA, /* no LSE: the loop never forms it */
    .empty_rows = ATTEST_EMPTY_ZERO,
    .precision = {.q = ATTEST_F32,
                  .k = ATTEST_F32,
                  .v = ATTEST_F32,
                  .o = ATTEST_F32,
                  .scores = ATTEST_F32,
                  .p = ATTEST_F32,
                  .accumulator = ATTEST_F32,
                  .exp_ulps = 1.0},
    /* What the loop was written for; any width and length. */
    .contract = {.dk_equals_dv = 1, .default_scale_only = 1, .causal_required = 1},
    .forward = forward,
    .last_error = error,
};

const attest_kernel_v2* attest_kernel_entry(void) { return &kernel; }
