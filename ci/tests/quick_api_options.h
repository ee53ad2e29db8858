// The library certify's options for tests of containment: quick, no size stages, counterexamples
// under the test's temporary directory, and a per-call limit that cuts a hang (a call that never
// answers) however busy the machine.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "attest/certify_api.h"

namespace attest {

inline api::CertifyOptions quick_api_options(const std::string& out, double hang_seconds) {
  api::CertifyOptions o;
  o.budget = "quick";
  o.size_stages = false;
  o.timeout_seconds = hang_seconds;
  o.out_dir = ::testing::TempDir() + out;
  return o;
}

}  // namespace attest
