#include "attest/properties/property_driver.h"

#include <fmt/format.h>
#include <rapidcheck.h>
#include <rapidcheck/detail/TestListenerAdapter.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <iostream>

#include "attest/properties/case_id.h"
#include "attest/properties/coverage_model.h"
#include "attest/properties/generators.h"
#include "attest/properties/harness.h"
#include "attest/properties/problem_file.h"
#include "attest/properties/safe_text.h"
#include "attest/properties/session_forward.h"

namespace attest {

bool property_applies(const PropertyInfo& property, const Kernel& kernel) {
  return not_covered_because(property, kernel.capabilities()).empty();
}

long effective_floor(long asked) { return std::max(1L, (asked + 3) / 4); }

int scaled_cases(int base) {
  const char* scale = std::getenv("ATTEST_PROPERTY_SCALE");
  const double factor = scale ? std::atof(scale) : 1.0;
  return std::max(1, static_cast<int>(base * (factor > 0 ? factor : 1.0)));
}

namespace {

// The internal path of a case: the one its own problem takes (the check's call on it, or one more
// call when the check ran probes only); `left` when no call of the check was served by it.
struct CasePath {
  std::string path;
  bool left = false;
  std::string other;
};

CasePath case_path(const PathLog& log, const Problem& p, const Kernel& kernel) {
  const std::vector<PathLog::Call> calls = log.calls();
  if (calls.empty()) return {kernel.last_path()};  // decode sessions only: the kernel's word
  if (std::all_of(calls.begin(), calls.end(), [](const PathLog::Call& c) { return c.path == kBackwardPath; }))
    return {kBackwardPath};  // a backward check: its calls are the case, whatever it rewrote
  CasePath where;
  const auto own = std::find_if(calls.begin(), calls.end(), [&](const PathLog::Call& c) { return c.problem == &p; });
  if (own != calls.end()) return {own->path};
  try {
    where.path = run_guarded(kernel, p).path;
  } catch (const std::exception&) {
    return {calls.front().path};  // the check's verdict stands; the path is its first call's
  }
  where.left = std::none_of(calls.begin(), calls.end(), [&](const PathLog::Call& c) { return c.path == where.path; });
  if (where.left) where.other = calls.front().path;
  return where;
}

// Where a run keeps its failing problem: each failure overwrites the file, so when shrinking ends
// it holds the smallest one, and settle() names it after that case.
struct CounterexampleFile {
  std::string path;
  std::string save_error;  // why the last failure's problem could not be written ("": it was)
  bool saved = false;      // a failure's problem was written (an exception that is no verdict writes none)
  Problem last;            // the problem the file holds

  void save(const ProblemFile& file) {
    try {
      save_problem_file(path, file);
      save_error.clear();
      saved = true;
      last = file.problem;
    } catch (const std::exception& e) {
      save_error = e.what();  // the report then names no file: none holds this failure
    }
  }

  // PATH without ".json", then "__CASE.json" (case_id.h); the unrenamed file if the rename fails.
  std::string settle() const {
    const std::string named = path.substr(0, path.size() - 5) + "__" + case_file_stem(last) + ".json";
    std::error_code error;
    std::filesystem::rename(path, named, error);
    return error ? path : named;
  }
};

// Counterexamples an earlier run left for this property and kernel: a stale one would mislead.
void remove_stale_counterexamples(const std::string& path) {
  const std::filesystem::path base(path);
  const std::string prefix = base.stem().string() + "__";
  std::error_code error;
  std::filesystem::remove(base, error);
  std::filesystem::directory_iterator entries(base.parent_path().empty() ? "." : base.parent_path(), error);
  if (error) return;
  for (const auto& entry : entries) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(prefix, 0) == 0 && entry.path().extension() == ".json") std::filesystem::remove(entry.path(), error);
  }
}

