// Gate 2 of docs/design.md#tolerance-model: the hard bound is 10^3-10^4 x above typical error, so a silent
// precision downgrade passes it. Compare the kernel's error with the model kernel's instead (the
// loop kernel rounding where the kernel declares), by an allowance calibrated per precision.
// Behind an entry rounding coarser than the storage both errors are measured from the exact result
// of the rounded inputs, in units of the arithmetic after it: an f16 entry must not hide an f16
// accumulator inside f16 units.
#include "attest/properties/precision_gate.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "attest/kernels/builtin_kernels.h"
#include "attest/model/quantized.h"
#include "attest/properties/compare.h"
#include "attest/properties/harness.h"
#include "attest/properties/properties.h"
#include "attest/reference/error_bound.h"

namespace attest {
namespace {

// Worst |error| / S_r over non-empty elements, in units of u, and of the row's logit conditioning
// above the floor: with logits like 1e4 the rounding of each logit (order-dependent, ~u A_j)
// dominates, and which summation order is lucky on one input says nothing about precision
// (fuzzing found such an input: loop 40 u, tiled 1.9e3 u, both far inside the hard bound).
// A kernel that declares flushed subnormals may err by the bound's absolute terms on any element:
// only what exceeds them is measured, or an output of 1e-40 flushed to 0 would read as 2^24 u.
double scaled_error(const Problem& p, const Reference& ref, const Outputs& out, double u,
                    const std::optional<KernelNumerics>& flush) {
  double worst = 0;
  for (std::size_t e = 0; e < ref.o.size(); ++e) {
    const std::size_t row = e / p.shape.value_dim;
    if (ref.empty[row] || !ref.has_row(row)) continue;  // a long problem's reference holds a sample of rows
    const double conditioning = std::max(1.0, ref.mean_cond[row] / kPrecisionGateFloor);
    double abs_err = std::fabs(double(out.o[e]) - ref.o[e]);
    if (flush) abs_err = std::max(0.0, abs_err - absolute_bound(p, ref, e, *flush));
    const double err = abs_err / (ref.spread[e] + 1e-300) / u / conditioning;
    worst = std::max(worst, std::isnan(err) ? INFINITY : err);
  }
  return worst;
}

// The inputs as the declared entry rounding leaves them (the model's exact inputs), stored in f32,
// and the arithmetic after it (no entry rounding); nothing when no entry rounds coarser than storage.
struct EntryFrame {
  Problem rounded;
  Precision arithmetic;
};

std::optional<EntryFrame> entry_frame(const Problem& p, const Precision& declared) {
  auto coarser = [](Scalar entry, Scalar stored) { return unit_roundoff(entry) > unit_roundoff(stored); };
  const bool q = coarser(declared.q_entry, declared.q), k = coarser(declared.k_entry, declared.k),
             v = coarser(declared.v_entry, declared.v);
  if (!q && !k && !v) return std::nullopt;
  EntryFrame f{p, declared};
  // As the model kernel rounds: Q a row at a time (q8 groups lie within a row), K and V elementwise.
  if (q)
    for (std::size_t at = 0; at < f.rounded.q.size(); at += std::size_t(p.shape.head_dim))
      round_on_entry(std::span(f.rounded.q).subspan(at, std::size_t(p.shape.head_dim)), declared.q_entry);
  if (k)
    for (float& x : f.rounded.k) x = round_to(x, declared.k_entry);
  if (v)
    for (float& x : f.rounded.v) x = round_to(x, declared.v_entry);
  f.rounded.storage.q = f.rounded.storage.k = f.rounded.storage.v = Scalar::kF32;
  f.arithmetic.q_entry = f.arithmetic.k_entry = f.arithmetic.v_entry = Scalar::kF32;
  return f;
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
  const GuardedOutputs kernel_out = run_guarded(kernel, p);
  const Precision& declared = caps.precision_for(kernel_out.path);  // the path that served the call
  return gate_errors(p, ref, kernel_out, run_guarded(*make_model_kernel(declared), p), declared, oracle);
}

std::optional<GateErrors> gate_errors(const Problem& p, const Reference& ref, const Outputs& kernel_out,
                                      const Outputs& model_out, const Precision& declared, Oracle& oracle) {
  if (const std::optional<EntryFrame> frame = entry_frame(p, declared)) {
    const Reference& rounded = oracle.reference(frame->rounded);
    if (rounded.finite())  // an entry rounding that overflows: judged in the declared units below
      return precision_gate_errors_of(frame->rounded, rounded, kernel_out, model_out, frame->arithmetic);
  }
  return precision_gate_errors_of(p, ref, kernel_out, model_out, declared);
}

std::optional<GateErrors> precision_gate_errors_of(const Problem& p, const Reference& ref, const Outputs& kernel_out,
                                                   const Outputs& model_out, const Precision& precision) {
  bool any_row = false;
  for (std::size_t row = 0; row < ref.empty.size() && !any_row; ++row) any_row = ref.has_row(row) && !ref.empty[row];
  if (!any_row) return std::nullopt;
  // Both errors in units of the coarsest rounding the kernel declares; the model rounds there too.
  const double u = precision.coarsest();
  std::optional<KernelNumerics> flush;
  if (precision.flush_subnormals) {
    Capabilities declared;
    declared.precision = precision;
    flush = numerics_of(declared, precision, p);
    flush->key_tile = 1;  // as many tiles as keys: the most sums a flush may touch
  }
  return GateErrors{scaled_error(p, ref, kernel_out, u, flush), scaled_error(p, ref, model_out, u, flush), precision};
}

Verdict precision_gate_verdict(const GateErrors& errors, const Precision& precision) {
  const std::string name = "precision_gate";
  const GateAllowance gate = gate_allowance(precision);
  const double allowed = gate.factor * std::max(errors.model, gate.floor);
  const double utilisation = errors.kernel / allowed;
  if (!(errors.kernel <= allowed))
    return Verdict::fail(name,
                         fmt::format("error {:.3g} u (relative to S_r and conditioning) vs the model kernel's {:.3g} u "
                                     "(the loop kernel rounding as declared): above {} x max(model, {} u): a "
                                     "precision downgrade?",
                                     errors.kernel, errors.model, gate.factor, gate.floor),
                         utilisation);
  return Verdict::pass(name, utilisation);
}

namespace {

// One coarser rounding than declared, run as the model kernel: does it reproduce the error?
struct Suspect {
  std::string rounding;  // "the accumulator in f16 (declared f32)"
  Precision precision;   // the declared one with that rounding lowered
};

std::vector<Suspect> suspects_of(const Precision& declared) {
  std::vector<Suspect> out;
  for (Scalar s : {Scalar::kBF16, Scalar::kF16}) {
    for (auto [name, field] : {std::pair{"scores", &Precision::scores}, std::pair{"P", &Precision::p},
                               std::pair{"the accumulator", &Precision::accumulator}})
      if (unit_roundoff(s) > unit_roundoff(declared.*field)) {
        Precision lowered = declared;
        lowered.*field = s;
        out.push_back({fmt::format("{} in {} (declared {})", name, to_string(s), to_string(declared.*field)), lowered});
      }
    // An input's effective format: the coarser of its storage and its declared entry rounding.
    auto used = [](Scalar stored, Scalar entry) { return std::max(unit_roundoff(stored), unit_roundoff(entry)); };
    if (unit_roundoff(s) > std::min({used(declared.q, declared.q_entry), used(declared.k, declared.k_entry),
                                     used(declared.v, declared.v_entry)})) {
      Precision lowered = declared;
      lowered.q_entry = lowered.k_entry = lowered.v_entry = s;
      out.push_back({fmt::format("Q, K and V rounded to {} on entry", to_string(s)), lowered});
    }
  }
  if (!declared.flush_subnormals) {  // FTZ/DAZ: a wasm or GPU build's error on tiny outputs
    Precision lowered = declared;
    lowered.flush_subnormals = true;
    out.push_back({"subnormals flushed (not declared)", lowered});
  }
  return out;
}

// How much of the kernel's error a suspect's model leaves unexplained: |kernel - model| over
// |kernel - exact|, element by element over the rows `ref` holds. Near 0: the same error pattern.
double unexplained(const Problem& p, const Reference& ref, const Outputs& kernel_out, const Outputs& model_out) {
  double residual = 0, error = 0;
  for (std::size_t e = 0; e < ref.o.size(); ++e) {
    const std::size_t row = e / p.shape.value_dim;
    if (ref.empty[row] || !ref.has_row(row)) continue;
    const double k = kernel_out.o[e], m = model_out.o[e];
    if (!std::isfinite(k) || !std::isfinite(m)) continue;
    residual += (k - m) * (k - m);
    error += (k - ref.o[e]) * (k - ref.o[e]);
  }
  return error > 0 ? std::sqrt(residual / error) : INFINITY;
}

// Names the rounding the evidence points at: each suspect (one rounding coarser than declared) runs
// as the model kernel. It reproduces the error when it explains at least three quarters of it
// element by element (what is left is at most half the error's size): rounding P or the inputs
// fixes the pattern whatever the summation order. An accumulator's pattern, or P rounded before
// normalising, depends on the order, so such a kernel may match no pattern; the suspects whose
// worst error is of the same size (within 2x) are named then.
std::string suspected_rounding(const Problem& p, const Reference& ref, const Outputs& kernel_out,
                               const Precision& declared) {
  std::vector<std::string> pattern, size, tried;
  const double u = declared.coarsest();
  const double kernel_err = scaled_error(p, ref, kernel_out, u, std::nullopt);
  for (const Suspect& suspect : suspects_of(declared)) {
    const Outputs model = run_forward(*make_model_kernel(suspect.precision), p);
    const double model_err = scaled_error(p, ref, model, u, std::nullopt);
    tried.push_back(suspect.rounding);
    if (unexplained(p, ref, kernel_out, model) <= 0.5)
      pattern.push_back(suspect.rounding);
    else if (model_err <= 2 * kernel_err && kernel_err <= 2 * model_err)
      size.push_back(suspect.rounding);
  }
  auto joined = [](const std::vector<std::string>& v) {
    std::string out;
    for (const std::string& s : v) out += (out.empty() ? "" : "; ") + s;
    return out;
  };
  if (!pattern.empty()) return fmt::format("; its error pattern is reproduced by a model with {}", joined(pattern));
  if (!size.empty())
    return fmt::format("; no model reproduces its error pattern; one of the same size (within 2x): {}", joined(size));
  return tried.empty() ? "" : fmt::format("; no single coarser rounding explains it (tried {})", joined(tried));
}

}  // namespace

Verdict precision_gate(const Problem& p, const Kernel& kernel, Oracle& oracle) {
  const std::string name = "precision_gate";
  const Reference& ref = oracle.reference(p);
  if (!ref.finite()) return Verdict::fail(name, "reference failure: NaN in the exact result");
  const Outputs kernel_out = run_guarded(kernel, p);
  const Precision declared = kernel.capabilities().precision_for(kernel_out.path);
  const std::optional<GateErrors> errors =
      gate_errors(p, ref, kernel_out, run_guarded(*make_model_kernel(declared), p), declared, oracle);
  if (!errors) return Verdict::vacuous(name, "every row is empty: no error to compare");
  Verdict v = precision_gate_verdict(*errors, errors->declared);
  if (!v.passed && std::isfinite(errors->kernel)) v.detail += suspected_rounding(p, ref, kernel_out, declared);
  return v;
}

}  // namespace attest
