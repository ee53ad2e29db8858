// CertifyOptions::stop_after (attest mutants): the run ends at the named check's failure, and a
// run that never fails it goes on to the end.
#include <gtest/gtest.h>

#include "attest/mutants.h"
#include "certify.h"

namespace attest {
namespace {

CertifyOptions small_run(const std::string& out) {
  CertifyOptions options;
  options.property_cases = 10;
  options.seed = 3;
  options.progress = false;
  options.sized_stages = false;
  options.out_dir = ::testing::TempDir() + out;
  return options;
}

TEST(StopAfter, EndsTheRunAtTheNamedFailure) {
  const auto mutant = find_mutant("causal_sees_next").make();
  Oracle oracle(64);
  CertifyOptions options = small_run("stop-after");
  options.stop_after = "zero_masked_weight";
  const std::vector<CheckResult> checks = certify_kernel(*mutant, oracle, options);
  ASSERT_FALSE(checks.empty());
  EXPECT_EQ(checks.back().check, "zero_masked_weight");
  EXPECT_FALSE(checks.back().passed());

  options.stop_after.clear();
  const std::vector<CheckResult> all = certify_kernel(*mutant, oracle, options);
  EXPECT_GT(all.size(), checks.size() + 5);
}

TEST(StopAfter, ACheckThatPassesEndsNothing) {
  const auto mutant = find_mutant("causal_sees_next").make();
  Oracle oracle(64);
  CertifyOptions options = small_run("stop-after-pass");
  options.stop_after = "permutation_equivariance";  // the causal bug keeps it
  const std::vector<CheckResult> checks = certify_kernel(*mutant, oracle, options);
  options.stop_after.clear();
  EXPECT_EQ(checks.size(), certify_kernel(*mutant, oracle, options).size());
}

}  // namespace
}  // namespace attest
