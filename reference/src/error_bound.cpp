// Derivation (first order, then made rigorous by exp(x) - 1 >= x):
//   each computed weight e_j = exp(s_j - m) carries a relative error
//     eps_j = c_s A_j + 2u |s_j - m| + (K + 1) u_e   (2u: the subtraction, and the
//     rescale subtractions of an online softmax, which telescope to at most |s_j - m|)
//   with c_s = gamma(d + 2) for the dot product, the scale multiply and the rounded scale
//   (gamma(d + 8) with RoPE: two float rotations of 3 roundings each), K key tiles each
//   adding one rescale exp. Numerator and denominator sums add gamma(T + K + 1) each, the
//   division 2u. With o = N / Z and |o_r| <= S_r:
//     |do_r| <= sum_j p_j |v_jr| eps_j + S_r sum_j p_j eps_j + S_r (2 gamma(T+K+1) + 2u + 2 u_P)
//   plus an absolute term for weights and products that underflow.
#include "attest/error_bound.h"

#include <cmath>
#include <limits>

namespace attest {
namespace {

struct Coefficients {
  double score;  // c_s
  double per_key;  // (K + 1) u_e
  double sums;  // gamma(T + K + 1)
  int tiles;
};

Coefficients coefficients(const Problem& p, const Reference& ref, std::size_t row, const KernelNumerics& k) {
  const double u = k.unit_roundoff;
  const int d = p.shape.head_dim + (p.rope.enabled ? 8 : 2);
  const int tiles = k.key_tile > 0 ? (p.shape.k_len + k.key_tile - 1) / k.key_tile : 1;
  return {gamma_n(d, u), (tiles + 1) * k.exp_error, gamma_n(ref.visible_keys[row] + tiles + 1, u), tiles};
}

// The reference's own error: 136+ bits of working precision, then one rounding to double.
double reference_error(const Reference& ref, double magnitude) {
  return magnitude * (std::ldexp(1.0, -52) + std::ldexp(8.0, -ref.working_bits)) + 1e-300;
}

}  // namespace

KernelNumerics KernelNumerics::f32(int key_tile) {
  KernelNumerics k;
  k.key_tile = key_tile;
  return k;
}

double gamma_n(double n, double u) {
  const double nu = n * u;
  return nu >= 1.0 ? std::numeric_limits<double>::infinity() : nu / (1.0 - nu);
}

double output_bound(const Problem& p, const Reference& ref, std::size_t element, const KernelNumerics& k) {
  const std::size_t row = element / p.shape.value_dim;
  if (ref.empty[row]) return 0.0;  // empty rows are checked exactly against the policy
  const Coefficients c = coefficients(p, ref, row, k);
  const double u = k.unit_roundoff;
  const double s = ref.spread[element];
  // Relative parts first; exp(x) - 1 covers the products of (1 + delta) factors exactly.
  const double own = s > 0 ? (c.score * ref.spread_cond[element] + 2 * u * ref.spread_logit[element]) / s : 0.0;
  const double shared = c.score * ref.mean_cond[row] + 2 * u * ref.logit_spread[row];
  const double relative = own + shared + 2 * c.per_key + 2 * c.sums + 2 * u + 2 * k.weight_rounding;
  const double underflow = 4.0 * (ref.visible_keys[row] + c.tiles + 2) * k.underflow_quantum *
                           (ref.max_abs_value[element] + 1.0);
  return std::expm1(relative) * s + underflow + reference_error(ref, s);
}

double lse_bound(const Problem& p, const Reference& ref, std::size_t row, const KernelNumerics& k) {
  if (ref.empty[row]) return 0.0;
  const Coefficients c = coefficients(p, ref, row, k);
  const double u = k.unit_roundoff;
  // log(Z (1 + eta)) = log Z + log1p(eta); then m + log Z and the log itself round.
  const double eta = std::expm1(c.score * ref.mean_cond[row] + 2 * u * ref.logit_spread[row] + c.per_key + c.sums);
  const double magnitude = std::fabs(ref.lse[row]);
  return -std::log1p(-std::min(eta, 0.999999)) + 2 * u * (magnitude + 1.0) + 2 * k.exp_error +
         reference_error(ref, magnitude + 1.0);
}

}  // namespace attest
