// Certificate writers (JSON, JUnit) and the regression gate against a baseline certificate.
#pragma once

#include <string>
#include <vector>

#include "baseline.h"
#include "certificate_format.h"
#include "certify.h"

namespace attest {

// One certified kernel: where it came from, what it declared, and its check results.
struct KernelReport {
  std::string source;  // as named on the command line
  std::string name;
  Capabilities capabilities;
  std::vector<CheckResult> checks;
  bool passed() const;
};

struct CertificateInfo {
  std::uint64_t seed = 0;
  int property_cases = 0;
  std::vector<KernelReport> kernels;
};

// JSON, schema ci/schema/certificate.schema.json ("attest-certificate", version 1).
std::string certificate_json(const CertificateInfo& info);
// JUnit XML: one testsuite per kernel, one testcase per check.
std::string certificate_junit(const CertificateInfo& info);

// The regression gate: reasons the new certificate is worse than the baseline (empty: not worse).
// Worse = a check that passed now fails, or a worst utilisation grew beyond `factor` x the old
// one (utilisations under 0.01 are treated as 0.01, so noise near zero does not count).
std::vector<std::string> regressions(const Baseline& baseline, const CertificateInfo& now, double factor);

}  // namespace attest
