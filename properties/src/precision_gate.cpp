// Gate 2 of DESIGN.md §4: the hard bound is 10^3-10^4 x above typical error, so a silent
// precision downgrade passes it. Compare the kernel's error with the model kernel's instead (the
// loop kernel rounding where the kernel declares), by an allowance calibrated per precision.
#include <algorithm>
#include <cmath>
#include <optional>
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
    if (ref.empty[row] || !ref.has_row(row)) continue;  // a long problem's reference holds a sample of rows
    const double conditioning = std::max(1.0, ref.mean_cond[row] / kPrecisionGateFloor);
    const double err = std::fabs(double(out.o[e]) - ref.o[e]) / (ref.spread[e] + 1e-300) / u / conditioning;
    worst = std::max(worst, std::isnan(err) ? INFINITY : err);
  }
  return worst;
}

}  // namespace

GateAllowance gate_allowance(const Precision& precision) {
  return precision.coarsest() > kF32Roundoff ? GateAllowance{kPrecisionGateFactor16, kPrecisionGateFloor16}
                                             : GateAllowance{kPrecisionGateFactor, kPrecisionGateFloor};
}

std::optional<GateErrors> precision_gate_errors(const Problem& p, const Kernel& kernel, Oracle& oracle) {
  const Capabilities caps = kernel.capabilities();
  const Reference& ref = oracle.reference(p);
  if (!ref.finite()) return std::nullopt;
  return precision_gate_errors_of(p, ref, run_guarded(kernel, p), run_guarded(*make_model_kernel(caps.precision), p),
                                  caps.precision);
}

std::optional<GateErrors> precision_gate_errors_of(const Problem& p, const Reference& ref, const Outputs& kernel_out,
                                                   const Outputs& model_out, const Precision& precision) {
  bool any_row = false;
  for (std::size_t row = 0; row < ref.empty.size() && !any_row; ++row) any_row = ref.has_row(row) && !ref.empty[row];
  if (!any_row) return std::nullopt;
  // Both errors in units of the coarsest rounding the kernel declares; the model rounds there too.
  const double u = precision.coarsest();
  return GateErrors{scaled_error(p, ref, kernel_out, u), scaled_error(p, ref, model_out, u)};
}

Verdict precision_gate_verdict(const GateErrors& errors, const Precision& precision) {
  const std::string name = "precision_gate";
  const GateAllowance gate = gate_allowance(precision);
  const double allowed = gate.factor * std::max(errors.model, gate.floor);
  const double utilisation = errors.kernel / allowed;
  if (!(errors.kernel <= allowed))
    return Verdict::fail(name, fmt::format("error {:.3g} u (relative to S_r and conditioning) vs the model kernel's {:.3g} u "
                                           "(the loop kernel rounding as declared): above {} x max(model, {} u): a "
                                           "precision downgrade?",
                                           errors.kernel, errors.model, gate.factor, gate.floor),
                         utilisation);
  return Verdict::pass(name, utilisation);
}

Verdict precision_gate(const Problem& p, const Kernel& kernel, Oracle& oracle) {
  const std::string name = "precision_gate";
  const Reference& ref = oracle.reference(p);
  if (!ref.finite()) return Verdict::fail(name, "reference failure: NaN in the exact result");
  const std::optional<GateErrors> errors = precision_gate_errors(p, kernel, oracle);
  if (!errors) return Verdict::vacuous(name, "every row is empty: no error to compare");
  return precision_gate_verdict(*errors, kernel.capabilities().precision);
}

}  // namespace attest
