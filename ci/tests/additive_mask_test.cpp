// Additive masking (masked keys scored, then -inf added) has an honest declaration: inputs =
// masked_scored. The same exact kernel is CERTIFIED with it and NOT CERTIFIED when it claims its
// masked keys may hold anything (a NaN key makes NaN + -inf = NaN); a kernel taking the row max
// before the mask is NOT CERTIFIED under masked_scored.
#include <gtest/gtest.h>

#include <algorithm>

#include "attest/kernels/builtin_kernels.h"
#include "quick_certification.h"

namespace attest {
namespace {

bool ran(const std::vector<CheckResult>& checks, const std::string& name) {
  return std::any_of(checks.begin(), checks.end(),
                     [&](const CheckResult& c) { return c.check == name && c.status() == CheckStatus::kPass; });
}

TEST(AdditiveMask, CertifiedUnderMaskedScored) {
  const auto kernel = make_additive_mask_kernel(InputDomain::kMaskedScored);
  ASSERT_TRUE(kernel->capabilities().declares(Feature::kBias));
  const auto checks = certify_quick(*kernel, "additive-scored");
  EXPECT_TRUE(blocking_checks(checks).empty()) << ::testing::PrintToString(blocking_checks(checks));
  EXPECT_TRUE(ran(checks, "masked_inputs_have_no_influence"));
  EXPECT_TRUE(ran(checks, "bias_minus_inf_equals_mask"));
}

TEST(AdditiveMask, NotCertifiedClaimingMaskedKeysMayHoldAnything) {
  const auto kernel = make_additive_mask_kernel(InputDomain::kMaskedMayBeNonFinite);
  const auto names = blocking_checks(certify_quick(*kernel, "additive-nonfinite"));
  EXPECT_NE(std::find(names.begin(), names.end(), "masked_inputs_have_no_influence"), names.end())
      << ::testing::PrintToString(names);
}

TEST(AdditiveMask, MaxBeforeTheMaskIsNotCertifiedUnderMaskedScored) {
  const auto kernel = make_additive_mask_kernel(InputDomain::kMaskedScored, /*max_before_mask=*/true);
  const auto names = blocking_checks(certify_quick(*kernel, "additive-max-before"));
  EXPECT_NE(std::find(names.begin(), names.end(), "masked_inputs_have_no_influence"), names.end())
      << ::testing::PrintToString(names);
}

}  // namespace
}  // namespace attest