// One case's evidence, counted once (the runs after the first failure are shrinking, not cases).
void count_case(DriveResult& result, const Verdict& v, const Problem& p, const CasePath& where,
                const std::vector<std::string>& classes, const std::string& target, int target_strength) {
  ++result.asked;
  if (v.exercised && v.applicable) {
    ++result.effective;
    for (const std::string& f : features_used_by(p).names()) ++result.feature_cases[f];
    for (const std::string& c : shape_classes_of(p)) ++result.class_cases[c];
    result.longest_q = std::max({result.longest_q, p.shape.q_len, v.ran_q_len});
    result.longest_k = std::max({result.longest_k, p.shape.k_len, v.ran_k_len});
  } else {
    ++result.skipped[v.detail.empty() ? "exercised nothing" : v.detail];
    if (!target.empty()) result.targets_skipped[target] = v.detail.empty() ? "exercised nothing" : v.detail;
  }
  if (!v.applicable || !(v.exercised || !v.passed)) return;  // evidence only: no vacuous case
  // A case kept off its path is evidence for the path its probes took, not for its own.
  PathStats& stats = path_entry(result.paths, where.left ? where.other : where.path);
  ++stats.cases;
  stats.worst_utilisation = std::max(stats.worst_utilisation, v.utilisation);
  if (v.exercised)
    for (int strength = 1; strength <= target_strength; ++strength)
      for (const std::string& t : targets_of(classes, strength)) ++stats.targets[t];
}

// RapidCheck over `testable`, quietly (attest reports the results, not RapidCheck at exit).
rc::detail::TestResult check_with_rapidcheck(const std::function<void()>& testable, const std::string& id,
                                             std::uint64_t seed, const DriveOptions& options) {
  rc::detail::TestParams params;
  params.seed = seed;
  params.maxSuccess = options.cases;
  params.maxSize = 100;
  params.maxDiscardRatio = 20;
  params.disableShrinking = !options.shrink;
  rc::detail::TestMetadata metadata;
  metadata.id = id;
  metadata.description = id;
  rc::detail::TestListenerAdapter quiet;
  return rc::detail::checkProperty(rc::detail::toProperty(testable), metadata, params, quiet);
}

// RapidCheck's outcome into the result: cases, labels, the failure's message, file and reproduce line.
void record_outcome(DriveResult& result, const rc::detail::TestResult& outcome, const std::string& id,
                    CounterexampleFile& file) {
  using rc::detail::Error;
  using rc::detail::FailureResult;
  using rc::detail::GaveUpResult;
  using rc::detail::SuccessResult;
  if (outcome.is<SuccessResult>()) {
    const SuccessResult& success = outcome.get<SuccessResult>();
    result.cases = success.numSuccess;
    for (const auto& [tags, count] : success.distribution)
      for (const std::string& tag : tags) result.label_counts[tag] += count;
  } else if (outcome.is<FailureResult>()) {
    const FailureResult* failure = &outcome.get<FailureResult>();
    result.passed = false;
    result.cases = failure->numSuccess;
    // An exception that is not a verdict (a kernel that stopped serving mid-run) ends the run with
    // RapidCheck's description of it: keep that, not an empty message.
    if (result.message.empty()) {
      result.message = failure->description;  // one line: RapidCheck's runs over two
      std::replace(result.message.begin(), result.message.end(), '\n', ' ');
    }
    if (!file.save_error.empty())
      std::cerr << "attest: cannot save counterexample: " << file.save_error << "\n";
    else if (file.saved)
      result.counterexample_path = file.settle();
    rc::detail::Configuration config;
    config.testParams.seed = result.seed;  // so the printed line names the seed attest printed
    config.reproduce[id] = failure->reproduce;
    result.reproduce = rc::detail::configToMinimalString(config);
  } else if (outcome.is<GaveUpResult>()) {
    const GaveUpResult* gave_up = &outcome.get<GaveUpResult>();
    result.cases = gave_up->numSuccess;
    result.applicable = result.cases > 0;
    result.message = "gave up: " + gave_up->description;
  } else if (outcome.is<Error>()) {
    result.passed = false;
    result.message = "RapidCheck error: " + outcome.get<Error>().description;
  }
}

}  // namespace

