// `attest certify`: runs stages of checks on a kernel and collects one row per check.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "attest/kernels/kernel.h"
#include "attest/properties/cases.h"
#include "attest/properties/oracle.h"
#include "attest/properties/properties.h"
#include "attest/properties/property_driver.h"
#include "attest/properties/size_ladder.h"
#include "check_selection.h"

namespace attest {
namespace fuzz {
struct TargetInfo;
}

// PASS: enough cases exercised it and none failed. NOT COVERED: the kernel's declaration leaves
// it nothing to check (the reason is kept). INSUFFICIENT: it ran, but fewer cases than its floor
// exercised anything; not evidence. FAIL: a case failed.
enum class CheckStatus { kPass, kFail, kNotCovered, kInsufficient };
const char* to_string(CheckStatus s);  // "pass", "fail", "not covered", "insufficient"

// One line of the certificate: a check run over some cases.
struct CheckResult {
  std::string kernel;
  std::string stage;
  std::string check;
  long cases = 0;                             // cases asked for and run (up to and including a failure)
  long effective = 0;                         // of those, cases that exercised the check
  long floor = 1;                             // effective cases needed for evidence
  SkipCounts skipped;                         // cases that were not evidence, by reason
  std::string not_covered;                    // why the declaration leaves nothing to check (status kNotCovered)
  std::map<std::string, long> feature_cases;  // effective cases per feature they used
  int longest_q = 0, longest_k = 0;           // the largest Tq and Tk of an effective case
  long failures = 0;
  // One case's verdict: false (the skip counted with its reason) when it exercised nothing;
  // otherwise an effective case, with its features, lengths, err/bound and the path that served it.
  bool record_case(const Verdict& v, const Problem& p, const std::string& path);
  double worst_utilisation = 0.0;
  std::string first_failure;  // "case name: explanation"
  std::string counterexample_path;
  std::optional<Problem> counterexample;  // the (shrunk) failing problem of a property check
  std::string failing_case;               // the failing problem in one line (case_id.h)
  std::string reproduce;
  std::uint64_t seed = 0;
  double seconds = 0.0;
  std::map<std::string, PathStats> paths;  // per internal path the kernel reported
  // Cases drawn again because a probe left the case's internal path, and those kept so once the
  // redraws ran out (property_driver.h).
  long probes_redone = 0;
  long probes_kept_off_path = 0;
  // Paths the kernel was seen to take (in the size ladder) that this check reached too rarely:
  // "multi-tile: 1 of 3 cases". Any makes the check insufficient.
  std::vector<std::string> path_shortfall;
  // Effective cases per class of the large shape axes ("Dk 128", "H 64 / Hkv 8", "B 16"), from
  // the coverage top-ups (generators.h: shape_classes); 0 where the property exercised nothing.
  std::map<std::string, long> shape_classes;
  // A stage with a time budget (the long stage): its seconds, the cases it could not afford
  // ("window_t32768_d64: predicted 41 s, 6.2 s of the budget left"), and the keys a pass must
  // reach. Slowness loses coverage, listed here; only falling short of required_len blocks.
  // reached_len: every case up to this many keys ran (a cheap decode shape at 65536 keys does
  // not make up for a square case at 8192 that did not).
  double time_budget = 0;
  std::vector<std::string> not_reached;
  int reached_len = 0;
  int required_len = 0;
  bool short_of_required() const { return required_len > 0 && reached_len < required_len; }
  bool passed() const { return failures == 0; }
  CheckStatus status() const;
  // Whether it keeps the kernel from being certified (a failure, or too little evidence).
  bool blocks() const { return status() == CheckStatus::kFail || status() == CheckStatus::kInsufficient; }
};

// `--shard K/N`: which share of a run's checks a run or certificate holds.
struct ShardId {
  int index = 1;  // K, from 1
  int count = 1;  // N
};

// Every check of a run has a position in the unsharded order (kernel by kernel, stage by stage,
// not-covered checks included); shard K/N runs those with position % N == K - 1. Each stage
// asks take() once per check, in that order, so the split depends on the order alone, never
// on results, and every check runs in exactly one shard.
struct ShardCursor {
  ShardId shard;
  long next = 0;  // the next check's position
  bool take() { return next++ % shard.count == shard.index - 1; }
};

struct CertifyOptions {
  int property_cases = 100;  // per property; 0 skips the property stage
  double fuzz_seconds = 0;   // per fuzz target; 0 skips the fuzz stage
  std::uint64_t seed = 0;    // 0: from the clock; always printed
  std::string out_dir = "attest-out";
  bool progress = true;       // progress lines on stderr (progress.h)
  bool verbose = false;       // progress for every check and long case, not only the checks that ran
  std::string kernel_source;  // how the kernel was named (recorded in counterexamples for replay)
  bool isolated = false;
  std::optional<std::chrono::steady_clock::time_point> deadline;  // the whole run's end
  ShardCursor* shard = nullptr;  // null: every check; the caller's, so positions run on across kernels
  SizeOptions sizes;             // the ladder and long stages' lengths, widths, rows and threads
  bool sized_stages = true;      // false: no ladder or long stage
  bool shrink = true;            // false: a failing property reports its first counterexample as found
  // When set, only this property's failure is shrunk; the others report their first counterexample
  // (attest mutants: the size that counts is the expected property's).
  std::string shrink_only;
  // When set, the run ends once this check has failed (attest mutants: the mutant is killed by its
  // expected property, and the checks after it cannot change that).
  std::string stop_after;
  std::optional<CheckSelection> checks;  // --check: only these; unset: every check
  Oracle* oracle = nullptr;  // the property stage's references: certify_kernel's oracle (null: each its own)
};

// Sizes for a budget: quick stops at 4096 keys, default at 32768, thorough at 65536.
SizeOptions sizes_for_budget(int property_cases);

// Whether this run does the check named `check`: --check chose it, and it is this shard's (--shard:
// asked once per chosen check, in the unsharded order).
bool takes_check(const CertifyOptions& options, const std::string& check);

// Effective cases each internal path needs in every property that can reach it.
constexpr long kPathFloor = 3;

// The internal paths a kernel takes across the size ladder, each with the shapes (B, H, Hkv, Tq,
// Tk, Dk, Dv) that reached it, smallest first, and every path it declares (with shapes at the edges
// of its predicate). Forward calls only (no reference): every shard runs it.
using PathShapes = std::map<std::string, std::vector<Shape>>;
PathShapes discover_paths(const Kernel& kernel, const CertifyOptions& options);
// The predicate a kernel declares for `path`, if it declares one (path_predicate.h).
std::optional<PathPredicate> declared_predicate(const Capabilities& caps, const std::string& path);
// Lengths at the edges of every declared predicate (one below, at, and one past each end of its
// Tq and Tk ranges, up to 4096), with a few ordinary ones: where one declared path hands over to the next.
struct DeclaredEdges {
  std::vector<int> queries, keys;
};
DeclaredEdges declared_edges(const Capabilities& caps);
// The `declared_paths` check (a kernel that declares its paths): problems at those edges, each
// run once; a call served by another path than the declaration names fails it.
CheckResult check_declared_paths(const Kernel& kernel, const CertifyOptions& options);

// The `ladder` stage (every row of each case) and the `long` stage (a sample of rows).
// Why a sized check has nothing to run (no case of its sizes inside the declaration).
std::string sized_not_covered(const Capabilities& caps);
// The long stage's cases, cheapest first, by check: the forward's, the backward's, an evicting cache's.
struct LongCases {
  std::vector<SizedCase> forward, backward, retained, paged;
};
LongCases split_long_cases(const Capabilities& caps, const SizeOptions& sizes);
std::vector<CheckResult> run_sized_stages(const Kernel& kernel, Oracle& oracle, const CertifyOptions& options);

// Tops up a property check for each discovered path it reached fewer than kPathFloor times
// (problems of that path's shapes).
void top_up_paths(CheckResult& r, const PropertyInfo& property, const Kernel& kernel, const DriveOptions& drive,
                  const PathShapes& discovered);
// After every top-up: each discovered path the check reached, but fewer than kPathFloor times, goes
// to r.path_shortfall.
void record_path_shortfall(CheckResult& r, const PathShapes& discovered);

// Runs `cases_per_class` more problems of each class of the large shape axes (production widths,
// many heads, large batches: generators.h), so that no class is left to the luck of the draw;
// r.shape_classes records each class's effective cases.
void top_up_classes(CheckResult& r, const PropertyInfo& property, const Kernel& kernel, const DriveOptions& drive,
                    int cases_per_class);

// Coverage targets (coverage_model.h) per internal path: every class (strength 1), pair (2) or
// triple (3) of classes of distinct axes. matches_reference (the exact check every problem takes)
// gets pairs at default and triples at thorough; the other properties classes at default and pairs
// at thorough; every property classes at quick.
int coverage_strength(int property_cases, const std::string& property);
// The most cases one round of a path's coverage top-up may run: a count, not a time, so that the
// verdict never depends on the machine's speed.
constexpr std::size_t kCoverageTopUpCases = 2000;
// Draws each target a path lacks with its classes forced (coverage_top_up.cpp); what stays
// uncovered goes to r.path_shortfall, and each path's stats say what it needed and lacks.
// Per path, the classes that, drawn on purpose on the path's shapes, were always served by other
// paths: the path's learned predicate, which no property's top-up draws again.
using LearnedPaths = std::map<std::string, std::set<std::string>>;
// Learns them with forward calls only (no reference), seeded: every shard learns the same.
LearnedPaths learn_path_predicates(const Kernel& kernel, const PathShapes& discovered, const CertifyOptions& options);
void top_up_targets(CheckResult& r, const PropertyInfo& property, const Kernel& kernel, const DriveOptions& drive,
                    const PathShapes& discovered, int strength, const LearnedPaths* learned = nullptr);

// Adds a top-up run's cases to a check; false (the failure recorded, named by `what`) when it failed.
bool absorb_top_up(CheckResult& r, const DriveResult& d, const std::string& what);

// Seconds since the certification started, for progress lines.
double elapsed_seconds();

// Named problems checked by one property (the deterministic stage).
struct CheckPlan {
  std::string stage;
  std::string check;
  std::vector<NamedProblem> problems;
  std::string property;  // catalogue name
};

std::vector<CheckPlan> deterministic_plans();
CheckResult run_plan(const CheckPlan& plan, const Kernel& kernel, Oracle& oracle, const CertifyOptions& options);

// Every applicable property of the catalogue over generated problems.
std::vector<CheckResult> run_property_stage(const Kernel& kernel, const CertifyOptions& options);
// One property's check as the property stage runs it: the random draw, then the path, class and
// coverage top-ups over the paths `discovered` in the size ladder.
CheckResult check_property(const PropertyInfo& property, const Kernel& kernel, const PathShapes& discovered,
                           const CertifyOptions& options, const LearnedPaths* learned = nullptr);

// Why a fuzz target has nothing to check on this kernel ("" when it runs).
std::string fuzz_not_covered(const fuzz::TargetInfo& target, const Capabilities& caps);
// Random inputs through the fuzz targets' decoder and properties, in this process (so plugins
// and process kernels are fuzzed too); no coverage guidance, that is `attest fuzz`'s job.
std::vector<CheckResult> run_fuzz_stage(const Kernel& kernel, const CertifyOptions& options);

// All stages for one kernel.
std::vector<CheckResult> certify_kernel(const Kernel& kernel, Oracle& oracle, const CertifyOptions& options);

}  // namespace attest
