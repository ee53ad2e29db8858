// --shard auto: each fleet engine's variables name the shard; partial, invalid, missing or
// disagreeing values are refused with one line naming the variables.
#include "shard_environment.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

#include "flags.h"

namespace attest {
namespace {

using Variables = std::map<std::string, std::string>;

ShardChoice choose(const std::string& text, const Variables& variables) {
  return shard_from_flag("--shard", text, 1000, [&](const std::string& name) -> std::optional<std::string> {
    const auto it = variables.find(name);
    if (it == variables.end()) return std::nullopt;
    return it->second;
  });
}

// The refusal's text; fails the test when the choice is accepted.
std::string refusal(const std::string& text, const Variables& variables) {
  try {
    const ShardChoice c = choose(text, variables);
    ADD_FAILURE() << text << " accepted as " << c.index << "/" << c.count << " from " << c.source;
  } catch (const FlagError& e) {
    EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << e.what();
    return e.what();
  }
  return "";
}

void expect_shard(const ShardChoice& c, int index, int count, const std::string& source_part) {
  EXPECT_EQ(c.index, index);
  EXPECT_EQ(c.count, count);
  EXPECT_NE(c.source.find(source_part), std::string::npos) << c.source;
}

TEST(ShardEnvironment, ExplicitKOfNIgnoresTheEnvironment) {
  const ShardChoice c = choose("2/3", {{"ATTEST_SHARD", "1/5"}});
  EXPECT_EQ(c.index, 2);
  EXPECT_EQ(c.count, 3);
  EXPECT_EQ(c.source, "");
}

TEST(ShardEnvironment, AttestShardIsKOfN) {
  expect_shard(choose("auto", {{"ATTEST_SHARD", "3/4"}}), 3, 4, "ATTEST_SHARD");
  EXPECT_NE(refusal("auto", {{"ATTEST_SHARD", "5/4"}}).find("shard 5 of 4"), std::string::npos);
  EXPECT_NE(refusal("auto", {{"ATTEST_SHARD", "3"}}).find("not K/N"), std::string::npos);
  EXPECT_NE(refusal("auto", {{"ATTEST_SHARD", "0/4"}}).find("shard 0 of 4"), std::string::npos);
  EXPECT_NE(refusal("auto", {{"ATTEST_SHARD", "1/1001"}}).find("[1, 1000]"), std::string::npos);
}

TEST(ShardEnvironment, GitLabNodeIndexIsOneBased) {
  expect_shard(choose("auto", {{"CI_NODE_INDEX", "1"}, {"CI_NODE_TOTAL", "3"}}), 1, 3, "GitLab");
  expect_shard(choose("auto", {{"CI_NODE_INDEX", "3"}, {"CI_NODE_TOTAL", "3"}}), 3, 3, "GitLab");
  EXPECT_NE(refusal("auto", {{"CI_NODE_INDEX", "0"}, {"CI_NODE_TOTAL", "3"}}).find("shard 0 of 3"), std::string::npos);
  EXPECT_NE(refusal("auto", {{"CI_NODE_INDEX", "2"}}).find("CI_NODE_TOTAL is not"), std::string::npos);
  EXPECT_NE(refusal("auto", {{"CI_NODE_INDEX", "x"}, {"CI_NODE_TOTAL", "3"}}).find("not a whole number"),
            std::string::npos);
}

TEST(ShardEnvironment, GitLabTotalAloneIsNoShard) {  // GitLab sets CI_NODE_TOTAL=1 in every job
  expect_shard(choose("auto", {{"CI_NODE_TOTAL", "1"}, {"ATTEST_SHARD", "2/2"}}), 2, 2, "ATTEST_SHARD");
  EXPECT_NE(refusal("auto", {{"CI_NODE_TOTAL", "1"}}).find("no shard in the environment"), std::string::npos);
}

TEST(ShardEnvironment, KubernetesIndexIsZeroBasedWithTheCountDeclared) {
  expect_shard(choose("auto/4", {{"JOB_COMPLETION_INDEX", "0"}}), 1, 4, "Kubernetes");
  expect_shard(choose("auto/4", {{"JOB_COMPLETION_INDEX", "3"}}), 4, 4, "Kubernetes");
  EXPECT_NE(refusal("auto/4", {{"JOB_COMPLETION_INDEX", "4"}}).find("shard 5 of 4"), std::string::npos);
  EXPECT_NE(refusal("auto", {{"JOB_COMPLETION_INDEX", "0"}}).find("--shard auto/N"), std::string::npos);
  EXPECT_NE(refusal("auto/4", {{"JOB_COMPLETION_INDEX", "-1"}}).find("not a whole number"), std::string::npos);
}

TEST(ShardEnvironment, SlurmIdsRunFromTheArraysMinimum) {
  const Variables from_one = {{"SLURM_ARRAY_TASK_ID", "1"},
                              {"SLURM_ARRAY_TASK_COUNT", "4"},
                              {"SLURM_ARRAY_TASK_MIN", "1"},
                              {"SLURM_ARRAY_TASK_MAX", "4"}};
  expect_shard(choose("auto", from_one), 1, 4, "Slurm");
  const Variables from_zero = {{"SLURM_ARRAY_TASK_ID", "3"},
                               {"SLURM_ARRAY_TASK_COUNT", "4"},
                               {"SLURM_ARRAY_TASK_MIN", "0"},
                               {"SLURM_ARRAY_TASK_MAX", "3"}};
  expect_shard(choose("auto", from_zero), 4, 4, "Slurm");
  const Variables stepped = {{"SLURM_ARRAY_TASK_ID", "14"},
                             {"SLURM_ARRAY_TASK_COUNT", "3"},
                             {"SLURM_ARRAY_TASK_MIN", "10"},
                             {"SLURM_ARRAY_TASK_MAX", "18"},
                             {"SLURM_ARRAY_TASK_STEP", "4"}};
  expect_shard(choose("auto", stepped), 2, 3, "Slurm");
}

TEST(ShardEnvironment, SlurmIdsThatAreNoRangeAreRefused) {
  const Variables list = {{"SLURM_ARRAY_TASK_ID", "4"},
                          {"SLURM_ARRAY_TASK_COUNT", "3"},
                          {"SLURM_ARRAY_TASK_MIN", "1"},
                          {"SLURM_ARRAY_TASK_MAX", "9"}};  // --array=1,4,9
  EXPECT_NE(refusal("auto", list).find("not a range"), std::string::npos);
  EXPECT_NE(
      refusal("auto", {{"SLURM_ARRAY_TASK_ID", "4"}, {"SLURM_ARRAY_TASK_COUNT", "3"}}).find("SLURM_ARRAY_TASK_MIN"),
      std::string::npos);
  EXPECT_NE(
      refusal("auto", {{"SLURM_ARRAY_TASK_ID", "0"}, {"SLURM_ARRAY_TASK_COUNT", "3"}, {"SLURM_ARRAY_TASK_MIN", "1"}})
          .find("not in the array"),
      std::string::npos);
}

TEST(ShardEnvironment, CircleCINodeIndexIsZeroBased) {
  expect_shard(choose("auto", {{"CIRCLE_NODE_INDEX", "0"}, {"CIRCLE_NODE_TOTAL", "4"}}), 1, 4, "CircleCI");
  expect_shard(choose("auto", {{"CIRCLE_NODE_INDEX", "3"}, {"CIRCLE_NODE_TOTAL", "4"}}), 4, 4, "CircleCI");
  EXPECT_NE(refusal("auto", {{"CIRCLE_NODE_INDEX", "4"}, {"CIRCLE_NODE_TOTAL", "4"}}).find("shard 5 of 4"),
            std::string::npos);
  EXPECT_NE(refusal("auto", {{"CIRCLE_NODE_INDEX", "1"}}).find("CIRCLE_NODE_TOTAL is not"), std::string::npos);
  EXPECT_NE(refusal("auto", {{"CIRCLE_NODE_INDEX", "1"}, {"CIRCLE_NODE_TOTAL", "4 "}}).find("not a whole number"),
            std::string::npos);
}

TEST(ShardEnvironment, CircleCIJobThatIsNotParallelIsNoShard) {  // CircleCI sets 0 of 1 in every job
  expect_shard(choose("auto", {{"CIRCLE_NODE_INDEX", "0"}, {"CIRCLE_NODE_TOTAL", "1"}, {"ATTEST_SHARD", "2/3"}}), 2, 3,
               "ATTEST_SHARD");
  EXPECT_NE(refusal("auto", {{"CIRCLE_NODE_INDEX", "0"}, {"CIRCLE_NODE_TOTAL", "1"}}).find("no shard"),
            std::string::npos);
}

TEST(ShardEnvironment, BuildkiteParallelJobIsZeroBased) {
  const Variables second = {{"BUILDKITE_PARALLEL_JOB", "1"}, {"BUILDKITE_PARALLEL_JOB_COUNT", "3"}};
  expect_shard(choose("auto", second), 2, 3, "Buildkite");
  expect_shard(choose("auto/3", second), 2, 3, "Buildkite");
  EXPECT_NE(refusal("auto/4", second).find("declares 4"), std::string::npos);
  EXPECT_NE(refusal("auto", {{"BUILDKITE_PARALLEL_JOB", "0"}}).find("BUILDKITE_PARALLEL_JOB_COUNT is not"),
            std::string::npos);
  EXPECT_NE(refusal("auto", {{"BUILDKITE_PARALLEL_JOB", "0"}, {"BUILDKITE_PARALLEL_JOB_COUNT", "0"}}).find("[1, 1000]"),
            std::string::npos);
}

TEST(ShardEnvironment, EnginesThatAgreeAreOneShard) {
  expect_shard(choose("auto", {{"ATTEST_SHARD", "2/3"}, {"CI_NODE_INDEX", "2"}, {"CI_NODE_TOTAL", "3"}}), 2, 3,
               "ATTEST_SHARD");
}

TEST(ShardEnvironment, EnginesThatDisagreeAreAmbiguous) {
  const std::string why = refusal("auto", {{"ATTEST_SHARD", "1/3"}, {"CI_NODE_INDEX", "2"}, {"CI_NODE_TOTAL", "3"}});
  EXPECT_NE(why.find("ambiguous"), std::string::npos) << why;
  EXPECT_NE(why.find("ATTEST_SHARD gives shard 1/3"), std::string::npos) << why;
  EXPECT_NE(why.find("GitLab"), std::string::npos) << why;
  const std::string two = refusal("auto", {{"CIRCLE_NODE_INDEX", "0"},
                                           {"CIRCLE_NODE_TOTAL", "2"},
                                           {"BUILDKITE_PARALLEL_JOB", "1"},
                                           {"BUILDKITE_PARALLEL_JOB_COUNT", "2"}});
  EXPECT_NE(two.find("CircleCI CIRCLE_NODE_INDEX/CIRCLE_NODE_TOTAL gives shard 1/2, Buildkite"), std::string::npos)
      << two;
  // A declared count the environment contradicts.
  EXPECT_NE(refusal("auto/4", {{"ATTEST_SHARD", "1/3"}}).find("declares 4"), std::string::npos);
}

TEST(ShardEnvironment, NothingOrAMalformedFlagIsRefused) {
  EXPECT_NE(refusal("auto", {}).find("no shard in the environment"), std::string::npos);
  EXPECT_NE(refusal("auto/0", {{"JOB_COMPLETION_INDEX", "0"}}).find("auto/N"), std::string::npos);
  EXPECT_NE(refusal("auto/x", {}).find("auto/N"), std::string::npos);
  EXPECT_NE(refusal("automatic", {}).find("K/N"), std::string::npos);
}

}  // namespace
}  // namespace attest
