/* An attention kernel with an fp16 K/V cache, in plain C99 behind the attest C ABI, version 2:
 * the shape of a CPU inference library's "fp16 K/V" path. K and V are stored as IEEE binary16
 * (half the memory of float32); Q and O stay float32. Each K and V element is widened to float
 * where it is used, and everything after that is float32: scores, softmax, the P.V accumulator.
 *
 *   cc -std=c99 -O2 -fPIC -shared -I impl/abi/include fp16_kv_attention.c -lm -o libfp16_kv_attention.so
 *   attest certify --kernel ./libfp16_kv_attention.so
 *
 * The precision declaration (`kernel.precision` below) tells attest where this kernel rounds:
 * attest sends K and V as 16-bit patterns, draws them up to fp16's range, computes the exact
 * result on those stored values, and runs its precision gate (a model kernel rounding exactly
 * where we declare) against us. The build compiles two more copies for ci/tests/cli_test.py:
 *   BROKEN_F16_ACCUMULATOR  accumulates P.V in fp16 but still declares an f32 accumulator: the
 *                           precision gate must fail it (a silent precision downgrade);
 *   HONEST_F16_ACCUMULATOR  the same fp16 accumulation, declared as ATTEST_F16;
 *   UNNORMALISED_F16_PV     a CPU library's online loop: the softmax sum in f32, P.V summed in fp16
 *                           with weights exp(s - m) (not yet divided), one division at the end;
 *                           declared with ABI 2.1's weight_sum and pv_unnormalised, and the value
 *                           range it is built for: |V| <= 8 (4096 keys x 8 < 65504, fp16's largest);
 *   UNNORMALISED_UNDECLARED that loop declaring only an fp16 accumulator, as ABI 2.0 allowed: attest
 *                           draws V over fp16's range and the fp16 sum overflows (NOT CERTIFIED);
 *   BROKEN_RESCALE          that loop forgetting to rescale the P.V sum when the maximum grows. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "attest/attest_abi.h"

#define MAX_HEAD_DIM 256

static char last_error[256];

static float float_of_bits(uint32_t bits) {
  float x;
  memcpy(&x, &bits, sizeof x);
  return x;
}

/* IEEE binary16 -> float32, exact for every pattern (the float format holds all of them). */
static float half_to_float(uint16_t h) {
  const uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t exponent = (h >> 10) & 0x1Fu, mantissa = h & 0x3FFu;
  if (exponent == 0x1F) return float_of_bits(sign | 0x7F800000u | (mantissa << 13)); /* inf, NaN */
  if (exponent == 0) {
    if (mantissa == 0) return float_of_bits(sign); /* +-0 */
    /* Subnormal: mantissa * 2^-24. Shift its leading 1 into the implicit bit, one binade each. */
    exponent = 127 - 14;
    while (!(mantissa & 0x400u)) mantissa <<= 1, --exponent;
    return float_of_bits(sign | (exponent << 23) | ((mantissa & 0x3FFu) << 13));
  }
  return float_of_bits(sign | ((exponent - 15 + 127) << 23) | (mantissa << 13)); /* rebias 15 -> 127 */
}

#if (defined(BROKEN_RESCALE) || defined(UNNORMALISED_UNDECLARED)) && !defined(UNNORMALISED_F16_PV)
#define UNNORMALISED_F16_PV
#endif

#if defined(BROKEN_F16_ACCUMULATOR) || defined(HONEST_F16_ACCUMULATOR) || defined(UNNORMALISED_F16_PV)
/* Rounds x to the nearest fp16 value (ties to even), kept in a float: an fp16 accumulator. */
static float round_to_half(float x) {
  const float a = fabsf(x);
  if (!(a < 65520.0f)) return isnan(x) ? x : copysignf(INFINITY, x); /* past fp16's max + half an ulp */
  int e;
  frexpf(a, &e);                                               /* a = f 2^e, f in [0.5, 1): fp16 keeps 11 bits of it */
  const float ulp = ldexpf(1.0f, e - 11 < -24 ? -24 : e - 11); /* subnormals: a fixed 2^-24 */
  return copysignf(nearbyintf(a / ulp) * ulp, x);              /* a / ulp <= 2^11: exact; ties to even */
}
#define ACCUMULATE(x) round_to_half(x)
#else
#define ACCUMULATE(x) (x)
#endif

/* Whether query i of batch entry b sees key j: every enabled mask term must allow it. */
static int visible(const attest_problem_v2* p, int b, int i, int j) {
  const int64_t pos = p->q_offset + i;
  if (p->q_valid && i >= p->q_valid[b]) return 0;
  if (p->causal && j > pos) return 0;
  if (p->window && pos - j >= p->window) return 0;
  if (p->kv_valid && j >= p->kv_valid[b]) return 0;
  return 1;
}

