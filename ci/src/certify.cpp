#include "certify.h"

#include <chrono>
#include <fmt/format.h>
#include <iostream>

namespace attest {

std::vector<CheckPlan> core_plans() {
  return {
      {"deterministic", "golden", golden_problems(), matches_reference},
      {"deterministic", "grid", grid_problems(), matches_reference},
  };
}

CheckResult run_plan(const CheckPlan& plan, const Kernel& kernel, Oracle& oracle, const CertifyOptions& options) {
  CheckResult r{kernel.name(), plan.stage, plan.check};
  const auto start = std::chrono::steady_clock::now();
  for (const NamedProblem& c : plan.problems) {
    if (!kernel.capabilities().supports(c.problem)) continue;
    const Verdict v = plan.property(c.problem, kernel, oracle);
    if (!v.applicable) continue;
    ++r.cases;
    r.worst_utilisation = std::max(r.worst_utilisation, v.utilisation);
    if (!v.passed && r.failures++ == 0) r.first_failure = c.name + ": " + v.detail;
  }
  r.applicable = r.cases > 0;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (options.verbose_progress)
    std::cerr << fmt::format("[{}] {} {}/{}: {} cases, {:.2f} s\n", kernel.name(), plan.stage, plan.check,
                             r.passed() ? "pass" : "FAIL", r.cases, r.seconds);
  return r;
}

std::string format_table(const std::vector<CheckResult>& results) {
  std::string out = fmt::format("{:<10} {:<14} {:<32} {:>7} {:>8} {:>12}\n", "kernel", "stage", "check", "cases",
                                "verdict", "err/bound");
  for (const CheckResult& r : results) {
    const char* verdict = !r.applicable ? "n/a" : r.passed() ? "PASS" : "FAIL";
    out += fmt::format("{:<10} {:<14} {:<32} {:>7} {:>8} {:>12.3g}\n", r.kernel, r.stage, r.check, r.cases, verdict,
                       r.worst_utilisation);
  }
  for (const CheckResult& r : results)
    if (!r.passed()) out += fmt::format("\nFAIL {} {}: {} of {} cases; first: {}\n", r.kernel, r.check, r.failures,
                                        r.cases, r.first_failure);
  return out;
}

}  // namespace attest
