// Certificate writers (JSON, JUnit) and the regression gate against a baseline certificate.
#pragma once

#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "baseline.h"
#include "certificate_format.h"
#include "certify.h"

namespace attest {

// One certified kernel: where it came from, what it declared, and its check results.
struct KernelReport {
  std::string source;  // as named on the command line
  std::string name;
  Capabilities capabilities;
  std::vector<CheckResult> checks;
  FeatureSet required;           // --require: features that must be declared and exercised
  std::optional<ShardId> shard;  // a shard's share of the checks: --require is judged on the merged certificate
  std::map<std::string, std::string> identity;  // file -> SHA-256 of what was certified (identity.h)
  bool uncontained = false;                     // the library ran the caller's kernel in its own process, as asked
  std::string check_selection;                  // --check as given, when it chose the checks that ran
  // Read from a certificate: per path, effective cases per pair of classes over every check (a
  // run's own are in its checks' paths).
  std::map<std::string, std::map<std::string, long>> path_pairs;

  // What the run covered: declared features with their effective cases, declared features no
  // effective case used, features not declared, and features --require names but did not get.
  std::map<std::string, long> covered_features() const;
  FeatureSet exercised() const;
  FeatureSet declared_unexercised() const;
  FeatureSet undeclared() const;
  FeatureSet missing_required() const;
  bool any_check_ran() const;  // a check that is not "not covered" (a whole run's certificate needs one)
  // Certified: some check ran (a shard's share may have none), none fails or is insufficient, every
  // required feature covered.
  bool passed() const;
};

struct CertificateInfo {
  std::uint64_t seed = 0;
  int property_cases = 0;
  std::vector<KernelReport> kernels;
  std::optional<ShardId> shard;                // written as "shard"; the merge needs each check's paths then
  std::map<std::string, std::string> options;  // what changes the checks' cases: sizes, timeouts, ...
};

// The scope a kernel declared, in one line: "f32, empty rows zero, exp 2 ulp; contract: any problem".
std::string declared_scope(const Capabilities& c);
// A check's verdict as the report's table shows it: PASS, FAIL, not covered, INSUFFICIENT.
std::string verdict_text(const CheckResult& r);
// Per internal path, a line: effective cases over all checks, how many checks reached it, worst
// err/bound, coverage targets covered of required.
std::string format_path_table(const KernelReport& k);
// The human report of one kernel: its declaration, a table of checks, failures, the verdict line.
// kCompact: a "checks: N ran, M not covered" line instead of a row and a line per check that did
// not run, the long stage's unreached cases counted, failures left to the run's closing list
// (run_summary.h). kFull: every check, every unreached case and every failure in place.
enum class ReportDetail { kCompact, kFull };
std::string format_report(const KernelReport& k, ReportDetail detail = ReportDetail::kFull);
// The last line of a kernel's report: "CERTIFIED NAME for FEATURES; not covered: ..." or "NOT
// CERTIFIED NAME: failed: ...", with "shard K/N: " before it for a shard's share.
std::string format_verdict_line(const KernelReport& k);
// "  FAIL kernel check: 1 of 40 cases; first: ...", and "    case: Tq=5 Tk=9 ..." when it failed on a case.
std::string format_failure(const KernelReport& k, const CheckResult& r);

// JSON, schema ci/schema/certificate.schema.json ("attest-certificate", version 2).
std::string certificate_json(const CertificateInfo& info);
// JUnit XML: one testsuite per kernel, one testcase per check.
std::string certificate_junit(const CertificateInfo& info);

// The regression gate: reasons the new certificate is worse than the baseline (empty: not worse).
// Worse = a check that passed now fails, or a worst utilisation grew beyond `factor` x the old
// one (utilisations under 0.01 are treated as 0.01, so noise near zero does not count).
std::vector<std::string> regressions(const Baseline& baseline, const CertificateInfo& now, double factor);
// The first key where two maps differ, with each side's value ("(none)" where it is missing);
// empty strings when they are equal.
std::tuple<std::string, std::string, std::string> first_difference(const std::map<std::string, std::string>& mine,
                                                                   const std::map<std::string, std::string>& theirs);
// The first option in which the run differs from the baseline, if the baseline records options.
std::optional<std::string> options_difference(const Baseline& baseline, const CertificateInfo& now);

}  // namespace attest
