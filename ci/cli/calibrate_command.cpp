#include "calibrate_command.h"

#include <fmt/format.h>

#include <array>
#include <cmath>
#include <iostream>

#include "attest/kernels/builtin_kernels.h"
#include "attest/properties/generators.h"
#include "attest/properties/precision_gate.h"
#include "attest/properties/properties.h"
#include "attest/properties/session_forward.h"
#include "kernel_resolver.h"

namespace attest {
namespace {

// An alarm the declaration itself explains: the kernel's output is not finite where the model
// kernel of its declared arithmetic (on the path that served the call) is not either, or where an
// unnormalised P.V sum may overflow in some summation order (its visible |v| add up past the
// accumulator's largest value; an online softmax weighs early keys against a smaller running max
// than the model's). That is the arithmetic's precision limit, a true finding about the design; a
// false alarm is one of the bound or the gate.
bool declared_overflow(const Problem& p, const Kernel& kernel, Oracle& oracle) {
  const Outputs out = run_forward(kernel, p);
  const Precision& declared = kernel.capabilities().precision_for(out.path);
  const Outputs model = run_forward(*make_model_kernel(declared), p);
  const Reference& ref = oracle.reference(p, /*weights=*/true);
  const Shape& s = p.shape;
  for (std::size_t e = 0; e < out.o.size(); ++e) {
    if (std::isfinite(out.o[e])) continue;
    if (!std::isfinite(model.o[e])) return true;
    if (!declared.pv_unnormalised) continue;
    const std::size_t row = e / s.value_dim;
    const int col = static_cast<int>(e % s.value_dim), h = static_cast<int>((row / s.q_len) % s.heads);
    const int b = static_cast<int>(row / (std::size_t(s.q_len) * s.heads));
    double reach = 0;
    for (int j = 0; j < s.k_len; ++j)
      if (ref.visible[row * s.k_len + j])
        reach += std::fabs(p.v[((std::size_t(b) * s.kv_heads + p.kv_head_of(h)) * s.k_len + j) * s.value_dim + col]);
    if (reach > info(declared.accumulator).max_finite) return true;
  }
  return false;
}

}  // namespace

int calibrate(int cases, std::uint64_t seed, const std::string& kernel_name) {
  std::vector<std::string> names;
  if (!kernel_name.empty())
    names.push_back(kernel_name);
  else
    for (const KernelEntry& e : kernel_registry()) names.push_back(e.name);
  std::cout << fmt::format("seed {}\n{:<18} {:>7} {:>9} {:>7} {:>15} {:>11} {:>10} {:>10} {:>12}  {}\n", seed, "kernel",
                           "cases", "modifiers", "alarms", "err/bound (1)", "gate 2 use", "kernel u", "model u",
                           "kernel/model", "precision");
  int alarms_total = 0;
  for (const std::string& name : names) {
    const auto resolved = resolve_kernel(name);
    // A decode-only kernel is calibrated through its sessions: each causal problem decoded.
    const bool decode_only = !resolved->capabilities().forward() && resolved->capabilities().decode();
    if (decode_only && !exact_sessions(resolved->capabilities()))
      throw std::invalid_argument(name +
                                  " is decode-only and its cache evicts at will (explicit policy): no "
                                  "session of it is exact attention to calibrate; eviction_matches_retained_set "
                                  "holds it to what it reports");
    const std::unique_ptr<Kernel> sessions = decode_only ? session_forward(*resolved) : nullptr;
    const Kernel* kernel = decode_only ? sessions.get() : resolved.get();
    const Capabilities caps = kernel->capabilities();
    const rc::Gen<ProblemSpec> gen = gen_spec(caps);
    Oracle oracle(2);
    int done = 0, alarms = 0, modified = 0;  // modified: problems with softcap, ALiBi, a bias or sinks
    int overflows = 0;                       // alarms the declared arithmetic's own overflow explains
    int worst_bound_case = -1;               // where err/bound peaked (seed + case replays it)
    double worst_bound = 0, worst_use = 0, worst_kernel = 0, worst_model = 0, worst_ratio = 0;
    // The backward (docs/design.md#backward), for a kernel that declares one: the gradient bound's alarms.
    int gradient_cases = 0, gradient_alarms = 0, worst_gradient_case = -1;
    double worst_gradient = 0, worst_gradient_gate = 0;
    for (int i = 0; done < cases; ++i) {
      const Problem p = build_problem(gen(rc::Random(seed + i), 100).value(), caps);
      if (!kernel->capabilities().supports(p)) continue;
      ++done;
      modified += !(features_used_by(p) & FeatureSet::of_kind(FeatureKind::kModifier)).empty();
      // The gate's two errors, measured once: its verdict, and for choosing its constants how far a
      // correct kernel strays from the model kernel (kernel/model where the model's is above 0.1 u).
      const std::optional<GateErrors> e = precision_gate_errors(p, *kernel, oracle);
      const Verdict gate = e ? precision_gate_verdict(*e, e->declared) : precision_gate(p, *kernel, oracle);
      const std::array<Verdict, 2> verdicts = {matches_reference(p, *kernel, oracle), gate};
      const bool explained = (!verdicts[0].passed || !verdicts[1].passed) && declared_overflow(p, *kernel, oracle);
      overflows += explained;
      for (const Verdict& v : verdicts) {
        if (!v.passed && !explained) {
          ++alarms;
          std::cout << fmt::format("FALSE ALARM {} case {} (seed {}): {}\n", name, i, seed + i, v.detail);
        }
        if (explained) continue;  // the overflow the precision limit reports: not the gates' measure
        if (v.property != "matches_reference")
          worst_use = std::max(worst_use, v.utilisation);
        else if (v.utilisation > worst_bound)
          worst_bound = v.utilisation, worst_bound_case = i;
      }
      if (caps.backward()) {
        const Verdict g = gradient_matches_reference(p, *kernel, oracle);
        const Verdict gate = gradient_precision_gate(p, *kernel, oracle);
        gradient_cases += g.exercised;
        for (const Verdict& v : {g, gate})
          if (!v.passed) {
            ++gradient_alarms;
            std::cout << fmt::format("FALSE ALARM {} backward case {} (seed {}): {}\n", name, i, seed + i, v.detail);
          }
        if (g.passed && g.utilisation > worst_gradient) worst_gradient = g.utilisation, worst_gradient_case = i;
        if (gate.passed) worst_gradient_gate = std::max(worst_gradient_gate, gate.utilisation);
      }
      if (e && !explained) {
        worst_kernel = std::max(worst_kernel, e->kernel), worst_model = std::max(worst_model, e->model);
        if (e->model > 0.1) worst_ratio = std::max(worst_ratio, e->kernel / e->model);
      }
    }
    std::cout << fmt::format(
        "{:<18} {:>7} {:>9} {:>7} {:>15.3g} {:>11.3g} {:>10.3g} {:>10.3g} {:>12.3g}  {}{}\n", kernel->name(), done,
        modified, alarms, worst_bound, worst_use, worst_kernel, worst_model, worst_ratio, caps.precision.summary(),
        overflows ? fmt::format(" ({} cases overflow as the declared arithmetic does)", overflows) : "");
    if (worst_bound_case >= 0)
      std::cout << fmt::format("  worst err/bound {:.3g} at case {} (seed {})\n", worst_bound, worst_bound_case,
                               seed + worst_bound_case);
    if (caps.backward())
      std::cout << fmt::format(
          "  backward: {} cases compared, {} false alarms, worst gradient err/bound {:.3g}{}; "
          "gate 2 use {:.3g}\n",
          gradient_cases, gradient_alarms, worst_gradient,
          worst_gradient_case >= 0
              ? fmt::format(" at case {} (seed {})", worst_gradient_case, seed + worst_gradient_case)
              : "",
          worst_gradient_gate);
    alarms_total += alarms + gradient_alarms;
  }
  const GateAllowance f32 = gate_allowance(Precision{}), half = gate_allowance(Precision{.scores = Scalar::kBF16});
  std::cout << fmt::format(
      "precision gate: fails above {} x max(model error, {} u) at f32, {} x max(model error, {} u) "
      "with a 16-bit rounding ('gate 2 use': the kernel's error over that allowance)\n",
      f32.factor, f32.floor, half.factor, half.floor);
  return alarms_total;
}

}  // namespace attest
