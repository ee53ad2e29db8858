// Derivation. Each computed weight is e_j = exp(s_j - m + eta_j) with an exponent error
//   delta_j = c_s A_j + 2u |s_j - m| + (K + 1) u_e
// c_s = gamma(d + 2) for the dot product, the scale multiply and the rounded scale
// (gamma(d + 8) with RoPE: two float rotations of 3 roundings each); 2u for the subtraction
// and the rescale subtractions of an online softmax (they telescope to at most |s_j - m|);
// K key tiles each adding one rescale exp. Numerator and denominator sums add gamma(T+K+1), each
// at its own accumulator's u. Inputs rounded on entry: Q and K add u_Q + u_K + u_Q u_K to c_s
// (each product q_i k_i carries both roundings), V adds u_V relative to S_r; where they flush below
// the normal range, an absolute error of each logit joins each key's exponent error like the exp's,
// and half V's spacing joins the absolute terms. An unnormalised P.V
// sum has the same relative error as a normalised one; its overflow is not an error bound's
// matter (overflow_safe and the precision limit judge it).
//
// Small regime (delta_max <= 1/4): o = N / Z perturbed by factors f_j in [e^-d_j, e^d_j] gives
//   |do_r| <= e^{2 delta_max} [sum_j p_j |v_jr| delta_j + S_r sum_j p_j delta_j] + S_r (2 gamma + 2u + 2u_P)
// closed with expm1 over the relative sum. Large regime: any positive weights keep o inside the
// hull [min_j v_jr, max_j v_jr], so the distance to the hull's far end bounds the error, plus
// rounding. LSE: logsumexp is 1-Lipschitz in the max norm, so |dLSE| <= delta_max always; in the
// small regime the first-order sum_j p_j delta_j is used when smaller. An absolute term covers
// weights and products that underflow.
#include "attest/reference/error_bound.h"

#include <cmath>
#include <limits>

