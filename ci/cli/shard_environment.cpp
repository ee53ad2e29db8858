#include "shard_environment.h"

#include <fmt/format.h>

#include <cstdlib>
#include <vector>

#include "flags.h"

namespace attest {
namespace {

// A shard index or count as an engine writes it: digits only, at most 9 of them.
std::optional<long long> whole_number(const std::string& text) {
  if (text.empty() || text.size() > 9 || text.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
  return std::stoll(text);
}

class EngineReader {
 public:
  EngineReader(const std::string& flag, int max_count, const EnvironmentLookup& environment)
      : flag_(flag), max_count_(max_count), environment_(environment) {}

  std::optional<std::string> get(const std::string& name) const { return environment_(name); }

  // The named variable, which must be set and a whole number.
  long long number(const std::string& engine, const std::string& name) const {
    const std::optional<std::string> text = get(name);
    if (!text) fail(fmt::format("{} is set but {} is not", engine, name));
    const std::optional<long long> n = whole_number(*text);
    if (!n) fail(fmt::format("{}={} is not a whole number", name, text->substr(0, 40)));
    return *n;
  }

  // A shard from 1-based K of N, checked against 1 <= K <= N <= max.
  ShardChoice shard(long long index, long long count, const std::string& source) const {
    if (count < 1 || count > max_count_)
      fail(fmt::format("{} gives a shard count of {}; it must be in [1, {}]", source, count, max_count_));
    if (index < 1 || index > count) fail(fmt::format("{} gives shard {} of {}", source, index, count));
    return {static_cast<int>(index), static_cast<int>(count), source};
  }

  [[noreturn]] void fail(const std::string& why) const { throw FlagError(fmt::format("{} auto: {}", flag_, why)); }

 private:
  std::string flag_;
  int max_count_;
  const EnvironmentLookup& environment_;
};

// ATTEST_SHARD="K/N", as a GitHub Actions matrix (or any CI) passes it.
std::optional<ShardChoice> attest_shard(const EngineReader& env) {
  const std::optional<std::string> text = env.get("ATTEST_SHARD");
  if (!text) return std::nullopt;
  const std::size_t slash = text->find('/');
  const std::optional<long long> k = whole_number(text->substr(0, slash));
  const std::optional<long long> n = slash == std::string::npos ? std::nullopt : whole_number(text->substr(slash + 1));
  if (!k || !n) env.fail(fmt::format("ATTEST_SHARD={} is not K/N", text->substr(0, 40)));
  return env.shard(*k, *n, "ATTEST_SHARD");
}

// GitLab `parallel: N`: CI_NODE_INDEX from 1. GitLab sets CI_NODE_TOTAL=1 in every job that is not
// parallel, so CI_NODE_TOTAL alone does not name a shard; CI_NODE_INDEX does.
std::optional<ShardChoice> gitlab_shard(const EngineReader& env) {
  if (!env.get("CI_NODE_INDEX")) return std::nullopt;
  const std::string engine = "GitLab CI_NODE_INDEX";
  return env.shard(env.number(engine, "CI_NODE_INDEX"), env.number(engine, "CI_NODE_TOTAL"),
                   "GitLab CI_NODE_INDEX/CI_NODE_TOTAL");
}

// A Kubernetes Indexed Job: JOB_COMPLETION_INDEX from 0; the pod is not told the completion count,
// so it is declared on the command line (--shard auto/N).
std::optional<ShardChoice> kubernetes_shard(const EngineReader& env, std::optional<long long> declared_count) {
  if (!env.get("JOB_COMPLETION_INDEX")) return std::nullopt;
  const long long index = env.number("Kubernetes", "JOB_COMPLETION_INDEX");
  if (!declared_count)
    env.fail(
        "Kubernetes gives JOB_COMPLETION_INDEX but not the count; declare it: --shard auto/N with N = "
        "the Job's completions");
  return env.shard(index + 1, *declared_count, "Kubernetes JOB_COMPLETION_INDEX");
}

// A Slurm job array: task ids run from SLURM_ARRAY_TASK_MIN (`--array=1-8` starts at 1, `--array=0-7`
// at 0) in steps of SLURM_ARRAY_TASK_STEP. Ids that are not such a range (`--array=1,4,9`) cannot be
// numbered as shards, and are refused.
std::optional<ShardChoice> slurm_shard(const EngineReader& env) {
  if (!env.get("SLURM_ARRAY_TASK_ID")) return std::nullopt;
  const std::string engine = "Slurm SLURM_ARRAY_TASK_ID";
  const long long id = env.number(engine, "SLURM_ARRAY_TASK_ID");
  const long long count = env.number(engine, "SLURM_ARRAY_TASK_COUNT");
  const long long min = env.number(engine, "SLURM_ARRAY_TASK_MIN");
  const long long step = env.get("SLURM_ARRAY_TASK_STEP") ? env.number(engine, "SLURM_ARRAY_TASK_STEP") : 1;
  if (step < 1) env.fail("SLURM_ARRAY_TASK_STEP=0 is not a step");
  if (env.get("SLURM_ARRAY_TASK_MAX")) {
    const long long max = env.number(engine, "SLURM_ARRAY_TASK_MAX");
    if (max != min + (count - 1) * step)
      env.fail(
          fmt::format("the Slurm array's ids are not a range ({} tasks from {} to {} in steps of {}); use "
                      "--array=A-B or A-B:S",
                      count, min, max, step));
  }
  if (id < min || (id - min) % step != 0)
    env.fail(fmt::format("SLURM_ARRAY_TASK_ID={} is not in the array from {} in steps of {}", id, min, step));
  return env.shard((id - min) / step + 1, count, "Slurm SLURM_ARRAY_TASK_ID/SLURM_ARRAY_TASK_COUNT");
}

// A zero-based index and a count, as CircleCI (`parallelism: N`) and Buildkite (`parallelism: N`)
// give them. CircleCI sets CIRCLE_NODE_INDEX=0 and CIRCLE_NODE_TOTAL=1 in every job that is not
// parallel, so a count of 1 names no shard there, as GitLab's CI_NODE_TOTAL alone does not.
std::optional<ShardChoice> zero_based_shard(const EngineReader& env, const std::string& engine,
                                            const std::string& index_name, const std::string& count_name) {
  if (!env.get(index_name)) return std::nullopt;
  const std::string what = engine + " " + index_name;
  const long long index = env.number(what, index_name);
  const long long count = env.number(what, count_name);
  if (count == 1 && index == 0) return std::nullopt;
  return env.shard(index + 1, count, fmt::format("{} {}/{}", engine, index_name, count_name));
}

}  // namespace

EnvironmentLookup process_environment() {
  return [](const std::string& name) -> std::optional<std::string> {
    const char* value = std::getenv(name.c_str());
    if (value == nullptr) return std::nullopt;
    return std::string(value);
  };
}

ShardChoice shard_from_flag(const std::string& flag, const std::string& text, int max_count,
                            const EnvironmentLookup& environment) {
  if (text != "auto" && !text.starts_with("auto/")) {
    const auto [index, count] = parse_shard(flag, text, max_count);
    return {index, count, ""};
  }
  const EngineReader env(flag, max_count, environment);
  std::optional<long long> declared_count;
  if (text != "auto") {
    declared_count = whole_number(text.substr(5));
    if (!declared_count || *declared_count < 1 || *declared_count > max_count)
      reject_flag(flag, text, fmt::format("K/N, auto or auto/N with 1 <= N <= {}", max_count));
  }
  std::vector<ShardChoice> found;
  for (const std::optional<ShardChoice>& s :
       {attest_shard(env), gitlab_shard(env), kubernetes_shard(env, declared_count), slurm_shard(env),
        zero_based_shard(env, "CircleCI", "CIRCLE_NODE_INDEX", "CIRCLE_NODE_TOTAL"),
        zero_based_shard(env, "Buildkite", "BUILDKITE_PARALLEL_JOB", "BUILDKITE_PARALLEL_JOB_COUNT")})
    if (s) found.push_back(*s);
  if (found.empty())
    env.fail(
        "no shard in the environment (ATTEST_SHARD, CI_NODE_INDEX/CI_NODE_TOTAL, JOB_COMPLETION_INDEX, "
        "SLURM_ARRAY_TASK_ID/SLURM_ARRAY_TASK_COUNT, CIRCLE_NODE_INDEX/CIRCLE_NODE_TOTAL or "
        "BUILDKITE_PARALLEL_JOB/BUILDKITE_PARALLEL_JOB_COUNT)");
  for (const ShardChoice& s : found) {
    if (s.index != found[0].index || s.count != found[0].count)
      env.fail(fmt::format("ambiguous: {} gives shard {}/{}, {} gives {}/{}", found[0].source, found[0].index,
                           found[0].count, s.source, s.index, s.count));
    if (declared_count && s.count != *declared_count)
      env.fail(fmt::format("{} gives {} shards, {} declares {}", s.source, s.count, text, *declared_count));
  }
  return found[0];
}

std::string shard_origin(const std::string& command, const ShardChoice& choice) {
  return fmt::format("attest {}: --shard auto: shard {}/{} from {}\n", command, choice.index, choice.count,
                     choice.source);
}

}  // namespace attest
