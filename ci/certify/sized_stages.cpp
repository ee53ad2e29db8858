// The size ladder and long-sequence stages, path discovery, and per-path top-ups of the
// property checks (real kernels switch code by size; each path needs its evidence).
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <iostream>
#include <limits>
#include <map>
#include <set>

#include "attest/properties/case_id.h"
#include "attest/properties/generators.h"
#include "attest/properties/harness.h"
#include "attest/properties/problem_file.h"
#include "attest/properties/safe_text.h"
#include "certify.h"
#include "check_selection.h"
#include "long_stage_plan.h"
#include "progress.h"

namespace attest {
namespace {

// A failing sized case is saved for replay: matches_reference on the whole problem (the
// sampled rows are where it failed; replay checks every row).
std::string save_sized_case(const std::string& check, const SizedCase& c, const Kernel& kernel, const Verdict& v,
                            const CertifyOptions& options) {
  // A session through an evicting cache has no replayable property of its own (decode_matches_prefill
  // would hold it to exact causal attention), nor one through block tables (replay decodes without
  // them): its failure is reported, not saved.
  if (c.retained_set || c.paged) return {};
  const std::string path =
      counterexample_path(options.out_dir + "/counterexamples", check + "_" + c.name, kernel.name(), c.problem);
  try {
    const std::string source = options.kernel_source.empty() ? kernel.name() : options.kernel_source;
    const std::string property = c.backward                ? "gradient_matches_reference"
                                 : c.decode_chunks.empty() ? "matches_reference"
                                                           : "decode_matches_prefill";
    save_problem_file(path, {c.problem, property, source, options.isolated, v.detail, 0});
  } catch (const std::exception& e) {
    std::cerr << "attest: cannot save counterexample: " << e.what() << "\n";
    return {};
  }
  return path;
}

// Gate 1 on one case, with the kernel's failures turned into verdicts as check_safely does. A
// call cut by the time budget (KernelFailure kTooSlow) is the caller's: coverage lost, not a verdict.
Verdict check_case(const SizedCase& c, const Kernel& kernel, int jobs, Oracle& oracle, double* kernel_seconds) {
  try {
    Verdict v = check_sized_case(c, kernel, jobs, &oracle, kernel_seconds);
    // Which internal path served the call (a backward's own, never the last forward's).
    if (!v.passed) v.detail += " [path: " + (c.backward ? backward_call_path(kernel) : kernel.last_path()) + "]";
    return v;
  } catch (const KernelLoadError&) {
    throw;
  } catch (const OutsideDeclaration& e) {
    if (!e.raised_by_attest())
      return Verdict::fail("matches_reference", "the kernel threw attest's OutsideDeclaration itself (only attest may)",
                           INFINITY);
    return Verdict::vacuous("matches_reference", e.what());
  } catch (const KernelFailure& e) {
    if (e.kind() == KernelFailure::Kind::kTooSlow) throw;
    Verdict v = Verdict::fail("matches_reference", std::string(e.headline()) + e.what(), INFINITY);
    v.isolation_failure = e.isolating();
    return v;
  } catch (const std::exception& e) {
    return Verdict::fail("matches_reference", std::string("the kernel threw: ") + e.what(), INFINITY);
  }
}

// The kernel's calls may be cut at `cutoff` while this lives (a time-budgeted case).
class CutoffScope {
 public:
  CutoffScope(const Kernel& kernel, std::optional<std::chrono::steady_clock::time_point> cutoff) : kernel_(kernel) {
    kernel_.set_cutoff(cutoff);
  }
  ~CutoffScope() { kernel_.set_cutoff(std::nullopt); }

