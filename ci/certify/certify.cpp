#include "certify.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <iostream>
#include <random>

#include "attest/properties/case_id.h"
#include "attest/properties/declaration_fit.h"
#include "attest/properties/problem_file.h"
#include "attest/properties/property_driver.h"
#include "attest/properties/safe_text.h"
#include "frozen_declaration.h"
#include "fuzz_input.h"
#include "fuzz_targets.h"
#include "progress.h"

namespace attest {

double elapsed_seconds() {
  static const auto start = std::chrono::steady_clock::now();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

namespace {

// A failing deterministic case is saved like a property counterexample, so it replays too.
std::string save_case(const CheckPlan& plan, const NamedProblem& c, const Kernel& kernel, const Verdict& v,
                      const CertifyOptions& options) {
  const std::string path = counterexample_path(options.out_dir + "/counterexamples", plan.check + "_" + c.name,
                                               kernel.name(), v.witness ? *v.witness : c.problem);
  try {
    const std::string source = options.kernel_source.empty() ? kernel.name() : options.kernel_source;
    save_problem_file(path, {v.witness ? *v.witness : c.problem, v.witness ? v.witness_property : plan.property, source,
                             options.isolated, v.detail, 0});
  } catch (const std::exception& e) {
    std::cerr << "attest: cannot save counterexample: " << e.what() << "\n";
    return {};
  }
  return path;
}

}  // namespace

bool takes_check(const CertifyOptions& options, const std::string& check) {
  if (options.checks && !options.checks->selects(check)) return false;  // takes no shard position
  return !options.shard || options.shard->take();
}

const char* to_string(CheckStatus s) {
  switch (s) {
    case CheckStatus::kPass:
      return "pass";
    case CheckStatus::kFail:
      return "fail";
    case CheckStatus::kNotCovered:
      return "not covered";
    case CheckStatus::kInsufficient:
      return "insufficient";
  }
  return "?";
}

CheckStatus CheckResult::status() const {
  if (failures) return CheckStatus::kFail;
  if (!not_covered.empty()) return CheckStatus::kNotCovered;
  if (effective < floor || !path_shortfall.empty() || short_of_required()) return CheckStatus::kInsufficient;
  return CheckStatus::kPass;
}

bool CheckResult::record_case(const Verdict& v, const Problem& p, const std::string& path) {
  if (!v.applicable || !v.exercised) {
    ++skipped[v.detail];
    return false;
  }
  ++effective;
  for (const std::string& f : features_used_by(p).names()) ++feature_cases[f];
  longest_q = std::max(longest_q, p.shape.q_len);
  longest_k = std::max(longest_k, p.shape.k_len);
  worst_utilisation = std::max(worst_utilisation, v.utilisation);
  PathStats& stats = path_entry(paths, path);
  ++stats.cases;
  stats.worst_utilisation = std::max(stats.worst_utilisation, v.utilisation);
  return true;
}

std::vector<CheckPlan> deterministic_plans() {
  return {
      {"deterministic", "golden", golden_problems(), "matches_reference"},
      {"deterministic", "grid", grid_problems(), "matches_reference"},
  };
}

CheckResult run_plan(const CheckPlan& plan, const Kernel& kernel, Oracle& oracle, const CertifyOptions& options) {
  CheckResult r{kernel.name(), plan.stage, plan.check};
  const auto start = std::chrono::steady_clock::now();
  const Capabilities caps = kernel.capabilities();
  const PropertyInfo& property = find_property(plan.property);
  r.not_covered = not_covered_because(property, caps);
  for (const NamedProblem& named : plan.problems) {
    if (!r.not_covered.empty()) break;
    if (deadline_passed(options.deadline)) {
      r.failures += r.failures == 0;
      r.first_failure = fmt::format("the whole-run deadline was reached after {} cases", r.cases);
      break;
    }
    ++r.cases;
    // Each case as the kernel declared it can take it (its features, widths, sizes, causality).
    std::string why;
    const std::optional<Problem> fitted = fit_to_declaration(named.problem, caps, &why);
    if (!fitted) {
      ++r.skipped["cannot be brought inside the declaration: " + why];
      continue;
    }
    const NamedProblem c{named.name, *fitted};
    const Verdict v = check_safely(property, c.problem, kernel, oracle);
    if (!r.record_case(v, c.problem, kernel.last_path())) continue;
    if (!v.passed && r.failures++ == 0) {
      r.first_failure = c.name + ": " + v.detail;
      r.failing_case = case_id(v.witness ? *v.witness : c.problem);
      r.counterexample_path = save_case(plan, c, kernel, v, options);
    }
    if (v.isolation_failure) {
      r.first_failure += " (check stopped: the kernel crashed or hung)";
      break;
    }
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  report_check(options, r, fmt::format("{} of {} cases effective, {:.2f} s", r.effective, r.cases, r.seconds));
  return r;
}

CheckResult check_property(const PropertyInfo& property, const Kernel& kernel, const PathShapes& forward_paths,
                           const CertifyOptions& options, const LearnedPaths* learned) {
  // The size ladder discovers the forward's paths. A backward check's evidence lands on the paths
  // its backward calls report, and owes the forward's nothing (a forward reporting two paths left
  // every backward check INSUFFICIENT).
  const PathShapes none;
  // A check that calls no forward (merge_equals_whole) has no forward path to cover.
  const PathShapes& discovered =
      property.required.contains(Feature::kBackward) || !property.forward_paths ? none : forward_paths;
  DriveOptions drive;
  drive.cases = options.property_cases;
  drive.seed = options.seed;
  drive.counterexample_dir = options.out_dir + "/counterexamples";
  drive.kernel_source = options.kernel_source;
  drive.isolated = options.isolated;
  drive.deadline = options.deadline;
  drive.oracle = options.oracle;
  drive.shrink = options.shrink && (options.shrink_only.empty() || options.shrink_only == property.name);
  const int strength = coverage_strength(options.property_cases, property.name);
  drive.target_strength = std::max(2, strength);
  const DriveResult d = drive_property(property, kernel, drive);
  CheckResult r{kernel.name(), "property", property.name};
  r.not_covered = d.not_covered;
  r.cases = d.asked;
  r.effective = d.effective;
  r.floor = d.applicable ? effective_floor(d.asked) : 0;
  r.skipped = d.skipped;
  r.feature_cases = d.feature_cases;
  r.shape_classes = d.class_cases;
  r.longest_q = d.longest_q, r.longest_k = d.longest_k;
  r.failures = d.passed ? 0 : 1;
  r.worst_utilisation = d.passed ? d.worst_utilisation : std::max(d.worst_utilisation, d.failure_utilisation);
  r.first_failure = d.message;
  r.counterexample_path = d.counterexample_path;
  r.counterexample = d.counterexample;
  r.reproduce = d.reproduce;
  r.seed = d.seed;
  r.seconds = d.seconds;
  r.paths = d.paths;
  r.probes_redone = d.probes_redone, r.probes_kept_off_path = d.probes_kept_off_path;
  if (discovered.size() > 1) top_up_paths(r, property, kernel, drive, discovered);
  // Every class of the large shape axes, whatever the draw gave: 1 case each at quick, 2 at default, 4 at thorough.
  top_up_classes(r, property, kernel, drive, options.property_cases <= 10 ? 1 : options.property_cases >= 1000 ? 4 : 2);
  top_up_targets(r, property, kernel, drive, discovered, strength, learned);
  record_path_shortfall(r, discovered);
  if (r.counterexample) r.failing_case = case_id(*r.counterexample);
  report_check(options, r,
               fmt::format("{} of {} cases effective{}, {:.2f} s", r.effective, r.cases,
                           d.seed ? fmt::format(", seed {}", d.seed) : "", d.seconds));
  return r;
}

namespace {
// Whether options.stop_after has failed among the results so far.
bool settled(const std::vector<CheckResult>& results, const CertifyOptions& options) {
  return !options.stop_after.empty() && std::any_of(results.begin(), results.end(), [&](const CheckResult& r) {
    return r.check == options.stop_after && !r.passed();
  });
}
}  // namespace

std::vector<CheckResult> run_property_stage(const Kernel& kernel, const CertifyOptions& options) {
  std::vector<CheckResult> results;
  // Path discovery costs forward calls: none when --check chose no property.
  const auto& catalogue = property_catalogue();
  if (options.checks && std::none_of(catalogue.begin(), catalogue.end(),
                                     [&](const PropertyInfo& p) { return options.checks->selects(p.name); }))
    return results;
  // Paths the kernel takes across the ladder: each needs evidence in every property that reaches it.
  PathShapes discovered = discover_paths(kernel, options);
  if (discovered.size() > kMaxPaths) {
    std::cerr << fmt::format(
        "attest: {} reported {} different internal path names across the size ladder (more than "
        "{}): a path name must name a code path, not a call; no per-path top-ups\n",
        safe_text(kernel.name(), 64), discovered.size(), kMaxPaths);
    discovered.clear();
  }
  LearnedPaths learned = learn_path_predicates(kernel, discovered, options);
  for (const PropertyInfo& property : property_catalogue()) {
    if (!takes_check(options, property.name)) continue;
    CheckResult r = check_property(property, kernel, discovered, options, &learned);
    results.push_back(std::move(r));
    if (settled(results, options)) break;
  }
  return results;
}

std::string fuzz_not_covered(const fuzz::TargetInfo& target, const Capabilities& caps) {
  if (const FeatureSet missing = target.required.minus(caps.features); !missing.empty())
    return "the kernel does not declare " + missing.joined();
  if (!caps.forward() && !target.required.contains(Feature::kDecode))
    return "the kernel is decode-only (this target calls forward)";
  return "";
}

std::vector<CheckResult> run_fuzz_stage(const Kernel& kernel, const CertifyOptions& options) {
  std::vector<CheckResult> results;
  Oracle oracle(4);
  const Capabilities caps = kernel.capabilities();
  for (const fuzz::TargetInfo& target : fuzz::target_table()) {
    if (!takes_check(options, target.name)) continue;
    CheckResult r{kernel.name(), "fuzz", target.name};
    r.seed = options.seed;
    r.not_covered = fuzz_not_covered(target, caps);
    if (!r.not_covered.empty()) {
      results.push_back(std::move(r));
      continue;
    }
    std::mt19937_64 rng(options.seed ^ static_cast<std::uint64_t>(target.target));
    const auto start = std::chrono::steady_clock::now();
    std::vector<std::uint8_t> input;
    while (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() < options.fuzz_seconds &&
           !deadline_passed(options.deadline)) {
      input.resize(rng() % 512);
      for (auto& byte : input) byte = static_cast<std::uint8_t>(rng());
      fuzz::Outcome outcome;
      try {
        outcome = fuzz::evaluate_target(target.target, input.data(), input.size(), kernel, oracle);
      } catch (const KernelLoadError&) {
        throw;
      } catch (const std::exception& e) {
        // A crash, hang or fault of an isolated kernel: fail, and keep the input as this target decodes it.
        const fuzz::FuzzCase c = fuzz::decode_input(input.data(), input.size(), target.flavor, fuzz::reach_of(caps));
        outcome.violation =
            fuzz::Violation{kernel.name(), Verdict::fail("deterministic_and_in_bounds", e.what(), INFINITY),
                            fit_to_declaration(c.problem, caps).value_or(c.problem)};
      }
      ++r.cases;
      if (!outcome.violation) {
        if (outcome.exercised)
          ++r.effective;
        else
          ++r.skipped[outcome.skipped];
        continue;
      }
      ++r.effective;
      const fuzz::Violation& v = *outcome.violation;
      r.failures = 1;
      r.first_failure = v.verdict.property + ": " + v.verdict.detail;
      r.failing_case = case_id(v.problem);
      r.worst_utilisation = v.verdict.utilisation;
      const std::string path =
          counterexample_path(options.out_dir + "/counterexamples", r.check, kernel.name(), v.problem);
      try {
        save_problem_file(
            path, {v.problem, v.verdict.property, options.kernel_source.empty() ? kernel.name() : options.kernel_source,
                   options.isolated, v.verdict.detail, options.seed});
        r.counterexample_path = path;
      } catch (const std::exception&) {
      }
      break;
    }
    r.floor = effective_floor(r.cases);
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    report_check(options, r, fmt::format("{} of {} inputs effective, {:.1f} s", r.effective, r.cases, r.seconds));
    results.push_back(std::move(r));
  }
  return results;
}

std::vector<CheckResult> certify_kernel(const Kernel& given, Oracle& oracle, const CertifyOptions& options) {
  const FrozenDeclaration kernel(given);  // one declaration for the whole run
  std::vector<CheckResult> results;
  for (const CheckPlan& plan : deterministic_plans()) {
    if (takes_check(options, plan.check)) results.push_back(run_plan(plan, kernel, oracle, options));
    if (settled(results, options)) return results;
  }
  if (!kernel.capabilities().paths.empty() && kernel.capabilities().forward() &&
      takes_check(options, kDeclaredPathsCheck))
    results.push_back(check_declared_paths(kernel, options));
  if (settled(results, options)) return results;
  if (options.sized_stages) {
    std::vector<CheckResult> sized = run_sized_stages(kernel, oracle, options);
    results.insert(results.end(), sized.begin(), sized.end());
    if (settled(results, options)) return results;
  }
  if (options.property_cases > 0) {
    // The properties share certify's references (one seed draws the same problems for many).
    CertifyOptions shared = options;
    shared.oracle = &oracle;
    std::vector<CheckResult> properties = run_property_stage(kernel, shared);
    results.insert(results.end(), properties.begin(), properties.end());
    if (settled(results, options)) return results;
  }
  if (options.fuzz_seconds > 0) {
    std::vector<CheckResult> fuzzed = run_fuzz_stage(kernel, options);
    results.insert(results.end(), fuzzed.begin(), fuzzed.end());
  }
  return results;
}

}  // namespace attest
