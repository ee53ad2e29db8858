// Gate 2 of DESIGN.md §4: the hard bound is 10^3-10^4 x above typical error, so a silent
// precision downgrade passes it. Compare the kernel's error with the loop kernel's instead.
#include <algorithm>
#include <cmath>
#include <fmt/format.h>

#include "attest/harness.h"
#include "attest/builtin_kernels.h"
#include "attest/precision_gate.h"
#include "attest/properties.h"

namespace attest {
namespace {

// Worst |error| / S_r over non-empty elements, in units of u, and of the row's logit conditioning
// above the floor: with logits like 1e4 the rounding of each logit (order-dependent, ~u A_j)
// dominates, and which summation order is lucky on one input says nothing about precision
// (fuzzing found such an input: loop 40 u, tiled 1.9e3 u, both far inside the hard bound).
double scaled_error(const Problem& p, const Reference& ref, const Outputs& out, double u) {
  double worst = 0;
  for (std::size_t e = 0; e < ref.o.size(); ++e) {
    const std::size_t row = e / p.shape.value_dim;
    if (ref.empty[row]) continue;
    const double conditioning = std::max(1.0, ref.mean_cond[row] / kPrecisionGateFloor);
    const double err = std::fabs(double(out.o[e]) - ref.o[e]) / (ref.spread[e] + 1e-300) / u / conditioning;
    worst = std::max(worst, std::isnan(err) ? INFINITY : err);
  }
  return worst;
}

}  // namespace

Verdict precision_gate(const Problem& p, const Kernel& kernel, Oracle& oracle) {
  const std::string name = "precision_gate";
  const Capabilities caps = kernel.capabilities();
  const Reference& ref = oracle.reference(p);
  if (!ref.finite()) return Verdict::fail(name, "reference failure: NaN in the exact result");
  if (std::find(ref.empty.begin(), ref.empty.end(), 0) == ref.empty.end())
    return Verdict::vacuous(name, "every row is empty: no error to compare");
  // Both errors in units of the coarsest rounding the kernel declares; the model rounds there too.
  const double u = caps.precision.coarsest();
  const double kernel_error = scaled_error(p, ref, run_guarded(kernel, p), u);
  const double loop_error = scaled_error(p, ref, run_guarded(*make_model_kernel(caps.precision), p), u);
  const double allowed = kPrecisionGateFactor * std::max(loop_error, kPrecisionGateFloor);
  const double utilisation = kernel_error / allowed;
  if (!(kernel_error <= allowed))
    return Verdict::fail(name, fmt::format("error {:.3g} u (relative to S_r and conditioning) vs the loop kernel's {:.3g} u: above "
                                           "{} x max(loop, {} u): a precision downgrade?",
                                           kernel_error, loop_error, kPrecisionGateFactor, kPrecisionGateFloor),
                         utilisation);
  return Verdict::pass(name, utilisation);
}

}  // namespace attest
