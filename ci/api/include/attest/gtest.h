// GoogleTest helpers for attest (the installed package): EXPECT_CERTIFIED / ASSERT_CERTIFIED
// certify a kernel (an attest::Kernel, a plugin path, "cmd:PROGRAM" or a built-in name) and, when
// it is not certified, print the verdict, the table of checks and each counterexample's replay
// command.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "attest/certify_api.h"

namespace attest::testing {

template <typename KernelRef>
::testing::AssertionResult IsCertified(const char* kernel_text, const char*, const KernelRef& kernel,
                                       const api::CertifyOptions& options) {
  const api::Certificate c = api::certify(kernel, options);
  if (c.certified) return ::testing::AssertionSuccess() << c.verdict;
  ::testing::AssertionResult r = ::testing::AssertionFailure();
  r << kernel_text << " is " << c.verdict << "\n" << c.report;
  for (const api::Check* check : c.failed())
    if (!check->replay.empty()) r << "\n  replay " << check->name << ": " << check->replay;
  return r;
}

}  // namespace attest::testing

#define EXPECT_CERTIFIED(kernel, options) EXPECT_PRED_FORMAT2(::attest::testing::IsCertified, kernel, options)
#define ASSERT_CERTIFIED(kernel, options) ASSERT_PRED_FORMAT2(::attest::testing::IsCertified, kernel, options)
