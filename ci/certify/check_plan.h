// `attest certify --plan`: which checks a run would run on a kernel and why the others would
// not, from its declaration alone (no kernel call, no reference). Each answer comes from the
// function the run asks (not_covered_because, sized_not_covered, fuzz_not_covered, takes_check).
#pragma once

#include <string>
#include <vector>

#include "attest/kernels/kernel.h"
#include "certify.h"

namespace attest {

struct PlannedCheck {
  enum class Outcome {
    kRuns,        // it runs (its verdict is the run's to find)
    kNotCovered,  // it is in the certificate as not covered, for `why`
    kAbsent,      // it is not in the certificate at all: its stage is off, --check left it out, ...
  };
  std::string stage;
  std::string check;
  Outcome outcome = Outcome::kRuns;
  std::string why;
};

std::vector<PlannedCheck> plan_checks(const Kernel& kernel, const CertifyOptions& options);

// "blocked (builtin:blocked): 21 of 37 checks apply", then one line per check with its outcome.
std::string format_plan(const std::string& source, const std::string& name, const std::vector<PlannedCheck>& plan);

}  // namespace attest