static attest_status forward(void* user, const attest_problem_v2* p, attest_outputs_v2* out) {
  (void)user;
  const int dk = p->head_dim, dv = p->value_dim, tq = p->q_len, tk = p->k_len, group = p->heads / p->kv_heads;
  /* Storage types as declared: Q and O float32, K and V fp16 bit patterns. */
  const float* q_all = p->q;
  const uint16_t* k_all = p->k;
  const uint16_t* v_all = p->v;
  float* o_all = out->o;
  if (dk > MAX_HEAD_DIM || dv > MAX_HEAD_DIM) {
    strcpy(last_error, "head_dim and value_dim must be at most 256");
    return ATTEST_INVALID_ARGUMENT;
  }
  float* weight = malloc(sizeof(float) * tk);
  if (!weight) {
    strcpy(last_error, "out of memory");
    return ATTEST_INTERNAL_ERROR;
  }
  const float scale = (float)p->scale;
  for (int b = 0; b < p->batch; ++b)
    for (int h = 0; h < p->heads; ++h) {
      const int g = h / group; /* GQA: `group` query heads share key/value head g */
      const uint16_t* k_head = k_all + ((size_t)b * p->kv_heads + g) * tk * dk;
      const uint16_t* v_head = v_all + ((size_t)b * p->kv_heads + g) * tk * dv;
      for (int i = 0; i < tq; ++i) {
        const size_t row = ((size_t)b * p->heads + h) * tq + i;
        const float* q = q_all + row * dk;
        float* o = o_all + row * dv;
        /* Scores in float32; a masked key is never read, its K and V may hold inf or NaN. */
        float max = -INFINITY;
        for (int j = 0; j < tk; ++j) {
          weight[j] = -INFINITY;
          if (!visible(p, b, i, j)) continue;
          const uint16_t* k = k_head + (size_t)j * dk;
          float dot = 0.0f;
          for (int c = 0; c < dk; ++c) dot += q[c] * half_to_float(k[c]);
          weight[j] = dot * scale;
          if (weight[j] > max) max = weight[j];
        }
        for (int c = 0; c < dv; ++c) o[c] = 0.0f;
        if (max == -INFINITY) { /* empty row: the zero policy */
          if (out->lse) out->lse[row] = -INFINITY;
          continue;
        }
#ifdef UNNORMALISED_F16_PV
        /* One pass: a running maximum m, the f32 sum of exp(s - m), and the fp16 sum of
         * exp(s - m) v; both sums are rescaled by exp(m_old - m) when m grows. */
        float m = -INFINITY, sum = 0.0f;
        for (int j = 0; j < tk; ++j) {
          if (weight[j] == -INFINITY) continue;
          if (weight[j] > m) {
            const float rescale = m == -INFINITY ? 0.0f : expf(m - weight[j]);
            m = weight[j];
            sum *= rescale;
#ifndef BROKEN_RESCALE
            for (int c = 0; c < dv; ++c) o[c] = ACCUMULATE(o[c] * rescale);
#endif
          }
          const float w = expf(weight[j] - m);
          const uint16_t* v = v_head + (size_t)j * dv;
          sum += w;
          for (int c = 0; c < dv; ++c) o[c] = ACCUMULATE(o[c] + w * half_to_float(v[c]));
        }
        for (int c = 0; c < dv; ++c) o[c] = ACCUMULATE(o[c] / sum);
#else
        float sum = 0.0f; /* stable softmax: exponents relative to the row's maximum */
        for (int j = 0; j < tk; ++j)
          if (weight[j] != -INFINITY) sum += weight[j] = expf(weight[j] - max);
        /* O = P.V with P = weight / sum unrounded (precision.p = F32), V widened per element. */
        for (int j = 0; j < tk; ++j) {
          if (weight[j] == -INFINITY) continue;
          const float w = weight[j] / sum;
          const uint16_t* v = v_head + (size_t)j * dv;
          for (int c = 0; c < dv; ++c) o[c] = ACCUMULATE(o[c] + w * half_to_float(v[c]));
        }
#endif
        if (out->lse) out->lse[row] = max + logf(sum);
      }
    }
  strcpy(out->path, "c-fp16-kv-loop");
  free(weight);
  return ATTEST_OK;
}

static const char* error(void* user) {
  (void)user;
  return last_error;
}

#if defined(HONEST_F16_ACCUMULATOR) || defined(UNNORMALISED_F16_PV)
#define ACCUMULATOR ATTEST_F16
#else
#define ACCUMULATOR ATTEST_F32 /* a lie under BROKEN_F16_ACCUMULATOR */
#endif
#if defined(UNNORMALISED_F16_PV) && !defined(UNNORMALISED_UNDECLARED)
/* ABI 2.1: the softmax sum apart, in f32; P.V before normalising; values within +-8. */
#define WEIGHT_SUM ATTEST_IN(ATTEST_F32)
#define PV_UNNORMALISED 1
#define MAX_ABS_VALUE 8.0
#else
#define WEIGHT_SUM 0
#define PV_UNNORMALISED 0
#define MAX_ABS_VALUE 0.0
#endif

static const attest_kernel_v2 kernel = {
    .abi_version = ATTEST_ABI_VERSION_2,
    .struct_size = sizeof(attest_kernel_v2),
    .name = "example-fp16-kv",
    .capabilities = ATTEST_CAP_CAUSAL | ATTEST_CAP_WINDOW | ATTEST_CAP_KEY_PADDING | ATTEST_CAP_QUERY_PADDING |
                    ATTEST_CAP_GQA | ATTEST_CAP_LSE,
    .empty_rows = ATTEST_EMPTY_ZERO,
    /* Storage: K, V fp16; Q, O float32. Scores, P and the P.V accumulator float32; glibc's expf
     * is within 1 ulp. */
    .precision = {.q = ATTEST_F32,
                  .k = ATTEST_F16,
                  .v = ATTEST_F16,
                  .o = ATTEST_F32,
                  .scores = ATTEST_F32,
                  .p = ATTEST_F32,
                  .accumulator = ACCUMULATOR,
                  .exp_ulps = 1.0,
                  .weight_sum = WEIGHT_SUM,
                  .pv_unnormalised = PV_UNNORMALISED},
    /* Any width up to MAX_HEAD_DIM (Dv may differ from Dk), sequences up to 4096. */
    .contract = {.head_dim = {1, MAX_HEAD_DIM}, .q_len = {1, 4096}, .k_len = {1, 4096}, .max_abs_value = MAX_ABS_VALUE},
    .user = NULL,
    .forward = forward,
    .last_error = error,
};

const attest_kernel_v2* attest_kernel_entry(void) { return &kernel; }