namespace attest {
namespace {

constexpr double kSmallRegime = 0.25;

struct Coefficients {
  double score;        // c_s
  double per_key;      // (K + 1) u_e, and the absolute logit error of entry rounding
  double sums;         // gamma(T + K + 1) of the P.V accumulator
  double weight_sums;  // ... of the softmax sum
  double delta_max;
  int tiles;
};

Coefficients coefficients(const Problem& p, const Reference& ref, std::size_t row, const KernelNumerics& k) {
  const double us = k.score_roundoff;
  const int d = p.shape.head_dim + (p.rope.enabled ? 8 : 2);
  const int tiles = (k.key_tile > 0 ? (p.shape.k_len + k.key_tile - 1) / k.key_tile : 1) + k.extra_tiles;
  const double terms = summation_terms(ref.visible_keys[row], k.key_tile, tiles);
  Coefficients c{gamma_n(d, us) + k.entry_score,
                 (tiles + 1) * k.exp_error + k.entry_score_absolute,
                 gamma_n(terms, k.sum_roundoff),
                 gamma_n(terms, k.weight_sum_roundoff),
                 0,
                 tiles};
  c.delta_max = c.score * ref.cond_max[row] + 2 * us * ref.logit_range[row] + c.per_key;
  return c;
}

// The reference's own error: 136+ bits of working precision, then one rounding to double.
double reference_error(const Reference& ref, double magnitude) {
  return magnitude * (std::ldexp(1.0, -52) + std::ldexp(8.0, -ref.working_bits)) + 1e-300;
}

// Absolute terms: products and sums that underflow in the accumulator, weights flushed by P's
// rounding, O's own rounding near zero in its storage format, and V's flush on entry.
double absolute_terms(const Reference& ref, std::size_t element, std::size_t row, int tiles, const KernelNumerics& k) {
  const double vmax = ref.max_abs_value[element];
  return 4.0 * (ref.visible_keys[row] + tiles + 2) * k.underflow_quantum * (vmax + 1.0) +
         0.5 * ref.visible_keys[row] * k.weight_quantum * vmax + 0.5 * k.output_quantum + k.entry_value_absolute;
}

}  // namespace

double absolute_bound(const Problem& p, const Reference& ref, std::size_t element, const KernelNumerics& k) {
  const int tiles = (k.key_tile > 0 ? (p.shape.k_len + k.key_tile - 1) / k.key_tile : 1) + k.extra_tiles;
  const std::size_t row = element / p.shape.value_dim;
  return ref.empty[row] ? 0.0 : absolute_terms(ref, element, row, tiles, k);
}

KernelNumerics KernelNumerics::f32(int key_tile) {
  KernelNumerics k;
  k.key_tile = key_tile;
  return k;
}

double summation_terms(int visible_keys, int key_tile, int tiles) {
  if (key_tile <= 0) return visible_keys + tiles + 1.0;
  return std::min(visible_keys, key_tile) + 2.0 * tiles + 1.0;
}

double gamma_n(double n, double u) {
  const double nu = n * u;
  return nu >= 1.0 ? std::numeric_limits<double>::infinity() : nu / (1.0 - nu);
}

double output_bound(const Problem& p, const Reference& ref, std::size_t element, const KernelNumerics& k) {
  const std::size_t row = element / p.shape.value_dim;
  if (ref.empty[row]) return 0.0;  // empty rows are checked exactly against the policy
  const Coefficients c = coefficients(p, ref, row, k);
  const double us = k.score_roundoff;
  const double last = k.sum_roundoff + k.output_roundoff;  // the division by the sum, then O's storage
  const double s = ref.spread[element], o = ref.o[element], vmax = ref.max_abs_value[element];
  const double underflow = absolute_terms(ref, element, row, c.tiles, k);
  const double rounding = (c.sums + c.weight_sums + last + 2 * k.weight_rounding + k.entry_value) * vmax;
  const double hull = std::max(ref.value_max[element] - o, o - ref.value_min[element]) + rounding;
  if (!(c.delta_max <= kSmallRegime)) return hull + underflow + reference_error(ref, vmax);
  const double own = s > 0 ? (c.score * ref.spread_cond[element] + 2 * us * ref.spread_logit[element]) / s : 0.0;
  const double shared = c.score * ref.mean_cond[row] + 2 * us * ref.logit_spread[row];
  const double relative = std::exp(2 * c.delta_max) * (own + shared + 2 * c.per_key) + c.sums + c.weight_sums + last +
                          2 * k.weight_rounding + k.entry_value;
  // A vacuous relative bound (a bf16 sum over more terms than it can count) times a spread of 0
  // (a sink takes every weight) is no number: the hull bounds it then (seed 7 #40: a NaN bound
  // failed the exact kernel's output of 0).
  const double growth = std::expm1(relative);
  return (std::isinf(growth) ? hull : std::min(growth * s, hull)) + underflow + reference_error(ref, s);
}

double lse_bound(const Problem& p, const Reference& ref, std::size_t row, const KernelNumerics& k) {
  if (ref.empty[row]) return 0.0;
  const Coefficients c = coefficients(p, ref, row, k);
  const double us = k.score_roundoff, u = std::max(k.score_roundoff, k.weight_sum_roundoff);
  double exponent = c.delta_max;  // Lipschitz: valid in every regime
  if (c.delta_max <= kSmallRegime) {
    const double first_order =
        std::exp(2 * c.delta_max) * (c.score * ref.mean_cond[row] + 2 * us * ref.logit_spread[row] + c.per_key);
    exponent = std::min(exponent, first_order);
  }
  const double magnitude = std::fabs(ref.lse[row]);
  // Sum errors enter as -log(1 - gamma), for gamma < 1 only: past that (a bf16 accumulator over
  // thousands of keys) the sum may stagnate anywhere and the bound is vacuous, never capped.
  if (!(c.weight_sums < 1.0)) return std::numeric_limits<double>::infinity();
  return exponent - std::log1p(-c.weight_sums) + 2 * u * (magnitude + 1.0) + 2 * k.exp_error +
         reference_error(ref, magnitude + 1.0);
}

}  // namespace attest