 private:
  const Kernel& kernel_;
};

std::string shape_text(const SizedCase& c) {
  return fmt::format("{} (Tq {}, Tk {})", c.name, c.problem.shape.q_len, c.problem.shape.k_len);
}

// `plan`: the long stage's time budget; cases it cannot afford are listed as not reached.
CheckResult run_sized_check(const std::string& stage, const std::string& check, const std::vector<SizedCase>& cases,
                            const Kernel& kernel, Oracle& oracle, const CertifyOptions& options,
                            LongStagePlan* plan = nullptr) {
  CheckResult r{kernel.name(), stage, check};
  const auto start = std::chrono::steady_clock::now();
  int shortest_missed = std::numeric_limits<int>::max();  // keys of the shortest case not reached
  std::vector<int> ran;                                   // keys of each case that ran
  if (kernel.capabilities().contract.decode_only && cases.empty())
    r.not_covered = sized_not_covered(kernel.capabilities());
  for (const SizedCase& c : cases) {
    if (deadline_passed(options.deadline)) {
      r.failures += r.failures == 0;
      r.first_failure = fmt::format("the whole-run deadline was reached after {} cases", r.cases);
      break;
    }
    if (plan)
      if (const std::string why = plan->refuses(c); !why.empty()) {
        r.not_reached.push_back(fmt::format("{}: {}", shape_text(c), why));
        shortest_missed = std::min(shortest_missed, c.problem.shape.k_len);
        continue;
      }
    const auto case_start = std::chrono::steady_clock::now();
    double kernel_seconds = 0;
    Verdict v;
    try {
      CutoffScope scope(kernel, plan ? plan->cutoff(c) : std::nullopt);
      v = check_case(c, kernel, options.sizes.jobs, oracle, &kernel_seconds);
    } catch (const KernelFailure& e) {  // kTooSlow: a live kernel, cut by the budget within its prediction
      r.not_reached.push_back(fmt::format("{}: {}", shape_text(c), e.what()));
      shortest_missed = std::min(shortest_missed, c.problem.shape.k_len);
      continue;
    }
    ++r.cases;
    ran.push_back(c.problem.shape.k_len);
    const double case_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - case_start).count();
    if (plan) plan->learn(c, kernel_seconds, case_seconds);
    if (!r.record_case(v, c.problem, c.backward ? std::string(kBackwardPath) : kernel.last_path())) continue;
    if (stage == "long")
      report_detail(
          options,
          fmt::format("[{:7.1f}s] {} {} {}: Tq {} Tk {}, {} rows, err/bound {:.3g} ({:.2f} s, kernel {:.2f} s)",
                      elapsed_seconds(), kernel.name(), stage, c.name, c.problem.shape.q_len, c.problem.shape.k_len,
                      c.rows.empty() ? c.problem.shape.q_len : static_cast<int>(c.rows.size()), v.utilisation,
                      case_seconds, kernel_seconds));
    if (!v.passed && r.failures++ == 0) {
      r.first_failure =
          fmt::format("{} (Tq {}, Tk {}): {}", c.name, c.problem.shape.q_len, c.problem.shape.k_len, v.detail);
      r.failing_case = case_id(c.problem);
      r.counterexample_path = save_sized_case(check, c, kernel, v, options);
    }
    if (v.isolation_failure) {
      r.first_failure += " (check stopped: the kernel crashed or hung)";
      break;
    }
  }
  for (int keys : ran)
    if (keys < shortest_missed) r.reached_len = std::max(r.reached_len, keys);
  if (r.cases == 0 && r.not_reached.empty() && r.not_covered.empty())
    r.not_covered = sized_not_covered(kernel.capabilities());
  r.floor = r.not_covered.empty() ? effective_floor(std::max<long>(r.cases, 1)) : 0;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  report_check(options, r,
               fmt::format("{} of {} cases effective, {} not reached, {:.2f} s", r.effective, r.cases,
                           r.not_reached.size(), r.seconds));
  return r;
}

// The keys a long stage must reach for a pass: the budget level's length, and at least
// tile_multiple of the kernel's largest tile, never more than the longest case it has.
int required_length(const Capabilities& caps, const SizeOptions& sizes, const std::vector<SizedCase>& cases) {
  const int tile = std::max(caps.contract.query_tile, caps.contract.key_tile);
  int required = std::max(sizes.required_len, sizes.tile_multiple * tile);
  int longest = 0;
  for (const SizedCase& c : cases) longest = std::max(longest, c.problem.shape.k_len);
  return std::min(required, longest);
}

// The keys of the shortest case that meets the required length: the budget never cuts it. With
// --lengths that skip the required length itself (256, 1024, 65536 at quick's 512) that is the
// next one up; otherwise a busy machine could leave the stage short of its requirement.
int shortest_reaching(const std::vector<SizedCase>& cases, int required) {
  int shortest = std::numeric_limits<int>::max();
  for (const SizedCase& c : cases)
    if (c.problem.shape.k_len >= required) shortest = std::min(shortest, c.problem.shape.k_len);
  return shortest == std::numeric_limits<int>::max() ? required : shortest;
}

// One case per family at the longest ladder length, to time the kernel before the first long case.
std::vector<SizedCase> calibration_cases(const Capabilities& caps, const SizeOptions& sizes,
                                         const std::vector<SizedCase>& long_ones) {
  std::map<std::string, SizedCase> last;
  for (const SizedCase& c : ladder_cases(caps, sizes)) last.insert_or_assign(case_family(c.name), c);
  std::vector<SizedCase> out;
  std::set<std::string> wanted;
  for (const SizedCase& c : long_ones) wanted.insert(case_family(c.name));
  for (auto& [family, c] : last)
    if (wanted.contains(family) || family == "square") out.push_back(std::move(c));
  return out;
}

// Cheapest first (dense work), so the time budget buys every length it can.
void cheapest_first(std::vector<SizedCase>& cases) {
  std::stable_sort(cases.begin(), cases.end(), [](const SizedCase& a, const SizedCase& b) {
    const Shape &x = a.problem.shape, &y = b.problem.shape;
    return double(x.batch) * x.heads * x.q_len * x.k_len < double(y.batch) * y.heads * y.q_len * y.k_len;
  });
}

// One check of the long stage over its cases (sorted cheapest first), on the stage's time budget.
CheckResult run_long_check(const std::string& check, const std::vector<SizedCase>& cases, const Kernel& kernel,
                           Oracle& oracle, const CertifyOptions& options, LongStagePlan& plan) {
  const int required = required_length(kernel.capabilities(), options.sizes, cases);
  CheckResult r = run_sized_check("long", check, cases, kernel, oracle, options, &plan);
  r.time_budget = options.sizes.time_budget;
  if (r.not_covered.empty()) r.required_len = required;
  // What the sampled checks judged, for the certificate: rows per case.
  std::size_t rows = 0;
  for (const SizedCase& c : cases) rows = std::max(rows, c.rows.size());
  if (rows > 0 && r.cases > 0) r.feature_cases[fmt::format("sampled rows per case: up to {}", rows)] = r.cases;
  return r;
}

}  // namespace

