// `--shard auto`: the shard a fleet engine gives this job in its environment, so that one
// command line serves every job of a GitHub Actions matrix, a GitLab `parallel:` job, a
// Kubernetes Indexed Job, a Slurm job array, a CircleCI or a Buildkite parallel job (docs/fleet.md).
#pragma once

#include <functional>
#include <optional>
#include <string>

namespace attest {

// A variable's value, or none when it is not set.
using EnvironmentLookup = std::function<std::optional<std::string>(const std::string& name)>;

// The process's own environment.
EnvironmentLookup process_environment();

struct ShardChoice {
  int index = 1;       // K, from 1
  int count = 1;       // N
  std::string source;  // where it came from, e.g. "GitLab CI_NODE_INDEX/CI_NODE_TOTAL"; "" for K/N
};

// The --shard flag's text: "K/N" as written; "auto" from the environment; "auto/N" from the
// environment with N declared (Kubernetes gives only an index). Every engine whose variables are
// set must name the same shard. Missing, partial, invalid or disagreeing values throw FlagError.
ShardChoice shard_from_flag(const std::string& flag, const std::string& text, int max_count,
                            const EnvironmentLookup& environment);

// The log line saying which shard --shard auto chose and from which variables.
std::string shard_origin(const std::string& command, const ShardChoice& choice);

}  // namespace attest
