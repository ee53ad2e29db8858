#include "attest/reference/gradient.h"

#include <boost/multiprecision/mpfr.hpp>
#include <cmath>
#include <stdexcept>

#include "double_double.h"
#include "gradient_algorithm.h"
#include "x86_64_v3.h"

namespace attest {
namespace {

namespace mp = boost::multiprecision;
using Mpfr136 = mp::number<mp::mpfr_float_backend<41, mp::allocate_stack>, mp::et_off>;
using Mpfr216 = mp::number<mp::mpfr_float_backend<65, mp::allocate_stack>, mp::et_off>;

void check_inputs(const Problem& p, const GradientInputs& in) {
  p.validate();
  if (in.o.size() != p.o_size() || in.lse.size() != p.lse_size() || in.d_o.size() != p.o_size())
    throw std::invalid_argument("gradient: o, lse and d_o must have the forward's output sizes");
}

// L = sum O . dO from the double-double forward (O to 100 bits of S_r = sum_j P_j |v_j|: its
// double and the residual), summed at 216 bits; `error` bounds L's own error.
Mpfr216 loss(const Problem& p, const std::vector<float>& d_o, double& error) {
  const Reference ref = compute_reference_fast(p);
  Mpfr216 sum = 0;
  for (std::size_t e = 0; e < ref.o.size(); ++e)
    if (!ref.empty[e / p.shape.value_dim] && d_o[e] != 0.0f) {
      sum += (Mpfr216(ref.o[e]) + Mpfr216(ref.o_residual[e])) * Mpfr216(d_o[e]);
      error += std::fabs(double(d_o[e])) * ref.spread[e] * 0x1p-99;
    }
  return sum;
}

#ifdef ATTEST_X86_64_V3_CLONES
// The double-double gradient compiled for x86-64-v3 and flattened (x86_64_v3.h): the same bits.
[[gnu::target("arch=x86-64-v3") ATTEST_FLATTEN_ORACLE]] ReferenceGradient gradient_with_fma(
    const Problem& p, const GradientInputs& in, const GradientNumerics& numerics) {
  return reference_detail::compute_gradient<reference_detail::DoubleDouble>(p, in, numerics, 100);
}
#endif

}  // namespace

ReferenceGradient compute_gradient(const Problem& p, const GradientInputs& in, const GradientNumerics& numerics) {
  check_inputs(p, in);
#ifdef ATTEST_X86_64_V3_CLONES
  if (reference_detail::runs_x86_64_v3()) return gradient_with_fma(p, in, numerics);
#endif
  return reference_detail::compute_gradient<reference_detail::DoubleDouble>(p, in, numerics, 100);
}

ReferenceGradient reference_detail::compute_gradient_portable(const Problem& p, const GradientInputs& in,
                                                              const GradientNumerics& numerics) {
  check_inputs(p, in);
  return reference_detail::compute_gradient<reference_detail::DoubleDouble>(p, in, numerics, 100);
}

ReferenceGradient compute_gradient_mpfr(const Problem& p, const GradientInputs& in, const GradientNumerics& numerics) {
  check_inputs(p, in);
  return reference_detail::compute_gradient<Mpfr136>(p, in, numerics, std::numeric_limits<Mpfr136>::digits);
}

FiniteDifference finite_difference(const Problem& p, const std::vector<float>& d_o, GradientOf of, std::size_t index,
                                   float h) {
  if (d_o.size() != p.o_size()) throw std::invalid_argument("finite_difference: d_o must have O's size");
  std::vector<float>* x = nullptr;
  Problem moved = p;
  switch (of) {
    case GradientOf::kQ:
      x = &moved.q;
      break;
    case GradientOf::kK:
      x = &moved.k;
      break;
    case GradientOf::kV:
      x = &moved.v;
      break;
    case GradientOf::kSinks:
      x = &moved.modifiers.sinks;
      break;
  }
  if (index >= x->size()) throw std::invalid_argument("finite_difference: index outside the input");
  const float at = (*x)[index];
  const float up = at + h, down = at - h;
  // Steps as taken in float; unequal steps get the three-point formula, second order either way.
  const double a = double(up) - double(at), c = double(at) - double(down);
  if (!(a > 0 && c > 0)) throw std::invalid_argument("finite_difference: the step vanishes in float");
  double loss_error = 0;
  (*x)[index] = up;
  const Mpfr216 l_up = loss(moved, d_o, loss_error);
  (*x)[index] = down;
  const Mpfr216 l_down = loss(moved, d_o, loss_error);
  if (a == c) return {static_cast<double>((l_up - l_down) / Mpfr216(2 * a)), loss_error / a};
  (*x)[index] = at;
  const Mpfr216 l_at = loss(moved, d_o, loss_error);
  const Mpfr216 A(a), C(c);
  return {static_cast<double>((C * C * l_up - A * A * l_down - (C * C - A * A) * l_at) / (A * C * (A + C))),
          4 * loss_error / std::min(a, c)};
}

}  // namespace attest