std::string sized_not_covered(const Capabilities& caps) {
  if (!caps.contract.decode_only) return "no case of these sizes lies inside the kernel's declaration";
  return caps.cache.evicts()
             ? "the kernel is decode-only and its cache (" + caps.cache.summary() +
                   ") evicts before these sizes; eviction_matches_retained_set and the long stage's "
                   "eviction_sampled_steps hold it to what it keeps"
             : "the kernel is decode-only and declares nothing a decode session can be held to at these sizes";
}

LongCases split_long_cases(const Capabilities& caps, const SizeOptions& sizes) {
  std::vector<SizedCase> all = long_cases(caps, sizes);
  cheapest_first(all);
  LongCases out;
  for (SizedCase& c : all)
    (c.backward       ? out.backward
     : c.retained_set ? out.retained
     : c.paged        ? out.paged
                      : out.forward)
        .push_back(std::move(c));
  return out;
}

SizeOptions sizes_for_budget(int property_cases) {
  SizeOptions s;
  // The long stage's time budget and the keys it must reach for a pass: the length a user can
  // count on whatever the machine's load, the rest as far as the kernel's speed allows.
  s.time_budget = 20, s.required_len = 1024, s.tile_multiple = 4;
  if (property_cases <= 10) {  // quick
    s.max_len = 4096, s.full_rows_limit = 256, s.square_limit = 2048, s.sampled_rows = 32;
    s.time_budget = 8, s.required_len = 512, s.tile_multiple = 2;
  } else if (property_cases >= 1000) {  // thorough
    s.max_len = 65536, s.square_limit = 16384, s.sampled_rows = 128;
    s.time_budget = 120, s.required_len = 4096, s.tile_multiple = 8;
  }
  return s;
}

std::optional<PathPredicate> declared_predicate(const Capabilities& caps, const std::string& path) {
  for (const PathPredicate& declared : caps.paths)
    if (declared.path == path) return declared;
  return std::nullopt;
}

