// Certification at a small fixed budget (10 cases per property, seed 20261207, no size stages) for
// tests that expect a kernel CERTIFIED or a named check to fail.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "certify.h"

namespace attest {

inline std::vector<CheckResult> certify_quick(const Kernel& kernel, const std::string& out) {
  CertifyOptions options;
  options.property_cases = 10;
  options.seed = 20261207;
  options.progress = false;
  options.sized_stages = false;
  options.out_dir = ::testing::TempDir() + out;
  Oracle oracle(64);
  return certify_kernel(kernel, oracle, options);
}

// The checks that block certification.
inline std::vector<std::string> blocking_checks(const std::vector<CheckResult>& checks) {
  std::vector<std::string> names;
  for (const CheckResult& c : checks)
    if (c.blocks()) names.push_back(c.check);
  return names;
}

}  // namespace attest
