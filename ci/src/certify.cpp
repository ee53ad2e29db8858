#include "certify.h"

#include <chrono>
#include <fmt/format.h>
#include <iostream>
#include <random>

#include "attest/problem_file.h"
#include "attest/safe_text.h"
#include "attest/property_driver.h"
#include "fuzz_input.h"
#include "fuzz_targets.h"

namespace attest {

double elapsed_seconds() {
  static const auto start = std::chrono::steady_clock::now();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

namespace {

// A failing deterministic case is saved like a property counterexample, so it replays too.
std::string save_case(const CheckPlan& plan, const NamedProblem& c, const Kernel& kernel, const Verdict& v,
                      const CertifyOptions& options) {
  const std::string path =
      fmt::format("{}/counterexamples/{}_{}__{}.json", options.out_dir, plan.check, c.name, file_stem(kernel.name()));
  try {
    const std::string source = options.kernel_source.empty() ? kernel.name() : options.kernel_source;
    save_problem_file(path, {c.problem, plan.property, source, options.isolated, v.detail, 0});
  } catch (const std::exception& e) {
    std::cerr << "attest: cannot save counterexample: " << e.what() << "\n";
    return {};
  }
  return path;
}

}  // namespace

std::vector<CheckPlan> deterministic_plans() {
  return {
      {"deterministic", "golden", golden_problems(), "matches_reference"},
      {"deterministic", "grid", grid_problems(), "matches_reference"},
  };
}

CheckResult run_plan(const CheckPlan& plan, const Kernel& kernel, Oracle& oracle, const CertifyOptions& options) {
  CheckResult r{kernel.name(), plan.stage, plan.check};
  const auto start = std::chrono::steady_clock::now();
  for (const NamedProblem& c : plan.problems) {
    if (deadline_passed(options.deadline)) {
      r.failures += r.failures == 0;
      r.first_failure = fmt::format("the whole-run deadline was reached after {} cases", r.cases);
      break;
    }
    if (!kernel.capabilities().supports(c.problem)) continue;
    const Verdict v = check_safely(find_property(plan.property), c.problem, kernel, oracle);
    if (!v.applicable) continue;
    ++r.cases;
    r.worst_utilisation = std::max(r.worst_utilisation, v.utilisation);
    PathStats& path = r.paths[kernel.last_path()];
    ++path.cases;
    path.worst_utilisation = std::max(path.worst_utilisation, v.utilisation);
    if (!v.passed && r.failures++ == 0) {
      r.first_failure = c.name + ": " + v.detail;
      r.counterexample_path = save_case(plan, c, kernel, v, options);
    }
    if (v.isolation_failure) {
      r.first_failure += " (check stopped: the kernel crashed or hung)";
      break;
    }
  }
  r.applicable = r.cases > 0;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (options.progress)
    std::cerr << fmt::format("[{:7.1f}s] {} {} {}: {} ({} cases, {:.2f} s)\n", elapsed_seconds(), kernel.name(),
                             plan.stage, plan.check, r.passed() ? "pass" : "FAIL", r.cases, r.seconds);
  return r;
}

std::vector<CheckResult> run_property_stage(const Kernel& kernel, const CertifyOptions& options) {
  std::vector<CheckResult> results;
  for (const PropertyInfo& property : property_catalogue()) {
    DriveOptions drive;
    drive.cases = options.property_cases;
    drive.seed = options.seed;
    drive.counterexample_dir = options.out_dir + "/counterexamples";
    drive.kernel_source = options.kernel_source;
    drive.isolated = options.isolated;
    drive.deadline = options.deadline;
    const DriveResult d = drive_property(property, kernel, drive);
    CheckResult r{kernel.name(), "property", property.name};
    r.applicable = d.applicable;
    r.cases = d.cases + (d.passed ? 0 : 1);
    r.failures = d.passed ? 0 : 1;
    r.worst_utilisation = d.passed ? d.worst_utilisation : std::max(d.worst_utilisation, d.failure_utilisation);
    r.first_failure = d.message;
    r.counterexample_path = d.counterexample_path;
    r.reproduce = d.reproduce;
    r.seed = d.seed;
    r.seconds = d.seconds;
    r.paths = d.paths;
    if (options.progress)
      std::cerr << fmt::format("[{:7.1f}s] {} property {}: {} ({} cases, seed {}, {:.2f} s)\n", elapsed_seconds(),
                               kernel.name(), property.name, !d.applicable ? "n/a" : d.passed ? "PASS" : "FAIL",
                               r.cases, d.seed, d.seconds);
    results.push_back(std::move(r));
  }
  return results;
}

std::vector<CheckResult> run_fuzz_stage(const Kernel& kernel, const CertifyOptions& options) {
  std::vector<CheckResult> results;
  Oracle oracle(4);
  for (fuzz::Target target : {fuzz::Target::kMaskLeak, fuzz::Target::kOverflow, fuzz::Target::kDecode,
                               fuzz::Target::kDifferential}) {
    CheckResult r{kernel.name(), "fuzz", fuzz::target_name(target)};
    r.seed = options.seed;
    if (target == fuzz::Target::kDecode && !kernel.capabilities().decode) {
      r.applicable = false;  // nothing to fuzz: the kernel declares no decode
      results.push_back(std::move(r));
      continue;
    }
    std::mt19937_64 rng(options.seed ^ static_cast<std::uint64_t>(target));
    const auto start = std::chrono::steady_clock::now();
    std::vector<std::uint8_t> input;
    while (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() < options.fuzz_seconds &&
           !deadline_passed(options.deadline)) {
      input.resize(rng() % 512);
      for (auto& byte : input) byte = static_cast<std::uint8_t>(rng());
      std::optional<fuzz::Violation> v;
      try {
        v = fuzz::run_target_on(target, input.data(), input.size(), kernel, oracle);
      } catch (const KernelLoadError&) {
        throw;
      } catch (const std::exception& e) {
        // A crash, hang or fault of an isolated kernel: fail, and keep the decoded problem.
        const fuzz::FuzzCase c = fuzz::decode_input(input.data(), input.size(), fuzz::Flavor::kGeneral);
        v = fuzz::Violation{kernel.name(), Verdict::fail("deterministic_and_in_bounds", e.what(), INFINITY), c.problem};
      }
      ++r.cases;
      if (!v) continue;
      r.failures = 1;
      r.first_failure = v->verdict.property + ": " + v->verdict.detail;
      r.worst_utilisation = v->verdict.utilisation;
      const std::string path = fmt::format("{}/counterexamples/{}__{}.json", options.out_dir, r.check, file_stem(kernel.name()));
      try {
        save_problem_file(path, {v->problem, v->verdict.property,
                                 options.kernel_source.empty() ? kernel.name() : options.kernel_source,
                                 options.isolated, v->verdict.detail, options.seed});
        r.counterexample_path = path;
      } catch (const std::exception&) {
      }
      break;
    }
    r.applicable = r.cases > 0;
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (options.progress)
      std::cerr << fmt::format("[{:7.1f}s] {} fuzz {}: {} ({} inputs, {:.1f} s)\n", elapsed_seconds(), kernel.name(),
                               r.check, r.passed() ? "pass" : "FAIL", r.cases, r.seconds);
    results.push_back(std::move(r));
  }
  return results;
}

std::vector<CheckResult> certify_kernel(const Kernel& kernel, Oracle& oracle, const CertifyOptions& options) {
  std::vector<CheckResult> results;
  for (const CheckPlan& plan : deterministic_plans()) results.push_back(run_plan(plan, kernel, oracle, options));
  if (options.property_cases > 0) {
    std::vector<CheckResult> properties = run_property_stage(kernel, options);
    results.insert(results.end(), properties.begin(), properties.end());
  }
  if (options.fuzz_seconds > 0) {
    std::vector<CheckResult> fuzzed = run_fuzz_stage(kernel, options);
    results.insert(results.end(), fuzzed.begin(), fuzzed.end());
  }
  return results;
}

std::string format_table(const std::vector<CheckResult>& results) {
  std::string out = fmt::format("{:<10} {:<14} {:<32} {:>7} {:>8} {:>12}\n", "kernel", "stage", "check", "cases",
                                "verdict", "err/bound");
  for (const CheckResult& r : results) {
    const char* verdict = !r.applicable ? "n/a" : r.passed() ? "PASS" : "FAIL";
    out += fmt::format("{:<10} {:<14} {:<32} {:>7} {:>8} {:>12.3g}\n", r.kernel, r.stage, r.check, r.cases, verdict,
                       r.worst_utilisation);
  }
  for (const CheckResult& r : results) {
    if (r.passed()) continue;
    out += fmt::format("\nFAIL {} {}: {} of {} cases; first: {}\n", r.kernel, r.check, r.failures, r.cases,
                       r.first_failure);
    if (!r.counterexample_path.empty())
      out += fmt::format("  counterexample: {}  (attest replay {})\n  seed {}; RapidCheck: RC_PARAMS=\"{}\"\n",
                         r.counterexample_path, r.counterexample_path, r.seed, r.reproduce);
  }
  return out;
}

}  // namespace attest