PathShapes discover_paths(const Kernel& kernel, const CertifyOptions& options) {
  PathShapes found;
  if (!kernel.capabilities().forward()) return found;
  // The ladder, and the long stage's decode shapes (one query, up to 4096 keys: cheap), where a
  // split-KV path for long decode calls shows (both have them with one batch entry and two).
  std::vector<SizedCase> cases;
  if (options.sized_stages) {  // without the size stages, only what the kernel declares
    cases = ladder_cases(kernel.capabilities(), options.sizes);
    for (SizedCase& c : long_cases(kernel.capabilities(), options.sizes))
      if (c.problem.shape.q_len <= 4 && c.problem.shape.k_len <= 4096) cases.push_back(std::move(c));
  }
  for (const SizedCase& c : cases) {
    if (!c.decode_chunks.empty() || c.backward) continue;  // the forward's paths only
    try {
      run_guarded(kernel, c.problem);
    } catch (const KernelLoadError&) {
      throw;
    } catch (const KernelFailure& e) {
      if (e.isolating()) break;  // a crash or hang: every further case would repeat it, slowly
      continue;                  // the ladder stage reports it; discovery only learns paths
    } catch (const std::exception&) {
      continue;
    }
    found[kernel.last_path()].push_back(c.problem.shape);
  }
  // Declared paths get lengths at the edges of every declared predicate (where one path ends and
  // the next begins), clamped into their own; their top-ups bend each problem into the predicate
  // (run_rounds, top_up_paths).
  // Two heads, sharing one K/V head only where the kernel declares GQA: the top-ups discard a
  // shape the declaration excludes (seed 7 #91 of selfcheck: every GQA shape of a kernel without
  // it, "path short-q: 2 of 3 cases").
  const Capabilities caps = kernel.capabilities();
  const DeclaredEdges edges = declared_edges(caps);
  for (const PathPredicate& declared : caps.paths) {
    const int heads = static_cast<int>(caps.contract.heads.clamp(declared.heads.clamp(2)));
    const int kv_heads = caps.declares(Feature::kGqa) && heads % 2 == 0 ? heads / 2 : heads;
    for (int tq : edges.queries)
      for (int tk : edges.keys)
        found[declared.path].push_back({1, heads, kv_heads,
                                        static_cast<int>(caps.contract.q_len.clamp(declared.q_len.clamp(tq))),
                                        static_cast<int>(caps.contract.k_len.clamp(declared.k_len.clamp(tk))), 16, 16});
  }
  auto key = [](const Shape& s) {
    return std::tuple{1LL * s.q_len * s.k_len, s.q_len, s.k_len, s.batch, s.heads, s.kv_heads, s.head_dim, s.value_dim};
  };
  for (auto& [path, shapes] : found) {
    std::sort(shapes.begin(), shapes.end(), [&](const Shape& a, const Shape& b) { return key(a) < key(b); });
    shapes.erase(
        std::unique(shapes.begin(), shapes.end(), [&](const Shape& a, const Shape& b) { return key(a) == key(b); }),
        shapes.end());
  }
  return found;
}

std::vector<CheckResult> run_sized_stages(const Kernel& kernel, Oracle& oracle, const CertifyOptions& options) {
  std::vector<CheckResult> results;
  const Capabilities caps = kernel.capabilities();
  oracle.set_jobs(options.sizes.jobs);
  if (takes_check(options, kLadderCheck))
    results.push_back(
        run_sized_check("ladder", kLadderCheck, ladder_cases(caps, options.sizes), kernel, oracle, options));
  // The long stage: the forward's cases, then (each its own check, on what is left of the stage's
  // one time budget) the backward's, an evicting cache's sessions and block-table sessions, when the
  // kernel has them.
  const LongCases split = split_long_cases(caps, options.sizes);
  const bool forward_check = takes_check(options, kLongCheck);
  const bool backward_check = !split.backward.empty() && takes_check(options, kLongBackwardCheck);
  const bool retained_check = !split.retained.empty() && takes_check(options, kLongEvictionCheck);
  const bool paged_check = !split.paged.empty() && takes_check(options, kLongPagedCheck);
  if (!forward_check && !backward_check && !retained_check && !paged_check) return results;
  std::vector<SizedCase> all = split.forward;
  all.insert(all.end(), split.backward.begin(), split.backward.end());
  all.insert(all.end(), split.retained.begin(), split.retained.end());
  all.insert(all.end(), split.paged.begin(), split.paged.end());
  LongStagePlan plan(kernel, options.sizes.time_budget,
                     shortest_reaching(all, required_length(caps, options.sizes, all)), all,
                     calibration_cases(caps, options.sizes, all));
  if (forward_check) results.push_back(run_long_check(kLongCheck, split.forward, kernel, oracle, options, plan));
  if (backward_check)
    results.push_back(run_long_check(kLongBackwardCheck, split.backward, kernel, oracle, options, plan));
  if (retained_check)
    results.push_back(run_long_check(kLongEvictionCheck, split.retained, kernel, oracle, options, plan));
  if (paged_check) results.push_back(run_long_check(kLongPagedCheck, split.paged, kernel, oracle, options, plan));
  return results;
}

