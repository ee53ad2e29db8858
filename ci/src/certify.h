// `attest certify`: runs stages of checks on a kernel and collects one row per check.
#pragma once

#include <string>
#include <vector>

#include "attest/cases.h"
#include "attest/kernel.h"
#include "attest/properties.h"

namespace attest {

// One line of the certificate: a check run over some cases.
struct CheckResult {
  std::string kernel;
  std::string stage;
  std::string check;
  long cases = 0;
  long failures = 0;
  bool applicable = true;
  double worst_utilisation = 0.0;
  std::string first_failure;  // "case name: explanation"
  double seconds = 0.0;
  bool passed() const { return failures == 0; }
};

struct CertifyOptions {
  bool verbose_progress = true;  // progress lines on stderr
};

// A named list of problems checked by one property.
struct CheckPlan {
  std::string stage;
  std::string check;
  std::vector<NamedProblem> problems;
  PropertyCheck property;
};

std::vector<CheckPlan> core_plans();

CheckResult run_plan(const CheckPlan& plan, const Kernel& kernel, Oracle& oracle, const CertifyOptions& options);

// The human table: kernel x check, verdict, cases, worst error as a fraction of the bound.
std::string format_table(const std::vector<CheckResult>& results);

}  // namespace attest
