#include "calibrate_command.h"

#include <fmt/format.h>
#include <iostream>

#include "attest/generators.h"
#include "attest/precision_gate.h"
#include "attest/properties.h"
#include "kernel_resolver.h"

namespace attest {

int calibrate(int cases, std::uint64_t seed, const std::string& kernel_name) {
  std::vector<std::string> names;
  if (!kernel_name.empty()) names.push_back(kernel_name);
  else
    for (const KernelEntry& e : kernel_registry()) names.push_back(e.name);
  std::cout << fmt::format("seed {}\n{:<18} {:>7} {:>9} {:>7} {:>15} {:>11} {:>10} {:>10} {:>12}  {}\n", seed, "kernel",
                           "cases", "modifiers", "alarms", "err/bound (1)", "gate 2 use", "kernel u", "model u",
                           "kernel/model", "precision");
  int alarms_total = 0;
  for (const std::string& name : names) {
    const auto kernel = resolve_kernel(name);
    const Capabilities caps = kernel->capabilities();
    const rc::Gen<ProblemSpec> gen = gen_spec(caps);
    Oracle oracle(2);
    int done = 0, alarms = 0, modified = 0;  // modified: problems with softcap, ALiBi, a bias or sinks
    double worst_bound = 0, worst_use = 0, worst_kernel = 0, worst_model = 0, worst_ratio = 0;
    for (int i = 0; done < cases; ++i) {
      const Problem p = build_problem(gen(rc::Random(seed + i), 100).value(), caps);
      if (!kernel->capabilities().supports(p)) continue;
      ++done;
      modified += !(features_used_by(p) & FeatureSet::of_kind(FeatureKind::kModifier)).empty();
      // The gate's two errors, measured once: its verdict, and for choosing its constants how far a
      // correct kernel strays from the model kernel (kernel/model where the model's is above 0.1 u).
      const std::optional<GateErrors> e = precision_gate_errors(p, *kernel, oracle);
      const Verdict gate = e ? precision_gate_verdict(*e, e->declared) : precision_gate(p, *kernel, oracle);
      for (const Verdict& v : {matches_reference(p, *kernel, oracle), gate}) {
        if (!v.passed) {
          ++alarms;
          std::cout << fmt::format("FALSE ALARM {} case {} (seed {}): {}\n", name, i, seed + i, v.detail);
        }
        if (v.property == "matches_reference") worst_bound = std::max(worst_bound, v.utilisation);
        else worst_use = std::max(worst_use, v.utilisation);
      }
      if (e) {
        worst_kernel = std::max(worst_kernel, e->kernel), worst_model = std::max(worst_model, e->model);
        if (e->model > 0.1) worst_ratio = std::max(worst_ratio, e->kernel / e->model);
      }
    }
    std::cout << fmt::format("{:<18} {:>7} {:>9} {:>7} {:>15.3g} {:>11.3g} {:>10.3g} {:>10.3g} {:>12.3g}  {}\n",
                             kernel->name(), done, modified, alarms, worst_bound, worst_use, worst_kernel, worst_model,
                             worst_ratio, caps.precision.summary());
    alarms_total += alarms;
  }
  const GateAllowance f32 = gate_allowance(Precision{}), half = gate_allowance(Precision{.scores = Scalar::kBF16});
  std::cout << fmt::format("precision gate: fails above {} x max(model error, {} u) at f32, {} x max(model error, {} u) "
                           "with a 16-bit rounding ('gate 2 use': the kernel's error over that allowance)\n",
                           f32.factor, f32.floor, half.factor, half.floor);
  return alarms_total;
}

}  // namespace attest
