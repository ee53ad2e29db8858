#include "mutants_command.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "attest/mutants/mutants.h"
#include "attest/properties/file_io.h"
#include "attest/properties/problem_file.h"
#include "certify.h"
#include "check_selection.h"
#include "fuzz_command.h"
#include "fuzz_targets.h"

namespace attest {
namespace {

struct FuzzResult {
  std::string target;
  FuzzOutcome outcome;
};

struct MutantReport {
  const MutantEntry* mutant;
  std::vector<std::string> killed_by;       // failing checks (deterministic and property stages)
  std::vector<FuzzResult> fuzz;             // per fuzz target, with its fresh-process replays
  std::vector<std::string> fuzz_killed_by;  // fuzz targets whose finding failed again when replayed
  bool expected_caught = false;
  long cases_to_first_failure = 0;
  double seconds_to_first_failure = 0;
  int shrunk_q_len = 0, shrunk_k_len = 0;  // of the RapidCheck-shrunk counterexample (0: none saved)
  bool killed() const { return !killed_by.empty() || !fuzz_killed_by.empty(); }
};

double median(std::vector<int> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2.0;
}

CertifyOptions mutant_options(const MutantEntry& entry, const MutantsRequest& request) {
  CertifyOptions options;
  options.property_cases = request.property_cases;
  options.seed = request.seed;
  options.out_dir = request.out_dir + "/" + entry.name;
  options.progress = false;
  options.kernel_source = "mutant:" + entry.name;
  options.sizes = request.sizes;
  options.sizes.max_len = std::max(options.sizes.max_len, entry.needs_len);  // a long-stage bug's lengths
  options.shrink_only = entry.expected_property;  // the other checks' first counterexamples suffice
  options.stop_after = entry.expected_property;   // killed by it: the later checks change nothing
  return options;
}

// With --expected-first, the expected check runs alone first: when it fails, the mutant is killed
// by it and the whole run would say the same (killed, by the expected property); when it does not
// (it may need what earlier checks discover), the whole run decides, as without the flag.
std::vector<CheckResult> certify_mutant(const MutantEntry& entry, const MutantsRequest& request, Oracle& oracle) {
  const auto kernel = entry.make();
  CertifyOptions options = mutant_options(entry, request);
  std::filesystem::remove_all(options.out_dir);
  if (request.expected_first) {
    CertifyOptions alone = options;
    alone.checks = CheckSelection({entry.expected_property});
    std::vector<CheckResult> checks = certify_kernel(*entry.make(), oracle, alone);
    const bool caught = std::any_of(checks.begin(), checks.end(), [&](const CheckResult& c) {
      return c.check == entry.expected_property && !c.passed();
    });
    if (caught) return checks;
    std::filesystem::remove_all(options.out_dir);
  }
  return certify_kernel(*kernel, oracle, options);
}

MutantReport evaluate(const MutantEntry& entry, const MutantsRequest& request, Oracle& oracle) {
  MutantReport r{&entry};
  const std::vector<CheckResult> checks = certify_mutant(entry, request, oracle);
  bool first = true;
  for (const CheckResult& c : checks) {
    if (first) {
      // Cases and seconds up to the check that failed first (its passing cases, then the failure).
      r.cases_to_first_failure += c.passed() ? c.cases : c.cases - c.failures + 1;
      r.seconds_to_first_failure += c.seconds;
    }
    if (c.passed()) continue;
    r.killed_by.push_back(c.check);
    if (c.check == entry.expected_property) r.expected_caught = true;
    // The size that counts is the shrunk one: the expected property's counterexample (only it is
    // shrunk; a mutant expected to fail a fixed check, the ladder or declared_paths, shows none).
    const bool shrunk = c.stage == "property" && !c.counterexample_path.empty() && c.check == entry.expected_property;
    if (shrunk) {
      try {
        const ProblemFile f = load_problem_file(c.counterexample_path);
        r.shrunk_q_len = f.problem.shape.q_len;
        r.shrunk_k_len = f.problem.shape.k_len;
      } catch (const std::exception&) {
      }
    }
    first = false;
  }
  if (request.fuzz_seconds > 0) {
    const FeatureSet declared = entry.make()->capabilities().features;
    for (const fuzz::TargetInfo& t : fuzz::target_table()) {
      if (!t.required.minus(declared).empty()) continue;  // e.g. fuzz_backward for a forward-only mutant
      const std::string target = t.name;
      FuzzRequest fuzz;
      fuzz.target = target;
      fuzz.seconds = request.fuzz_seconds;
      fuzz.kernel = "mutant:" + entry.name;
      fuzz.build_dir = request.fuzz_build;
      fuzz.out_dir = request.out_dir + "/" + entry.name;
      std::filesystem::remove_all(fuzz.out_dir + "/fuzz/" + target);
      r.fuzz.push_back({target, fuzz_and_replay(fuzz)});
      if (r.fuzz.back().outcome.status == 1) r.fuzz_killed_by.push_back(target);
    }
  }
  return r;
}

std::string joined(const std::vector<std::string>& v) {
  std::string out;
  for (const std::string& s : v) out += (out.empty() ? "" : ",") + s;
  return out.empty() ? "-" : out;
}

// One fuzz target's evidence: whether libFuzzer found anything and, for the finding that decides
// (the first counted, else the first), the fresh-process replay: its kernel, the property it
// ran, its exit code and verdict line.
nlohmann::json fuzz_json(const FuzzResult& f) {
  const std::vector<FuzzFinding>& all = f.outcome.findings;
  auto chosen = std::find_if(all.begin(), all.end(), [](const FuzzFinding& x) { return x.counted(); });
  if (chosen == all.end()) chosen = all.begin();
  auto text = [](const std::string& s) { return s.empty() ? nlohmann::json() : nlohmann::json(s); };
  nlohmann::json j = {{"target", f.target},
                      {"status", f.outcome.status},
                      {"libfuzzer_finding", !all.empty()},
                      {"findings", all.size()},
                      {"counted", chosen != all.end() && chosen->counted()}};
  if (chosen == all.end()) return j;
  j.update({{"input", chosen->input},
            {"problem", text(chosen->problem_path)},
            {"kernel", text(chosen->kernel)},
            {"replay_kernel", text(chosen->replay_kernel)},
            {"property", text(chosen->property)},
            {"replay_exit_code", chosen->replay_exit < 0 ? nlohmann::json() : nlohmann::json(chosen->replay_exit)},
            {"replay_verdict", text(chosen->replay_verdict)}});
  return j;
}

}  // namespace

int run_mutants(const MutantsRequest& request) {
  if (!request.json_path.empty()) check_writable("--json", request.json_path);  // before an hour of mutants
  Oracle oracle(1024);
  std::vector<MutantReport> reports;
  std::size_t position = 0;
  for (const MutantEntry& m : mutant_registry()) {
    if (position++ % request.shard_count != static_cast<std::size_t>(request.shard_index - 1)) continue;
    if (!request.only.empty() && request.only != m.name) continue;
    reports.push_back(evaluate(m, request, oracle));
    const MutantReport& r = reports.back();
    std::cerr << fmt::format("[{}] {}: {} ({} checks)\n", r.mutant->name, r.killed() ? "killed" : "SURVIVED",
                             joined(r.killed_by), r.killed_by.size());
  }

  if (reports.empty())
    throw std::invalid_argument(request.only.empty() ? "no mutant in this shard"
                                                     : "--only " + request.only + ": no such mutant in this shard");
  int killed = 0, expected = 0;
  std::vector<int> q_lens, k_lens;
  std::string table = fmt::format("{:<26} {:<8} {:>6} {:>8} {:>8}  {:<32} {}\n", "mutant", "verdict", "cases",
                                  "seconds", "Tq x Tk", "expected property", "caught by");
  for (const MutantReport& r : reports) {
    killed += r.killed();
    expected += r.expected_caught;
    if (r.shrunk_q_len) q_lens.push_back(r.shrunk_q_len), k_lens.push_back(r.shrunk_k_len);
    std::vector<std::string> others;
    for (const std::string& k : r.killed_by)
      if (k != r.mutant->expected_property) others.push_back(k);
    table += fmt::format("{:<26} {:<8} {:>6} {:>8.2f} {:>8}  {:<32} {}{}\n", r.mutant->name,
                         r.killed() ? "killed" : "SURVIVED", r.cases_to_first_failure, r.seconds_to_first_failure,
                         r.shrunk_q_len ? fmt::format("{}x{}", r.shrunk_q_len, r.shrunk_k_len) : "-",
                         r.mutant->expected_property + (r.expected_caught ? "" : " (MISSED)"), joined(others),
                         request.fuzz_seconds > 0 ? "  fuzz: " + joined(r.fuzz_killed_by) : "");
  }
  const auto slowest = std::max_element(reports.begin(), reports.end(), [](const auto& a, const auto& b) {
    return a.seconds_to_first_failure < b.seconds_to_first_failure;
  });
  std::vector<double> seconds;
  for (const MutantReport& r : reports) seconds.push_back(r.seconds_to_first_failure);
  std::sort(seconds.begin(), seconds.end());
  const double median_seconds = seconds.empty() ? 0 : seconds[seconds.size() / 2];
  table += fmt::format(
      "\nmutation score: {}/{} killed ({:.0f}%), {}/{} by their expected property; median seconds to kill {:.2f}, "
      "slowest {} ({:.2f} s); median shrunk Tq {}, Tk {}\n",
      killed, reports.size(), reports.empty() ? 0.0 : 100.0 * killed / reports.size(), expected, reports.size(),
      median_seconds, slowest == reports.end() ? "-" : slowest->mutant->name,
      slowest == reports.end() ? 0.0 : slowest->seconds_to_first_failure, median(q_lens), median(k_lens));
  // The fuzz evidence in one line: mutants with a counted kill, and libFuzzer's findings counted.
  int fuzz_killed = 0, findings = 0, counted = 0;
  for (const MutantReport& r : reports) {
    fuzz_killed += !r.fuzz_killed_by.empty();
    for (const FuzzResult& f : r.fuzz)
      for (const FuzzFinding& x : f.outcome.findings) findings += 1, counted += x.counted();
  }
  if (request.fuzz_seconds > 0)
    table += fmt::format(
        "fuzz ({} s per target): {}/{} mutants killed by a finding that failed again when replayed in a fresh "
        "process; {} of {} libFuzzer findings counted\n",
        request.fuzz_seconds, fuzz_killed, reports.size(), counted, findings);
  std::cout << table;

  if (!request.json_path.empty()) {
    nlohmann::json rows = nlohmann::json::array();
    for (const MutantReport& r : reports) {
      nlohmann::json fuzz = nlohmann::json::array();
      for (const FuzzResult& f : r.fuzz) fuzz.push_back(fuzz_json(f));
      rows.push_back({{"mutant", r.mutant->name},
                      {"bug_class", r.mutant->bug_class},
                      {"expected_property", r.mutant->expected_property},
                      {"killed", r.killed()},
                      {"expected_caught", r.expected_caught},
                      {"killed_by", r.killed_by},
                      {"fuzz_killed_by", r.fuzz_killed_by},
                      {"cases_to_first_failure", r.cases_to_first_failure},
                      {"seconds_to_first_failure", r.seconds_to_first_failure},
                      {"shrunk_q_len", r.shrunk_q_len},
                      {"shrunk_k_len", r.shrunk_k_len},
                      {"fuzz", fuzz}});
    }
    const nlohmann::json doc = {{"format", "attest-mutants"},
                                {"version", 2},
                                {"seed", request.seed},
                                {"cases_per_property", request.property_cases},
                                {"killed", killed},
                                {"total", reports.size()},
                                {"expected_caught", expected},
                                {"median_seconds_to_kill", median_seconds},
                                {"median_shrunk_q_len", median(q_lens)},
                                {"median_shrunk_k_len", median(k_lens)},
                                {"fuzz_seconds", request.fuzz_seconds},
                                {"fuzz_killed", fuzz_killed},
                                {"fuzz_findings", findings},
                                {"fuzz_findings_counted", counted},
                                {"mutants", rows}};
    write_file_atomically(request.json_path, doc.dump(2) + "\n");
  }
  return killed == static_cast<int>(reports.size()) && expected == static_cast<int>(reports.size()) ? 0 : 1;
}

}  // namespace attest
