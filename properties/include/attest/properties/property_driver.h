// Runs one property on one kernel over generated problems with RapidCheck (with shrinking).
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "attest/kernels/kernel.h"
#include "attest/properties/properties.h"

namespace attest {

struct DriveOptions {
  int cases = 50;
  std::uint64_t seed = 0;  // 0: derived from the clock (always printed)
  std::string counterexample_dir = "attest-out/counterexamples";
  bool shrink = true;
  std::string kernel_source;  // recorded in counterexamples so replay can load it (default: its name)
  bool isolated = false;
  std::optional<std::chrono::steady_clock::time_point> deadline;  // the whole run's end: stop there
  // When set, every problem's (Tq, Tk) is one of these: a top-up run for an internal path that
  // the generated sizes reached too rarely.
  std::vector<std::pair<int, int>> lengths;
  // When set, every problem takes one of these shapes (B, H, Hkv, Tq, Tk, Dk, Dv) as its base, forced
  // coverage classes changing what they name: a top-up of the path those shapes reached.
  std::vector<Shape> shapes;
  // When set, every problem is of this shape class (generators.h: regime, class): a coverage top-up.
  std::optional<std::pair<int, int>> shape_class;
  // When set, coverage targets (coverage_model.h): each case bends its problem into the next one's
  // classes, in turn (a failing case keeps its target while it shrinks). A problem the declaration
  // does not let land there is discarded and counted in DriveResult::targets_missed.
  std::vector<std::string> targets;
  // Effective cases are counted per coverage target up to this strength (3: triples, at thorough).
  int target_strength = 2;
  // When set, every problem is bent into this declared path's predicate: a top-up of that path.
  std::optional<PathPredicate> path;
  // The run's shared references (certify's): properties drawn from one seed share many problems,
  // and so do two kernels certified alike. Null: the run keeps a small cache of its own.
  Oracle* oracle = nullptr;
};

// Whether a run with this deadline must stop now.
inline bool deadline_passed(const std::optional<std::chrono::steady_clock::time_point>& deadline) {
  return deadline && std::chrono::steady_clock::now() >= *deadline;
}

// Cases and worst utilisation per internal path a kernel reported (Kernel::last_path).
struct PathStats {
  long cases = 0;
  double worst_utilisation = 0;
  // Effective cases per coverage target (coverage_model.h: each class and each pair of classes).
  std::map<std::string, long> targets;
  // Set by certify's coverage top-ups: the targets this path needs and those it still lacks.
  long targets_required = 0;
  std::vector<std::string> targets_uncovered;
  std::vector<std::string> targets_unexercised;  // "target: why": tried, and the property checked nothing there
  std::vector<std::string> targets_not_taken;    // classes that never landed on this path: its learned predicate
};

// Distinct internal path names a check keeps: a kernel that names a new path per call (a counter,
// a pointer in the name) must not grow a certificate or a run without bound.
inline constexpr std::size_t kMaxPaths = 16;
inline constexpr const char* kOtherPaths = "(more than 16 path names)";
// The whole kernel, every path name taken as one: certify's last coverage pass (coverage_top_up.cpp).
inline constexpr const char* kEveryPath = "(every path)";
// The entry for `path`, or the kOtherPaths one once kMaxPaths names are kept.
inline PathStats& path_entry(std::map<std::string, PathStats>& paths, const std::string& path) {
  if (paths.size() >= kMaxPaths && !paths.contains(path)) return paths[kOtherPaths];
  return paths[path];
}

// Cases that did not count as evidence, by reason ("nothing masked", "outside the contract: ...").
using SkipCounts = std::map<std::string, long>;

struct DriveResult {
  std::string property;
  std::string kernel;
  bool applicable = true;  // false: not covered for this kernel (`not_covered` says why)
  std::string not_covered;
  bool passed = true;
  int cases = 0;                              // successful cases before the verdict
  long asked = 0;                             // problems generated and run (before a failure)
  long effective = 0;                         // of those, cases that exercised the property
  SkipCounts skipped;                         // the others, by reason
  std::map<std::string, long> feature_cases;  // effective cases per feature they used
  std::map<std::string, long> class_cases;    // effective cases per large shape class (generators.h)
  int longest_q = 0, longest_k = 0;           // the largest Tq and Tk of an effective case
  double worst_utilisation = 0;               // over passing cases
  double failure_utilisation = 0;             // of the (shrunk) failing case
  std::uint64_t seed = 0;
  std::string message;    // the shrunk failure's explanation
  std::string reproduce;  // RC_PARAMS value that replays the RapidCheck run
  std::string counterexample_path;
  std::optional<Problem> counterexample;    // the shrunk failing problem
  std::map<std::string, int> label_counts;  // how many passing cases carried each label
  std::map<std::string, PathStats> paths;   // effective cases (and a failure) per internal path
  // Cases drawn again because a probe (V = 1, a slice, a single query) was served by another
  // internal path than the case's own; and, once as many were redrawn as cases asked, kept so.
  long probes_redone = 0;
  long probes_kept_off_path = 0;
  // Per coverage target: problems that could not be bent into it (not run), and why its last
  // case that ran was not effective.
  std::map<std::string, long> targets_missed;
  std::map<std::string, std::string> targets_skipped;
  double seconds = 0;
};

// Applicability is the kernel's declaration against the property's requirements and needs.
bool property_applies(const PropertyInfo& property, const Kernel& kernel);

// The fewest effective cases that make `asked` cases evidence: a quarter, and at least one.
long effective_floor(long asked);

DriveResult drive_property(const PropertyInfo& property, const Kernel& kernel, const DriveOptions& options);

// Runs a property on one problem, turning a kernel exception into a failing verdict.
Verdict check_safely(const PropertyInfo& property, const Problem& p, const Kernel& kernel, Oracle& oracle);

// A replay's verdict on one saved problem: exit 0 (pass), 1 (fail) or 2 (nothing checked: the
// problem is outside the kernel's declaration, the property does not apply to this kernel, or it
// tested nothing), and its lines.
// A vacuous bound is never a pass by itself: gate 2 decides, as in certify.
struct ReplayOutcome {
  int exit_code = 0;
  std::string text;
};
ReplayOutcome replay_check(const PropertyInfo& property, const Problem& p, const Kernel& kernel, Oracle& oracle);

// The number of cases to run: `base` times ATTEST_PROPERTY_SCALE (default 1) from the environment.
int scaled_cases(int base);

}  // namespace attest
