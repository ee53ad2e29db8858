// The human side of a certificate: what a kernel declared, the table of checks, the failures
// and the verdict line naming what was certified and what was not covered.
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "attest/properties/precision_limit.h"
#include "certificate.h"
#include "run_summary.h"

namespace attest {

std::map<std::string, long> KernelReport::covered_features() const {
  std::map<std::string, long> out;
  for (const CheckResult& r : checks)
    for (const auto& [feature, cases] : r.feature_cases) out[feature] += cases;
  return out;
}

FeatureSet KernelReport::exercised() const {
  FeatureSet s;
  for (const auto& [name, cases] : covered_features())
    if (const auto f = feature_named(name); f && cases > 0) s.insert(*f);
  // LSE and decode are not problem features: covered when a passing check used them (every
  // comparison with the reference checks LSE when the kernel declares it, decode ones too).
  for (const CheckResult& r : checks) {
    if (r.status() != CheckStatus::kPass || r.effective == 0) continue;
    if (capabilities.lse()) s.insert(Feature::kLse);
    if (r.check == "decode_matches_prefill" || r.check == "eviction_matches_retained_set" || r.check == "fuzz_decode")
      s.insert(Feature::kDecode);
    if (r.check.starts_with("gradient_") || r.check == "fuzz_backward") s.insert(Feature::kBackward);
  }
  return s & capabilities.features;
}

FeatureSet KernelReport::declared_unexercised() const { return capabilities.features.minus(exercised()); }
FeatureSet KernelReport::undeclared() const { return FeatureSet::all().minus(capabilities.features); }
FeatureSet KernelReport::missing_required() const { return required.minus(exercised()); }

bool KernelReport::any_check_ran() const {
  return std::any_of(checks.begin(), checks.end(),
                     [](const CheckResult& r) { return r.status() != CheckStatus::kNotCovered; });
}

bool KernelReport::passed() const {
  // No evidence is never a pass: --check naming only checks the kernel does not have once gave
  // "CERTIFIED k for nothing" and exit 0.
  if (!shard && !any_check_ran()) return false;
  for (const CheckResult& r : checks)
    if (r.blocks()) return false;
  return shard || missing_required().empty();  // a shard's share need not cover every required feature
}

// "; path tiled: ..., accumulator f32" for each path declared to round elsewhere.
std::string path_precisions(const Capabilities& c) {
  std::string out;
  for (const auto& [path, p] : c.path_precision)
    out += fmt::format("; path {}: {}, exp {:g} ulp", path, p.summary(), p.exp_ulps);
  return out;
}

std::string declared_scope(const Capabilities& c) {
  return fmt::format("precision {}, exp {:g} ulp{}, empty rows {}{}; contract: {}", c.precision.summary(),
                     c.precision.exp_ulps, path_precisions(c), to_string(c.empty_rows),
                     c.inputs == InputDomain::kFinite         ? ", inputs finite"
                     : c.inputs == InputDomain::kMaskedScored ? ", masked keys scored"
                                                              : "",
                     c.contract.summary());
}

namespace {

std::string names_of(const std::vector<const CheckResult*>& checks) {
  std::string out;
  for (const CheckResult* r : checks) out += (out.empty() ? "" : ", ") + r->check;
  return out;
}

// "; long: to T = 8192 (time budget)" when slowness kept a stage short of its lengths.
std::string reach_scope(const KernelReport& k) {
  // One clause per stage: the length every one of its checks that fell short reached (the forward's
  // and the backward's long checks once printed the same clause twice).
  std::map<std::string, std::pair<int, bool>> reached;  // stage -> (length, within a time budget)
  for (const CheckResult& r : k.checks) {
    if (r.not_reached.empty()) continue;
    auto [at, fresh] = reached.try_emplace(r.stage, r.reached_len, r.time_budget > 0);
    if (!fresh) at->second = {std::min(at->second.first, r.reached_len), at->second.second || r.time_budget > 0};
  }
  std::string out;
  for (const auto& [stage, reach] : reached)
    out += fmt::format("; {}: to T = {} ({})", stage, reach.first, reach.second ? "time budget" : "too slow");
  return out;
}

// "; no size stages: checked to Tk = 69" when the run had neither the size ladder nor the long
// stage (--no-size-stages, a shard without them): the verdict then vouches for short problems only.
std::string size_scope(const KernelReport& k) {
  long longest = 0;
  for (const CheckResult& r : k.checks) {
    if (r.stage == "ladder" || r.stage == "long") return "";
    longest = std::max(longest, static_cast<long>(r.longest_k));
  }
  return fmt::format("; no size stages: checked to Tk = {}", longest);
}

// "; at q/k/v/o bf16, scores bf16, ... exp 64 ulp" when the kernel declared less than f32 with an
// exact exp: the verdict vouches for that precision only, and the line says so.
std::string precision_scope(const Capabilities& c) {
  const Precision& p = c.precision;
  if (p.all_f32() && p.exp_ulps <= 2 && c.path_precision.empty()) return "";
  return fmt::format("; at the declared precision: {}, exp {:g} ulp{}", p.summary(), p.exp_ulps, path_precisions(c));
}

// " (contract: Dk in {64, 128}, Dk == Dv, default scale)": a verdict under a contract vouches for
// the problems inside it only, so the line that a CI log shows says which.
std::string contract_scope(const Capabilities& c) {
  return c.contract.open() ? "" : fmt::format(" (contract: {})", c.contract.summary());
}

// "; for finite inputs only": masked keys were poisoned with huge finite values, never NaN or inf.
std::string inputs_scope(const Capabilities& c) {
  if (c.inputs == InputDomain::kMaskedScored)
    return "; for masked keys that are scored, then masked (finite, their scores in range)";
  return c.inputs == InputDomain::kFinite ? "; for finite inputs only (masked and bias-hidden keys never NaN or inf)"
                                          : "";
}

// "; cache keeps sinks 4 + recent 32": past its first eviction a decoder is held to the positions
// its declared policy keeps, not to full causal attention.
// "; block tables of 16-token pages": its cache was read through attest's page tables, shared
// and permuted pages and ragged batches included.
std::string cache_scope(const Capabilities& c) {
  const std::string tables = c.page_tokens > 0 ? fmt::format("; block tables of {}-token pages", c.page_tokens) : "";
  if (c.cache.kind == CachePolicy::Kind::kExplicit)
    return "; cache keeps the positions it reports (explicit policy)" + tables;
  return (c.cache.evicts() ? "; cache keeps " + c.cache.summary() : "") + tables;
}

// "; in process, not contained": the caller chose speed over containment (a trusted kernel), so a
// crash, exit or hang in it was never the verdict's to catch.
std::string containment_scope(const KernelReport& k) { return k.uncontained ? "; in process, not contained" : ""; }

}  // namespace

std::string verdict_text(const CheckResult& r) {
  switch (r.status()) {
    case CheckStatus::kPass:
      return "PASS";
    case CheckStatus::kFail:
      return "FAIL";
    case CheckStatus::kNotCovered:
      return "not covered";
    case CheckStatus::kInsufficient:
      return "INSUFFICIENT";
  }
  return "?";
}

std::string format_path_table(const KernelReport& k) {
  struct Row {
    long cases = 0, checks = 0, required = 0, covered = 0;
    double worst = 0;
  };
  std::map<std::string, Row> rows;
  for (const CheckResult& r : k.checks)
    for (const auto& [path, stats] : r.paths) {
      Row& row = rows.size() >= kMaxPaths && !rows.contains(path) ? rows[kOtherPaths] : rows[path];
      row.cases += stats.cases;
      row.checks += stats.cases > 0;
      row.worst = std::max(row.worst, stats.worst_utilisation);
      row.required += stats.targets_required;
      row.covered += stats.targets_required - static_cast<long>(stats.targets_uncovered.size());
    }
  if (rows.empty()) return {};
  std::size_t width = 4;
  for (const auto& [path, row] : rows) width = std::max(width, path.size());
  // One self-labelled line per path, no header of its own (the "one line per path").
  // targets: coverage targets (coverage_model.h: classes, or pairs of classes) covered of required, over all checks.
  std::string out;
  for (const auto& [path, row] : rows)
    out +=
        fmt::format("  path {:<{}} {:>7} cases {:>3} checks  err/bound {:<9.3g} targets {}\n", path, width, row.cases,
                    row.checks, row.worst, row.required ? fmt::format("{}/{}", row.covered, row.required) : "-");
  return out;
}

namespace {

// "checks: 21 ran, 16 not covered [11: the kernel does not declare backward] [5: ...]": what did
// not run, once, grouped by reason, instead of a zero row and a line for each.
std::string checks_line(const KernelReport& k) {
  std::map<std::string, long> reasons;
  long ran = 0;
  for (const CheckResult& r : k.checks)
    if (r.status() == CheckStatus::kNotCovered)
      ++reasons[r.not_covered];
    else
      ++ran;
  std::vector<std::pair<long, std::string>> by_count;
  for (const auto& [why, n] : reasons) by_count.emplace_back(-n, why);
  std::sort(by_count.begin(), by_count.end());
  std::string grouped;
  // Bracketed: a reason may itself hold a semicolon.
  for (const auto& [minus_n, why] : by_count) grouped += fmt::format(" [{}: {}]", -minus_n, why);
  const long not_covered = static_cast<long>(k.checks.size()) - ran;
  return fmt::format("  checks: {} ran, {} not covered{}\n", ran, not_covered, grouped);
}

// "; 5 of 37 checks apply" when fewer than half of a kernel's checks ran: a verdict on few checks
// says so where a CI log shows it. A shard holds a share of the checks by design: not said there.
std::string applies_scope(const KernelReport& k) {
  long ran = 0;
  for (const CheckResult& r : k.checks) ran += r.status() != CheckStatus::kNotCovered;
  const long total = static_cast<long>(k.checks.size());
  if (k.shard || 2 * ran >= total) return "";
  return fmt::format("; {} of {} checks apply", ran, total);
}

// "; only the checks --check chose (grid, matches_reference)": the verdict of a partial run.
std::string selection_scope(const KernelReport& k) {
  return k.check_selection.empty() ? "" : fmt::format("; only the checks --check chose ({})", k.check_selection);
}

}  // namespace

std::string format_failure(const KernelReport& k, const CheckResult& r) {
  std::string out =
      fmt::format("  FAIL {} {}: {} of {} cases; first: {}\n", k.name, r.check, r.failures, r.cases, r.first_failure);
  if (!r.failing_case.empty()) out += fmt::format("    case: {}\n", r.failing_case);
  return out;
}

std::string format_report(const KernelReport& k, ReportDetail detail) {
  const bool full = detail == ReportDetail::kFull;
  const Capabilities& c = k.capabilities;
  const std::string features = c.features.empty() ? "no features" : c.features.joined();
  // Compact: the header is one line (name, declaration, precision, contract).
  std::string out = full ? fmt::format("{} ({})\n  declares: {}\n  {}\n", k.name, k.source, features, declared_scope(c))
                         : fmt::format("{} ({}) declares {}; {}\n", k.name, k.source, features, declared_scope(c));
  if (!full) out += checks_line(k);
  // The compact table holds the checks that ran; --verbose every check, the zero rows included.
  auto shown = [&](const CheckResult& r) { return full || r.status() != CheckStatus::kNotCovered; };
  std::size_t width = 6;
  for (const CheckResult& r : k.checks)
    if (shown(r)) width = std::max(width, r.check.size());
  out += fmt::format("  {:<14} {:<{}} {:>7} {:>9} {:>12} {:>10} {:>12}\n", "stage", "check", width, "cases",
                     "effective", "verdict", "err/bound", "max Tq x Tk");
  for (const CheckResult& r : k.checks)
    if (shown(r))
      out += fmt::format("  {:<14} {:<{}} {:>7} {:>9} {:>12} {:>10.3g} {:>12}\n", r.stage, r.check, width, r.cases,
                         r.effective, verdict_text(r), r.worst_utilisation,
                         r.effective ? fmt::format("{}x{}", r.longest_q, r.longest_k) : "-");

  const std::string table = format_path_table(k);
  out += table;
  // Where the paths came from: the kernel's declaration, or what the size ladder showed.
  std::string declared;
  for (const PathPredicate& d : c.paths) declared += (declared.empty() ? "" : "; ") + d.summary();
  if (!declared.empty())
    out += "  paths declared by the kernel: " + declared + "\n";
  else if (!table.empty() && full)
    out += "  paths discovered over the size ladder (the kernel declares none)\n";
  for (const CheckResult& r : k.checks)
    if (r.paths.contains(kOtherPaths)) {
      out += fmt::format(
          "  note: the kernel named more than {} internal paths; the rest are counted as one row "
          "(a path name must name a code path, not a call)\n",
          kMaxPaths);
      break;
    }

  std::vector<const CheckResult*> failed, insufficient, not_covered;
  for (const CheckResult& r : k.checks) {
    if (r.status() == CheckStatus::kFail) failed.push_back(&r);
    if (r.status() == CheckStatus::kInsufficient) insufficient.push_back(&r);
    if (r.status() == CheckStatus::kNotCovered) not_covered.push_back(&r);
  }
  // The compact report lists failures once, at the end of the run (run_summary.h).
  for (const CheckResult* r : full ? failed : std::vector<const CheckResult*>{}) {
    out += "\n" + format_failure(k, *r);
    if (!r->counterexample_path.empty())
      out += fmt::format("    counterexample: {}  ({})\n", r->counterexample_path,
                         replay_command(k, r->counterexample_path));
    if (!r->reproduce.empty()) out += fmt::format("    seed {}; RapidCheck: RC_PARAMS=\"{}\"\n", r->seed, r->reproduce);
  }
  for (const CheckResult* r : insufficient) {
    std::string reasons;
    for (const auto& [why, n] : r->skipped) reasons += fmt::format("{}{} x {}", reasons.empty() ? "" : "; ", n, why);
    if (r->effective < r->floor)
      out += fmt::format("\n  INSUFFICIENT {}: {} of {} cases exercised it (at least {} needed); the others: {}\n",
                         r->check, r->effective, r->cases, r->floor, reasons.empty() ? "-" : reasons);
    for (const std::string& shortfall : r->path_shortfall)
      out += fmt::format(
          "\n  INSUFFICIENT {}: path {} (every path the kernel takes needs its own evidence); cases not counted: {}\n",
          r->check, shortfall, reasons.empty() ? "-" : reasons);
    if (r->short_of_required())
      out += fmt::format(
          "\n  INSUFFICIENT {}: reached T = {}, this budget level needs T >= {} (the kernel's measured "
          "speed could not afford more{})\n",
          r->check, r->reached_len, r->required_len,
          r->time_budget > 0 ? fmt::format(" in the {:g} s time budget; --long-seconds raises it", r->time_budget)
                             : "");
  }
  for (const CheckResult& r : k.checks)
    if (r.probes_redone + r.probes_kept_off_path > 0)
      out += fmt::format(
          "  {} {}: {} cases drawn again, a probe left the case's internal path{}\n", r.stage, r.check, r.probes_redone,
          r.probes_kept_off_path > 0 ? fmt::format("; {} kept so after that", r.probes_kept_off_path) : "");
  for (const CheckResult& r : k.checks) {
    if (r.not_reached.empty()) continue;
    const std::string why = r.time_budget > 0 ? fmt::format("{:g} s time budget", r.time_budget) : "too slow";
    if (!full) {
      out += fmt::format("  {} {}: every case to T = {} ran; {} not reached ({}), --verbose lists them\n", r.stage,
                         r.check, r.reached_len,
                         r.not_reached.size() == 1 ? "1 case" : fmt::format("{} cases", r.not_reached.size()), why);
      continue;
    }
    out += fmt::format("  {} {}: every case to T = {} ran; not reached ({}):\n", r.stage, r.check, r.reached_len, why);
    for (const std::string& line : r.not_reached) out += fmt::format("    {}\n", line);
  }
  if (full)
    for (const CheckResult* r : not_covered) out += fmt::format("  not covered: {} ({})\n", r->check, r->not_covered);
  const std::string limits = limits_text(precision_limits(k.capabilities));
  if (!limits.empty())
    out += fmt::format("  precision limit of the declared arithmetic (its model kernel, equal scores): {}\n", limits);

  return out + format_verdict_line(k);
}

std::string format_verdict_line(const KernelReport& k) {
  std::vector<const CheckResult*> failed, insufficient;
  for (const CheckResult& r : k.checks) {
    if (r.status() == CheckStatus::kFail) failed.push_back(&r);
    if (r.status() == CheckStatus::kInsufficient) insufficient.push_back(&r);
  }
  const std::string limits = limits_text(precision_limits(k.capabilities));
  std::string out;
  const FeatureSet not_covered_features = k.undeclared() | k.declared_unexercised();
  const std::string scope = k.exercised().empty() ? "nothing" : k.exercised().joined();
  // A shard's verdict speaks for its share of the checks only.
  if (k.shard) out += fmt::format("shard {}/{}: ", k.shard->index, k.shard->count);
  if (k.passed()) {
    out += fmt::format("CERTIFIED {} for {}{}; not covered: {}{}{}{}{}{}{}{}{}{}\n", k.name, scope,
                       contract_scope(k.capabilities),
                       not_covered_features.empty() ? "nothing" : not_covered_features.joined(), reach_scope(k),
                       size_scope(k), precision_scope(k.capabilities), inputs_scope(k.capabilities),
                       cache_scope(k.capabilities), limits.empty() ? "" : "; precision limit: " + limits,
                       containment_scope(k), applies_scope(k), selection_scope(k));
  } else {
    std::vector<std::string> why;
    if (!failed.empty()) why.push_back(fmt::format("failed: {}", names_of(failed)));
    if (!insufficient.empty()) why.push_back(fmt::format("insufficient evidence: {}", names_of(insufficient)));
    if (!k.missing_required().empty())
      why.push_back(fmt::format("required but not covered: {}", k.missing_required().joined()));
    if (!k.shard && !k.any_check_ran()) why.push_back("no check ran: every check is not covered");
    std::string joined;
    for (const std::string& w : why) joined += (joined.empty() ? "" : "; ") + w;
    out += fmt::format("NOT CERTIFIED {}: {}{}\n", k.name, joined, selection_scope(k));
  }
  return out;
}

}  // namespace attest
