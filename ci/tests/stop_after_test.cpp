// CertifyOptions::stop_after (attest mutants): the run ends at the named check's failure, and a
// run that never fails it goes on to the end.
#include <gtest/gtest.h>

#include "attest/mutants/mutants.h"
#include "certify.h"

namespace attest {
namespace {

CertifyOptions small_run(const std::string& out) {
  CertifyOptions options;
  options.property_cases = 5;
  options.seed = 3;
  options.progress = false;
  options.sized_stages = false;
  options.out_dir = ::testing::TempDir() + out;
  return options;
}

TEST(StopAfter, EndsTheRunAtTheNamedFailureOnly) {
  const auto mutant = find_mutant("causal_sees_next").make();
  Oracle oracle(64);
  CertifyOptions options = small_run("stop-after");
  const std::vector<CheckResult> all = certify_kernel(*mutant, oracle, options);

  options.stop_after = "zero_masked_weight";
  const std::vector<CheckResult> stopped = certify_kernel(*mutant, oracle, options);
  ASSERT_FALSE(stopped.empty());
  EXPECT_EQ(stopped.back().check, "zero_masked_weight");
  EXPECT_FALSE(stopped.back().passed());
  EXPECT_GT(all.size(), stopped.size() + 5);

  options.stop_after = "permutation_equivariance";  // the causal bug keeps it: nothing ends
  EXPECT_EQ(certify_kernel(*mutant, oracle, options).size(), all.size());
}

}  // namespace
}  // namespace attest
