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
  std::cout << fmt::format("seed {}\n{:<18} {:>8} {:>10} {:>13} {:>18} {:>22}  {}\n", seed, "kernel", "cases",
                           "modifiers", "false alarms", "worst err/bound", "worst error/loop's", "precision");
  int alarms_total = 0;
  for (const std::string& name : names) {
    const auto kernel = resolve_kernel(name);
    const Capabilities caps = kernel->capabilities();
    const rc::Gen<ProblemSpec> gen = gen_spec(caps);
    Oracle oracle(2);
    int done = 0, alarms = 0, modified = 0;  // modified: problems with softcap, ALiBi, a bias or sinks
    double worst_bound = 0, worst_precision = 0;
    for (int i = 0; done < cases; ++i) {
      const Problem p = build_problem(gen(rc::Random(seed + i), 100).value(), caps);
      if (!kernel->capabilities().supports(p)) continue;
      ++done;
      modified += !(features_used_by(p) & FeatureSet::of_kind(FeatureKind::kModifier)).empty();
      for (const Verdict& v : {matches_reference(p, *kernel, oracle), precision_gate(p, *kernel, oracle)}) {
        if (!v.passed) {
          ++alarms;
          std::cout << fmt::format("FALSE ALARM {} case {} (seed {}): {}\n", name, i, seed + i, v.detail);
        }
        if (v.property == "matches_reference") worst_bound = std::max(worst_bound, v.utilisation);
        else worst_precision = std::max(worst_precision, v.utilisation * kPrecisionGateFactor);
      }
    }
    std::cout << fmt::format("{:<18} {:>8} {:>10} {:>13} {:>18.3g} {:>22.3g}  {}\n", kernel->name(), done, modified,
                             alarms, worst_bound, worst_precision, caps.precision.summary());
    alarms_total += alarms;
  }
  std::cout << fmt::format("precision gate: factor {} over max(loop error, {} u)\n", kPrecisionGateFactor,
                           kPrecisionGateFloor);
  return alarms_total;
}

}  // namespace attest