Verdict check_safely(const PropertyInfo& property, const Problem& p, const Kernel& kernel, Oracle& oracle) {
  if (const auto sessions = session_stand_in(property, kernel)) return check_safely(property, p, *sessions, oracle);
  forget_last_call();
  try {
    Verdict v = property.check(p, kernel, oracle);
    // Which internal path served the call; a packed check's calls are packed ones, whatever path a
    // padded forward before them reported (the path its cases are counted on), with the kernel's
    // own name for its packed path when it gave one ("packed (varlen)").
    if (!v.passed)
      v.detail += " [path: " + (property.declares.packed ? packed_call_path(kernel) : last_call_path(kernel)) + "]";
    return v;
  } catch (const KernelLoadError&) {
    throw;  // not a verdict: the kernel cannot be certified at all
  } catch (const OutsideDeclaration& e) {
    if (!e.raised_by_attest())
      return Verdict::fail(property.name, "the kernel threw attest's OutsideDeclaration itself (only attest may)",
                           INFINITY);
    return Verdict::vacuous(property.name, e.what());
  } catch (const KernelFailure& e) {
    Verdict v = Verdict::fail(property.name, std::string(e.headline()) + e.what(), INFINITY);
    v.isolation_failure = e.isolating();
    return v;
  } catch (const ProblemError& e) {
    // Most likely attest's own edit broke the problem rules (the reference validates every problem it
    // is given): not blamed on the kernel, still a failure (a check that did not run must not pass).
    return Verdict::fail(property.name,
                         std::string("attest's check built an invalid problem (a defect of attest, unless the kernel "
                                     "raised it): ") +
                             e.what(),
                         INFINITY);
  } catch (const std::exception& e) {
    return Verdict::fail(property.name, std::string("the kernel threw: ") + e.what(), INFINITY);
  }
}

ReplayOutcome replay_check(const PropertyInfo& property, const Problem& p, const Kernel& given, Oracle& oracle) {
  const auto sessions = session_stand_in(property, given);  // a decode-only kernel, through its sessions
  const Kernel& kernel = sessions ? *sessions : given;
  // A problem the kernel does not take is not replayed: a pass there would claim a check that never ran.
  if (const std::string why = kernel.capabilities().unsupported_because(p); !why.empty())
    return {2, fmt::format("not replayed: the problem {} ({})\n", why, kernel.name())};
  const Verdict v = check_safely(property, p, kernel, oracle);
  if (!v.applicable) return {2, "n/a: " + v.detail + "; nothing was checked on this problem\n"};
  if (v.exercised)
    return {v.passed ? 0 : 1, fmt::format("{} (err/bound {:.3g}){}\n", v.passed ? "PASS" : "FAIL", v.utilisation,
                                          v.passed ? "" : ": " + v.detail)};
  ReplayOutcome out{2, fmt::format("not checked by {}: {}\n", v.property, v.detail)};
  if (v.bound_vacuous && property.name != "precision_gate") {
    const Verdict gate = check_safely(find_property("precision_gate"), p, kernel, oracle);
    if (gate.applicable && gate.exercised) {
      out.text += fmt::format("gate 2 (precision_gate): {} (error/allowance {:.3g}){}\n", gate.passed ? "PASS" : "FAIL",
                              gate.utilisation, gate.passed ? "" : ": " + gate.detail);
      out.exit_code = gate.passed ? 0 : 1;
      return out;
    }
    out.text += "gate 2 (precision_gate): not checked: " + gate.detail + "\n";
  }
  out.text += "nothing was checked on this problem\n";
  return out;
}