bool absorb_top_up(CheckResult& r, const DriveResult& d, const std::string& what) {
  r.cases += d.asked;
  r.effective += d.effective;
  for (const auto& [why, n] : d.skipped) r.skipped[why] += n;
  for (const auto& [f, n] : d.feature_cases) r.feature_cases[f] += n;
  for (const auto& [name, n] : d.class_cases) r.shape_classes[name] += n;
  r.longest_q = std::max(r.longest_q, d.longest_q), r.longest_k = std::max(r.longest_k, d.longest_k);
  for (const auto& [p, stats] : d.paths) {
    // While a kernel's path names are taken as one (the whole-kernel pass), every case joins them.
    const bool as_one = r.paths.size() == 1 && (r.paths.contains(kOtherPaths) || r.paths.contains(kEveryPath));
    PathStats& mine = as_one ? r.paths.begin()->second : path_entry(r.paths, p);
    mine.cases += stats.cases;
    mine.worst_utilisation = std::max(mine.worst_utilisation, stats.worst_utilisation);
    for (const auto& [target, n] : stats.targets) mine.targets[target] += n;
  }
  r.seconds += d.seconds;
  r.probes_redone += d.probes_redone, r.probes_kept_off_path += d.probes_kept_off_path;
  if (d.passed) {
    r.worst_utilisation = std::max(r.worst_utilisation, d.worst_utilisation);
    return true;
  }
  r.failures = 1;
  r.worst_utilisation = std::max({r.worst_utilisation, d.worst_utilisation, d.failure_utilisation});
  r.first_failure = fmt::format("[{} top-up] {}", what, d.message);
  r.counterexample_path = d.counterexample_path;
  r.counterexample = d.counterexample;
  r.reproduce = d.reproduce;
  r.seed = d.seed;
  return false;
}

void top_up_classes(CheckResult& r, const PropertyInfo& property, const Kernel& kernel, const DriveOptions& drive,
                    int cases_per_class) {
  if (!r.not_covered.empty() || r.failures > 0 || cases_per_class <= 0) return;
  for (const ShapeClass& c : shape_classes()) {
    if (!shape_class_fits(c, kernel.capabilities(), property.needs))
      continue;                                 // outside the contract: nothing to claim
    const long have = r.shape_classes[c.name];  // what the draw gave already
    if (have >= cases_per_class) continue;
    DriveOptions more = drive;
    more.shape_class = std::pair{static_cast<int>(c.regime), c.index};
    more.cases = static_cast<int>(cases_per_class - have);
    more.seed = drive.seed ^ std::hash<std::string>{}(c.name);
    if (!absorb_top_up(r, drive_property(property, kernel, more), c.name)) return;
  }
}

void top_up_paths(CheckResult& r, const PropertyInfo& property, const Kernel& kernel, const DriveOptions& drive,
                  const PathShapes& discovered) {
  if (!r.not_covered.empty() || r.failures > 0) return;
  for (const auto& [path, all_shapes] : discovered) {
    if (r.paths[path].cases >= kPathFloor) continue;
    // The path's smallest shapes this property can generate (a property may cap the keys).
    std::vector<Shape> shapes;
    for (const Shape& s : all_shapes)
      if ((property.needs.max_keys == 0 || s.k_len <= property.needs.max_keys) && shapes.size() < 4)
        shapes.push_back(s);
    if (shapes.empty()) {
      r.paths.erase(path);  // no problem this property can take reaches the path: nothing to require
      continue;
    }
    DriveOptions more = drive;
    more.shapes = shapes;
    more.path = declared_predicate(kernel.capabilities(), path);
    more.cases = static_cast<int>(2 * kPathFloor);
    more.seed = drive.seed ^ std::hash<std::string>{}(path);
    if (!absorb_top_up(r, drive_property(property, kernel, more), "path " + path)) return;
  }
}

void record_path_shortfall(CheckResult& r, const PathShapes& discovered) {
  if (!r.not_covered.empty() || r.failures > 0) return;
  for (const auto& [path, shapes] : discovered)
    if (auto it = r.paths.find(path); it != r.paths.end() && it->second.cases < kPathFloor)
      r.path_shortfall.push_back(fmt::format("{}: {} of {} cases", path, it->second.cases, kPathFloor));
}

}  // namespace attest
