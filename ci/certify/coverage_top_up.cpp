// Coverage by design (docs/design.md#coverage-model): after the random draw, every internal path gets effective
// cases for the coverage targets (coverage_model.h) it admits. Per path, first each class: those
// the path was not seen with are drawn on purpose on the path's lengths; a class that never lands
// there is not taken by the path (its learned predicate). Then each pair of the classes the path
// takes (matches_reference at default, every property at thorough) and each triple (matches_reference
// at thorough). A target's rounds give it 1, 2, then 4 tries (one at quick; forced classes,
// the rest random) until it is covered, shown unreachable (no problem of this property inside the
// declaration lands there), served by another path, or shown to leave the property nothing to
// check. What is left makes the check insufficient. Counts, not time: the verdict never depends on
// the machine's speed.
#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "attest/properties/coverage_model.h"
#include "attest/properties/generators.h"
#include "attest/properties/harness.h"
#include "attest/properties/session_forward.h"
#include "certify.h"

namespace attest {
namespace {

constexpr const char* kNotTried = "no case ran within the top-up's cases";

// Where a path's top-up rounds left each target they could not cover.
struct RoundsOutcome {
  std::set<std::string> unreachable;           // never landed in its classes
  std::set<std::string> elsewhere;             // exercised only on other paths
  std::map<std::string, std::string> vacuous;  // ran on the path, never exercised the property: why
  std::vector<std::string> not_tried;          // the case cap ended the rounds first
  bool failed = false;                         // a case failed (recorded in the check)
};

RoundsOutcome run_rounds(CheckResult& r, const PropertyInfo& property, const Kernel& kernel, const DriveOptions& drive,
                         const PathShapes& discovered, const std::string& path, std::vector<std::string> wanted,
                         int rounds) {
  RoundsOutcome out;
  std::set<std::string> seen_elsewhere;
  for (int tries : {1, 2, 4}) {
    if (wanted.empty() || rounds-- <= 0) break;
    DriveOptions more = drive;
    more.targets = wanted;
    more.cases = static_cast<int>(std::min<std::size_t>(tries * wanted.size(), kCoverageTopUpCases));
    more.seed = drive.seed ^ std::hash<std::string>{}(path + wanted.front()) ^ static_cast<std::uint64_t>(tries);
    if (const auto it = discovered.find(path); it != discovered.end())  // the path's own lengths, unless forced
      for (const Shape& shape : it->second)
        if (more.shapes.size() < 4 && (property.needs.max_keys == 0 || shape.k_len <= property.needs.max_keys))
          more.shapes.push_back(shape);
    more.path = declared_predicate(kernel.capabilities(), path);
    const DriveResult d = drive_property(property, kernel, more);
    if (!absorb_top_up(r, d, fmt::format("coverage on path {}", path))) {
      out.failed = true;
      return out;
    }
    std::vector<std::string> still;
    for (const std::string& t : wanted) {
      if (r.paths[path].targets[t] > 0) continue;
      const bool as_one = path == kOtherPaths || path == kEveryPath;  // every path is this one
      const bool elsewhere = !as_one && std::any_of(d.paths.begin(), d.paths.end(), [&](const auto& q) {
        return q.first != path && q.second.targets.contains(t);
      });
      if (elsewhere) seen_elsewhere.insert(t);
      const bool ran = d.targets_skipped.contains(t);
      if (ran) out.vacuous[t] = d.targets_skipped.at(t);
      if (!ran && !seen_elsewhere.contains(t) && !out.vacuous.contains(t) && d.targets_missed.contains(t))
        out.unreachable.insert(t);
      else
        still.push_back(t);
    }
    wanted = still;
  }
  for (const std::string& t : wanted) {
    if (seen_elsewhere.contains(t) && !out.vacuous.contains(t))
      out.elsewhere.insert(t);
    else if (!out.vacuous.contains(t) && !seen_elsewhere.contains(t))
      out.not_tried.push_back(t);
  }
  for (const std::string& t : seen_elsewhere) out.vacuous.erase(t);  // exercised elsewhere: the path's choice
  return out;
}

}  // namespace

LearnedPaths learn_path_predicates(const Kernel& kernel, const PathShapes& discovered, const CertifyOptions& options) {
  LearnedPaths out;
  const Capabilities caps = kernel.capabilities();
  if (discovered.size() < 2 || discovered.size() > kMaxPaths || !caps.forward()) return out;
  const std::vector<std::string> classes = all_targets(coverage_axes(caps), 1);
  const rc::Gen<ProblemSpec> specs = gen_spec(caps);
  for (const auto& [path, shapes] : discovered) {
    ProblemNeeds needs;
    needs.shapes.assign(shapes.begin(), shapes.begin() + std::min<std::size_t>(4, shapes.size()));
    needs.path = declared_predicate(caps, path);
    for (const std::string& c : classes) {
      needs.force = {c};
      bool ran = false, landed = false;
      for (int t = 0; t < 7 && !landed; ++t) {  // as many draws as a target's three rounds give it
        const int seed = static_cast<int>((options.seed ^ std::hash<std::string>{}(path + c)) % 1000003) + t;
        const Problem p = build_problem(specs(rc::Random(seed), 50).value(), caps, needs);
        const std::vector<std::string> got = coverage_classes(p, caps);
        if (!caps.supports(p) || std::find(got.begin(), got.end(), c) == got.end()) continue;
        try {
          run_guarded(kernel, p);
        } catch (const KernelLoadError&) {
          throw;
        } catch (const std::exception&) {
          continue;  // the checks report it; learning only watches paths
        }
        ran = true;
        landed = kernel.last_path() == path;
      }
      if (ran && !landed) out[path].insert(c);
    }
  }
  return out;
}

int coverage_strength(int property_cases, const std::string& property) {
  if (property_cases <= 10) return 1;
  const int exact = property == "matches_reference" ? 1 : 0;  // the check every problem takes: one more
  return (property_cases >= 1000 ? 2 : 1) + exact;
}

namespace {

// What every path's top-up shares: the property's coverage classes and how hard to push.
struct TopUp {
  const PropertyInfo& property;
  const Kernel& kernel;
  const DriveOptions& drive;
  const PathShapes& discovered;
  std::vector<CoverageAxis> axes;
  std::vector<std::string> classes;
  int strength, rounds;
};

// One path's top-up (docs/design.md#coverage-model, above): its unseen classes, then the pairs (triples) of the
// classes it takes. Returns false when a case failed (recorded in r).
bool top_up_path(CheckResult& r, const TopUp& t, const std::string& path, const std::set<std::string>* elsewhere) {
  // The classes the path takes: those seen on it, and those that land on it when drawn on purpose.
  // A class the path's learned predicate leaves out (learn_path_predicates) is the kernel's choice,
  // not this property's: it is not drawn again, and is listed as not taken.
  std::vector<std::string> unseen;
  for (const std::string& c : t.classes)
    if (r.paths[path].targets[c] == 0 && !(elsewhere && elsewhere->contains(c))) unseen.push_back(c);
  RoundsOutcome singles = run_rounds(r, t.property, t.kernel, t.drive, t.discovered, path, unseen, t.rounds);
  if (singles.failed) return false;
  std::vector<std::string> taken, not_taken;
  for (const std::string& c : t.classes) (r.paths[path].targets[c] > 0 ? taken : not_taken).push_back(c);
  // The targets of this path: its classes, or every pair (triple) of them across two (three) axes.
  std::vector<std::string> targets = taken;
  if (t.strength >= 2) {
    targets.clear();
    for (const std::string& target : all_targets(t.axes, t.strength)) {
      const std::vector<std::string> pair = target_classes(target);
      if (std::all_of(pair.begin(), pair.end(), [&](const std::string& c) { return r.paths[path].targets[c] > 0; }))
        targets.push_back(target);
    }
  }
  std::vector<std::string> wanted;
  for (const std::string& target : targets)
    if (r.paths[path].targets[target] == 0) wanted.push_back(target);
  const RoundsOutcome pairs =
      t.strength >= 2 ? run_rounds(r, t.property, t.kernel, t.drive, t.discovered, path, wanted, t.rounds) : singles;
  if (pairs.failed) return false;
  // A class the path does not take is its predicate, not a gap. A target that ran on the path and
  // never exercised the property (no masked key in any row, say) is the property's blind spot,
  // listed, not required; one served only by other paths is theirs. What the case cap left untried
  // stays required.
  PathStats& stats = r.paths[path];
  stats.targets_not_taken = not_taken;
  stats.targets_unexercised.clear();
  for (const auto& [target, why] : pairs.vacuous)
    if (t.strength < 2 || std::find(targets.begin(), targets.end(), target) != targets.end())
      stats.targets_unexercised.push_back(target + ": " + why);
  stats.targets_uncovered.clear();
  for (const std::string& target : pairs.not_tried)
    if (std::find(targets.begin(), targets.end(), target) != targets.end()) stats.targets_uncovered.push_back(target);
  stats.targets_required = static_cast<long>(targets.size() - pairs.unreachable.size() - pairs.elsewhere.size() -
                                             stats.targets_unexercised.size());
  if (!stats.targets_uncovered.empty())
    r.path_shortfall.push_back(fmt::format("{}: {} coverage targets without an effective case (first: {}: {})", path,
                                           stats.targets_uncovered.size(), stats.targets_uncovered.front(), kNotTried));
  return true;
}

// Every path's evidence as one: the kernel as a whole.
PathStats merged(const std::map<std::string, PathStats>& paths) {
  PathStats all;
  for (const auto& [name, stats] : paths) {
    all.cases += stats.cases;
    all.worst_utilisation = std::max(all.worst_utilisation, stats.worst_utilisation);
    for (const auto& [target, n] : stats.targets) all.targets[target] += n;
  }
  return all;
}

}  // namespace

void top_up_targets(CheckResult& r, const PropertyInfo& property, const Kernel& kernel, const DriveOptions& drive,
                    const PathShapes& discovered, int strength, const LearnedPaths* learned) {
  if (!r.not_covered.empty() || r.failures > 0) return;
  Capabilities caps = kernel.capabilities();
  if (!property.needs_forward) caps.features = caps.features & session_features();  // as the driver draws
  TopUp t{property, kernel, drive, discovered, coverage_axes(caps), {}, strength, drive.cases <= 10 ? 1 : 3};
  if (property.needs.unmasks_keys)  // poisoned masked keys would become visible in its check
    for (CoverageAxis& axis : t.axes) std::erase(axis.classes, "values: poison");
  t.classes = all_targets(t.axes, 1);
  // A kernel naming more than kMaxPaths paths names calls, not code paths: its names are taken as
  // one (the report says so) and only the whole-kernel pass below runs.
  const bool many_names = r.paths.contains(kOtherPaths);
  if (!many_names) {
    std::vector<std::string> paths;
    for (const auto& [path, stats] : r.paths) paths.push_back(path);
    for (const std::string& path : paths)
      if (!top_up_path(r, t, path, learned && learned->contains(path) ? &learned->at(path) : nullptr)) return;
    if (r.paths.size() <= 1) return;  // one path: that pass was the kernel as a whole
  }
  // Then the kernel as a whole, whatever its path names: a class or pair that landed on no path
  // yet is drawn anywhere. A kernel's path report adds the per-path passes; it never removes this
  // one (one naming a path per shape once dodged the pair top-ups).
  const std::string every = many_names ? kOtherPaths : kEveryPath;
  CheckResult whole = r;
  whole.paths = {{every, merged(r.paths)}};
  whole.path_shortfall.clear();
  const bool passed = top_up_path(whole, t, every, nullptr);
  if (many_names || !passed) {
    if (!many_names) whole.paths = std::move(r.paths);  // the failure stands; the evidence stays per path
    r = std::move(whole);
    return;
  }
  // Per-path evidence stays per path; the whole pass's cases count in the check's totals, and
  // what it left uncovered within the case cap leaves the check short, as for a one-path kernel.
  std::vector<std::string> shortfall = std::move(r.path_shortfall);
  shortfall.insert(shortfall.end(), whole.path_shortfall.begin(), whole.path_shortfall.end());
  whole.paths = std::move(r.paths);
  whole.path_shortfall = std::move(shortfall);
  r = std::move(whole);
}

}  // namespace attest