DriveResult drive_property(const PropertyInfo& property, const Kernel& given, const DriveOptions& options) {
  const auto sessions = session_stand_in(property, given);  // a decode-only kernel, through its sessions
  const Kernel& kernel = sessions ? *sessions : given;
  DriveResult result;
  result.property = property.name;
  result.kernel = kernel.name();
  const auto start = std::chrono::steady_clock::now();
  Capabilities caps = kernel.capabilities();
  result.not_covered = not_covered_because(property, caps);
  // A property run through decode sessions alone draws only what a session takes: a feature it
  // would strip (padding, segments, an explicit mask, a bias) is never counted as covered by it.
  if (!property.needs_forward) caps.features = caps.features & session_features();
  if (!result.not_covered.empty()) {
    result.applicable = false;
    return result;
  }
  result.seed = options.seed ? options.seed
                             : static_cast<std::uint64_t>(std::chrono::system_clock::now().time_since_epoch().count());
  // RapidCheck prints "Using configuration: seed=..." once per process: let it name this seed.
  ::setenv("RC_PARAMS", ("seed=" + std::to_string(result.seed)).c_str(), /*overwrite=*/0);
  CounterexampleFile file;
  file.path = fmt::format("{}/{}__{}.json", options.counterexample_dir, property.name, file_stem(result.kernel));
  remove_stale_counterexamples(file.path);
  Oracle own(Oracle::kKeptEntries);
  Oracle& oracle = options.oracle ? *options.oracle : own;
  bool isolated = false;  // after a crash or hang, stop: shrinking would re-run it hundreds of times
  bool out_of_time = false;
  bool failed = false;  // after the first failure, runs are RapidCheck's shrinking: not counted
  ProblemNeeds needs = property.needs;
  needs.lengths = options.lengths;
  needs.shapes = options.shapes;
  needs.shape_class = options.shape_class;
  needs.path = options.path;
  const rc::Gen<ProblemSpec> specs = gen_spec(caps, needs);
  std::size_t next_target = 0;
  std::string target;  // the coverage target of the current case
  auto testable = [&] {
    ProblemNeeds local = needs;
    if (!options.targets.empty()) {
      if (!failed) target = options.targets[next_target++ % options.targets.size()];
      local.force = target_classes(target);
    }
    const Problem p = build_problem(*specs, caps, local);
    if (isolated) RC_DISCARD("the kernel crashed or hung earlier in this run");
    if (deadline_passed(options.deadline)) {
      out_of_time = true;
      RC_DISCARD("the whole-run deadline was reached");
    }
    const std::vector<std::string> classes = coverage_classes(p, caps);
    for (const std::string& forced : local.force)
      if (std::find(classes.begin(), classes.end(), forced) == classes.end()) {
        if (!failed) ++result.targets_missed[target];
        RC_DISCARD("the declaration does not let the problem land in " + forced);
      }
    if (const std::string why = caps.unsupported_because(p); !why.empty()) {
      if (!failed) {
        ++result.asked, ++result.skipped["the generator could not meet the declaration: " + why];
        if (!target.empty()) result.targets_skipped[target] = "the generator could not meet the declaration: " + why;
      }
      RC_DISCARD(why);
    }
    for (const std::string& label : labels_of(p)) RC_TAG(label);
    PathLog log;
    const Verdict v = check_safely(property, p, kernel, oracle);
    // Not the kernel's last_path when no forward ran: that is a stale forward's (seed 7 #93 of
    // selfcheck: merge_equals_whole INSUFFICIENT, its cases credited to whichever path ran before).
    const CasePath where = property.forward_paths     ? case_path(log, p, kernel)
                           : property.declares.packed ? CasePath{kPackedPath}
                                                      : CasePath{kMergePath};
    // A probe served by another path than the case's own tested that path, not this one: the case
    // is drawn again (up to as many times as there are cases; then kept, and counted).
    if (!failed && v.passed && where.left) {
      if (result.probes_redone < options.cases) {
        ++result.probes_redone;
        RC_DISCARD("a probe of the case was served by another internal path (" + where.other +
                   ") than the case's own (" + where.path + ")");
      }
      ++result.probes_kept_off_path;
    }
    if (!failed) count_case(result, v, p, where, classes, target, options.target_strength);
    if (!v.applicable) RC_DISCARD(v.detail);
    if (!v.passed) {
      failed = true;
      isolated = isolated || v.isolation_failure;
      result.failure_utilisation = v.utilisation;
      const Problem& failed_problem = v.witness ? *v.witness : p;
      result.counterexample = failed_problem;
      result.message = v.detail;
      const std::string source = options.kernel_source.empty() ? result.kernel : options.kernel_source;
      file.save({failed_problem, v.witness ? v.witness_property : property.name, source, options.isolated, v.detail,
                 result.seed});
      RC_FAIL(v.detail);
    }
    result.worst_utilisation = std::max(result.worst_utilisation, v.utilisation);
  };

  const std::string id = property.name + "/" + result.kernel;
  record_outcome(result, check_with_rapidcheck(testable, id, result.seed, options), id, file);
  if (out_of_time && result.passed) {
    result.passed = false;
    result.applicable = true;
    result.message = fmt::format("the whole-run deadline was reached after {} cases", result.cases);
  }
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

}  // namespace attest
