#include "certificate.h"

#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <ctime>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "attest/properties/coverage_model.h"
#include "attest/properties/precision_limit.h"
#include "attest/properties/safe_text.h"

namespace attest {
namespace {

using nlohmann::json;

const char* verdict_of(const CheckResult& r) { return to_string(r.status()); }

// JSON has no infinity: an unbounded utilisation is written as null.
json finite_or_null(double x) { return std::isfinite(x) ? json(x) : json(nullptr); }

json range_json(const Range& r) { return r.unlimited() ? json(nullptr) : json::array({r.min, r.max}); }

json contract_json(const Contract& c) {
  json out = {{"head_dims", c.head_dims},
              {"head_dim", range_json(c.head_dim)},
              {"batch", range_json(c.batch)},
              {"heads", range_json(c.heads)},
              {"q_len", range_json(c.q_len)},
              {"k_len", range_json(c.k_len)},
              {"q_offset", range_json(c.q_offset)},
              {"dk_equals_dv", c.dk_equals_dv},
              {"default_scale_only", c.default_scale_only},
              {"causal_required", c.causal_required},
              {"decode_only", c.decode_only},
              {"self_attention_only", c.self_attention_only},
              {"alibi_slopes", c.alibi_slopes == AlibiSlopes::kStandard ? "standard" : "arbitrary"},
              {"alibi_max_bias", c.alibi_max_bias},
              {"max_abs_value", c.max_abs_value},
              {"query_tile", c.query_tile},
              {"key_tile", c.key_tile},
              {"decode_lse_optional", c.decode_lse_optional},
              {"summary", c.summary()}};
  // ABI 2.7's fields only when declared: certificates of kernels without them stay as they were.
  if (!c.value_dims.empty()) out["value_dims"] = c.value_dims;
  if (!c.value_dim.unlimited()) out["value_dim"] = range_json(c.value_dim);
  if (c.alibi_excludes_bias) out["alibi_excludes_bias"] = true;
  return out;
}

json precision_json(const Precision& p) {
  json out = {{"q", to_string(p.q)},
              {"k", to_string(p.k)},
              {"v", to_string(p.v)},
              {"o", to_string(p.o)},
              {"bias", to_string(p.bias)},
              {"q_entry", to_string(p.q_entry)},
              {"k_entry", to_string(p.k_entry)},
              {"v_entry", to_string(p.v_entry)},
              {"scores", to_string(p.scores)},
              {"p", to_string(p.p)},
              {"accumulator", to_string(p.accumulator)},
              {"weight_sum", to_string(p.sum_precision())},
              {"pv_unnormalised", p.pv_unnormalised},
              {"summary", p.summary()}};
  if (p.flush_subnormals) out["flush_subnormals"] = true;  // ABI 2.9, only when declared
  return out;
}

json path_precision_json(const Capabilities& c) {
  json out = json::object();
  for (const auto& [path, p] : c.path_precision) out[path] = precision_json(p);
  return out;
}

json declared_paths_json(const std::vector<PathPredicate>& paths) {
  json out = json::array();
  for (const PathPredicate& d : paths) {
    out.push_back({{"path", d.path},
                   {"batch", range_json(d.batch)},
                   {"heads", range_json(d.heads)},
                   {"q_len", range_json(d.q_len)},
                   {"k_len", range_json(d.k_len)},
                   {"head_dim", range_json(d.head_dim)},
                   {"value_dim", range_json(d.value_dim)},
                   {"head_dim_multiple", d.head_dim_multiple},
                   {"value_dim_multiple", d.value_dim_multiple},
                   {"k_len_multiple", d.k_len_multiple},
                   {"k_len_not_multiple", d.k_len_not_multiple},
                   {"required", d.required.names()},
                   {"excluded", d.excluded.names()},
                   {"no_mask", d.no_mask},
                   {"summary", d.summary()}});
    if (d.key_tile > 0) out.back()["key_tile"] = d.key_tile;  // ABI 2.7: absent means the contract's
  }
  return out;
}

json capabilities_json(const Capabilities& c) {
  return {{"features", c.features.names()},
          {"empty_rows", to_string(c.empty_rows)},
          {"inputs", to_string(c.inputs)},
          {"deterministic_backward", c.deterministic_backward},
          {"precision", precision_json(c.precision)},
          {"path_precision", path_precision_json(c)},
          {"exp_ulps", c.precision.exp_ulps},
          {"key_tile", c.key_tile()},
          {"contract", contract_json(c.contract)},
          {"declared_paths", declared_paths_json(c.paths)},
          {"cache",
           {{"policy", to_string(c.cache.kind)},
            {"sinks", c.cache.sinks},
            {"recent", c.cache.recent},
            {"summary", c.cache.summary()},
            {"page_tokens", c.page_tokens}}}};
}

std::string now_utc() {
  const std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

std::string xml_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += (static_cast<unsigned char>(c) < 0x20 && c != '\n' && c != '\t') ? ' ' : c;
    }
  }
  return out;
}

// The pairs of classes a path reached, with their effective cases: the coverage model's pair
// targets as evidence, so a report can draw which pair was never reached (strength 1 included).
// Written once per kernel path (over every check; a shard also per check, for the merge): per
// check and path everywhere made a default-budget certificate 14 times larger.
std::map<std::string, long> pair_cases(const PathStats& stats) {
  std::map<std::string, long> pairs;
  for (const auto& [target, n] : stats.targets)
    if (n > 0 && target_classes(target).size() == 2) pairs[target] = n;
  return pairs;
}

}  // namespace

std::string certificate_json(const CertificateInfo& info) {
  json kernels = json::array();
  bool all = true;
  for (const KernelReport& k : info.kernels) {
    json checks = json::array();
    std::map<std::string, PathStats> paths;
    for (const CheckResult& r : k.checks) {
      json check = {{"stage", r.stage},
                    {"check", r.check},
                    {"verdict", verdict_of(r)},
                    {"cases", r.cases},
                    {"effective_cases", r.effective},
                    {"floor", r.floor},
                    {"longest", {{"q_len", r.longest_q}, {"k_len", r.longest_k}}},
                    {"skipped", r.skipped},
                    {"failures", r.failures},
                    {"worst_utilisation", finite_or_null(r.worst_utilisation)},
                    {"seconds", r.seconds}};
      if (!r.not_covered.empty()) check["not_covered"] = r.not_covered;
      if (!r.feature_cases.empty()) check["feature_cases"] = r.feature_cases;
      if (r.seed) check["seed"] = r.seed;
      if (!r.first_failure.empty()) check["first_failure"] = r.first_failure;
      if (!r.failing_case.empty()) check["failing_case"] = r.failing_case;
      if (!r.counterexample_path.empty()) check["counterexample"] = r.counterexample_path;
      if (!r.reproduce.empty()) check["reproduce"] = r.reproduce;
      if (!r.path_shortfall.empty()) check["path_shortfall"] = r.path_shortfall;
      if (!r.shape_classes.empty()) check["shape_classes"] = r.shape_classes;
      if (r.probes_redone + r.probes_kept_off_path > 0)
        check["probes_off_path"] = {{"redone", r.probes_redone}, {"kept", r.probes_kept_off_path}};
      for (const auto& [path, stats] : r.paths)
        if (stats.targets_required > 0)
          check["coverage"][path] = {
              {"required", stats.targets_required},
              {"covered", stats.targets_required - static_cast<long>(stats.targets_uncovered.size())},
              {"uncovered", stats.targets_uncovered},
              {"unexercised", stats.targets_unexercised},
              {"not_taken", stats.targets_not_taken}};
      if (r.time_budget > 0) check["time_budget_seconds"] = r.time_budget;
      if (!r.not_reached.empty()) check["not_reached"] = r.not_reached;
      if (r.required_len > 0) check["required_length"] = r.required_len, check["reached_length"] = r.reached_len;
      // A shard keeps each check's paths: the merge sums the kernel's paths over the merged checks.
      if (info.shard)
        for (const auto& [path, stats] : r.paths)
          check["paths"][path] = {{"cases", stats.cases},
                                  {"worst_utilisation", finite_or_null(stats.worst_utilisation)},
                                  {"pair_cases", pair_cases(stats)}};
      checks.push_back(check);
      for (const auto& [path, stats] : r.paths) {
        PathStats& mine = path_entry(paths, path);
        mine.cases += stats.cases;
        mine.worst_utilisation = std::max(mine.worst_utilisation, stats.worst_utilisation);
        mine.targets_required += stats.targets_required;
        mine.targets_uncovered.insert(mine.targets_uncovered.end(), stats.targets_uncovered.begin(),
                                      stats.targets_uncovered.end());
        for (const auto& [target, n] : stats.targets) mine.targets[target] += n;
      }
    }
    json path_list = json::array();
    for (const auto& [path, stats] : paths)
      path_list.push_back(
          {{"path", path},
           {"cases", stats.cases},
           {"worst_utilisation", finite_or_null(stats.worst_utilisation)},
           {"targets_required", stats.targets_required},
           {"targets_covered", stats.targets_required - static_cast<long>(stats.targets_uncovered.size())},
           {"pair_cases", pair_cases(stats)}});
    all = all && k.passed();
    json limits = json::array();
    for (const PrecisionLimit& l : precision_limits(k.capabilities))
      limits.push_back({{"path", l.path}, {"kind", l.kind}, {"length", l.length}, {"detail", l.detail}});
    kernels.push_back({{"source", k.source},
                       {"name", k.name},
                       {"descriptor", capabilities_json(k.capabilities)},
                       {"certified", k.passed()},
                       {"covered_features", k.covered_features()},
                       {"exercised_features", k.exercised().names()},
                       {"not_covered_features", (k.undeclared() | k.declared_unexercised()).names()},
                       {"required_features", k.required.names()},
                       {"identity", k.identity},
                       {"checks", checks},
                       {"paths", path_list},
                       {"precision_limits", limits}});
  }
  json doc = {{"format", kCertificateFormat},
              {"version", kCertificateVersion},
              {"harness", {{"name", "attest"}, {"version", ATTEST_VERSION}}},
              {"created", now_utc()},
              {"seed", info.seed},
              {"cases_per_property", info.property_cases},
              {"options", info.options},
              {"certified", all},
              {"kernels", kernels}};
  if (info.shard) doc["shard"] = {{"index", info.shard->index}, {"count", info.shard->count}};
  return doc.dump(2, ' ', false, json::error_handler_t::replace);  // never throws on odd bytes
}

std::string certificate_junit(const CertificateInfo& info) {
  std::string out = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"attest\">\n";
  for (const KernelReport& k : info.kernels) {
    long failures = 0, skipped = 0;
    double seconds = 0;
    for (const CheckResult& r : k.checks) {
      failures += r.blocks();
      skipped += r.status() == CheckStatus::kNotCovered;
      seconds += r.seconds;
    }
    out += fmt::format("  <testsuite name=\"attest.{}\" tests=\"{}\" failures=\"{}\" skipped=\"{}\" time=\"{:.3f}\">\n",
                       xml_escape(k.name), k.checks.size(), failures, skipped, seconds);
    for (const CheckResult& r : k.checks) {
      out += fmt::format("    <testcase classname=\"attest.{}.{}\" name=\"{}\" time=\"{:.3f}\">", xml_escape(k.name),
                         r.stage, r.check, r.seconds);
      if (r.status() == CheckStatus::kNotCovered)
        out += fmt::format("<skipped message=\"{}\"/>", xml_escape(r.not_covered));
      if (r.status() == CheckStatus::kInsufficient)
        out += fmt::format("<failure message=\"insufficient: {} of {} cases exercised it\"/>", r.effective, r.cases);
      if (!r.passed())
        out += fmt::format(
            "<failure message=\"{}\">{}{}</failure>", xml_escape(r.first_failure), xml_escape(r.first_failure),
            r.counterexample_path.empty() ? "" : "\ncounterexample: " + xml_escape(r.counterexample_path));
      out += "</testcase>\n";
    }
    out += "  </testsuite>\n";
  }
  return out + "</testsuites>\n";
}

namespace {

// How a kernel's claims narrowed since the baseline: features, contract, precision.
void claims_regressions(const KernelReport& k, const BaselineClaims& old, std::vector<std::string>& reasons) {
  const Capabilities& c = k.capabilities;
  for (const std::string& f : old.features)
    if (const auto feature = feature_named(f); feature && !c.declares(*feature))
      reasons.push_back(fmt::format("{}: no longer declares {}", k.name, f));
  const FeatureSet exercised = k.exercised();
  for (const std::string& f : old.exercised_features)
    if (const auto feature = feature_named(f); feature && c.declares(*feature) && !exercised.contains(*feature))
      reasons.push_back(fmt::format("{}: {} was covered in the baseline, not now", k.name, f));
  const Precision& p = c.precision;
  const std::pair<const char*, Scalar> now_formats[] = {{"q", p.q},
                                                        {"k", p.k},
                                                        {"v", p.v},
                                                        {"o", p.o},
                                                        {"bias", p.bias},
                                                        {"q_entry", p.q_entry},
                                                        {"k_entry", p.k_entry},
                                                        {"v_entry", p.v_entry},
                                                        {"scores", p.scores},
                                                        {"p", p.p},
                                                        {"accumulator", p.accumulator},
                                                        {"weight_sum", p.sum_precision()}};
  for (auto [field, now_format] : now_formats) {
    Scalar before = Scalar::kF32;
    const auto it = old.precision.find(field);
    if (it != old.precision.end() && parse_scalar(it->second, before) &&
        unit_roundoff(now_format) > unit_roundoff(before))
      reasons.push_back(
          fmt::format("{}: looser precision: {} {} (was {})", k.name, field, to_string(now_format), it->second));
  }
  if (p.flush_subnormals && !old.flush_subnormals)
    reasons.push_back(fmt::format("{}: looser precision: subnormals flushed (were kept)", k.name));
  if (p.exp_ulps > old.exp_ulps)
    reasons.push_back(fmt::format("{}: looser exp: {:g} ulp (was {:g})", k.name, p.exp_ulps, old.exp_ulps));
  const Contract& t = c.contract;
  const std::pair<const char*, bool> restrictions[] = {
      {"dk_equals_dv", t.dk_equals_dv},
      {"default_scale_only", t.default_scale_only},
      {"causal_required", t.causal_required},
      {"decode_only", t.decode_only},
      {"self_attention_only", t.self_attention_only},
      {"standard_alibi_slopes", t.alibi_slopes == AlibiSlopes::kStandard}};
  for (auto [name, now_on] : restrictions)
    if (now_on && !old.restrictions.at(name))
      reasons.push_back(fmt::format("{}: contract narrowed: {} (the baseline had no such restriction)", k.name, name));
  for (long long d : old.head_dims)
    if (!t.accepts_head_dim(static_cast<int>(d)))
      reasons.push_back(fmt::format("{}: contract narrowed: head width {} no longer accepted", k.name, d));
  if (old.head_dims.empty() && !t.head_dims.empty())
    reasons.push_back(
        fmt::format("{}: contract narrowed to head widths {} (the baseline accepted a range)", k.name, t.summary()));
  const std::pair<const char*, const Range*> ranges[] = {{"head_dim", &t.head_dim}, {"batch", &t.batch},
                                                         {"heads", &t.heads},       {"q_len", &t.q_len},
                                                         {"k_len", &t.k_len},       {"q_offset", &t.q_offset}};
  const json now_declaration = capabilities_json(c);
  for (const auto& [field, before] : old.declaration) {
    if (!now_declaration.contains(field)) continue;
    const std::string now =
        safe_text(now_declaration[field].dump(-1, ' ', false, json::error_handler_t::replace), 1024);
    if (now != before)
      reasons.push_back(
          fmt::format("{}: declaration changed: {} is {} (the baseline: {})", k.name, field, now, before));
  }
  for (auto [name, now_range] : ranges) {
    const auto& before = old.ranges.at(name);
    const bool narrower =
        before ? (!now_range->unlimited() && (now_range->min > before->first || now_range->max < before->second))
               : !now_range->unlimited();
    if (narrower)
      reasons.push_back(fmt::format("{}: contract narrowed: {} (the baseline: {})", k.name, name,
                                    before ? fmt::format("[{}, {}]", before->first, before->second) : "any"));
  }
}

}  // namespace

std::tuple<std::string, std::string, std::string> first_difference(const std::map<std::string, std::string>& mine,
                                                                   const std::map<std::string, std::string>& theirs) {
  std::map<std::string, std::pair<std::string, std::string>> both;
  for (const auto& [key, value] : mine) both[key] = {value, "(none)"};
  for (const auto& [key, value] : theirs) both.try_emplace(key, "(none)", value).first->second.second = value;
  for (const auto& [key, values] : both)
    if (values.first != values.second) return {key, values.first, values.second};
  return {"", "", ""};
}

std::optional<std::string> options_difference(const Baseline& baseline, const CertificateInfo& now) {
  if (!baseline.options || baseline.options->empty() || now.options.empty() || *baseline.options == now.options)
    return std::nullopt;  // not recorded (an older certificate, or one built in a test): compared as before
  const auto [key, value, was] = first_difference(now.options, *baseline.options);
  return fmt::format("option {} is {}, the baseline's {}", key, value, was);
}

std::vector<std::string> regressions(const Baseline& baseline, const CertificateInfo& now, double factor) {
  std::vector<std::string> reasons;
  // A run made with other lengths, widths, budgets or timeouts is not comparable check by check.
  if (const auto difference = options_difference(baseline, now); difference && !baseline.any_options)
    reasons.push_back(*difference + " (compare runs made alike, or pass --baseline-any-options)");
  if (baseline.kernels.size() == 1 && now.kernels.size() == 1 && baseline.kernels[0].name != now.kernels[0].name)
    reasons.push_back(fmt::format("the baseline certified kernel {}, this run certifies {}", baseline.kernels[0].name,
                                  now.kernels[0].name));
  for (const BaselineKernel& old_kernel : baseline.kernels) {
    const KernelReport* k = nullptr;
    for (const KernelReport& candidate : now.kernels)
      if (candidate.name == old_kernel.name) k = &candidate;
    if (!k) {
      if (!(baseline.kernels.size() == 1 && now.kernels.size() == 1))
        reasons.push_back(fmt::format("{}: in the baseline, not in this run", old_kernel.name));
      continue;
    }
    if (old_kernel.claims) claims_regressions(*k, *old_kernel.claims, reasons);
    std::map<std::string, long> now_paths;
    for (const CheckResult& r : k->checks)
      for (const auto& [path, stats] : r.paths) now_paths[path] += stats.cases;
    // A time-budgeted stage that did not reach every length may have missed a path only long
    // problems take: how busy the machine was, not a regression.
    const bool cut_short = std::any_of(k->checks.begin(), k->checks.end(), [](const CheckResult& r) {
      return r.time_budget > 0 && !r.not_reached.empty();
    });
    for (const auto& [path, cases] : old_kernel.paths)
      if (cases > 0 && now_paths[path] == 0 && !cut_short)
        reasons.push_back(
            fmt::format("{}: internal path '{}' had {} cases in the baseline, none now", k->name, path, cases));
    for (const BaselineCheck& oc : old_kernel.checks) {
      if (oc.verdict != "pass") continue;
      const CheckResult* r = nullptr;
      for (const CheckResult& candidate : k->checks)
        if (candidate.stage == oc.stage && candidate.check == oc.check) r = &candidate;
      if (!r) {
        reasons.push_back(fmt::format("{} {}: passed in the baseline, not run now", k->name, oc.check));
        continue;
      }
      switch (r->status()) {
        case CheckStatus::kFail:
          reasons.push_back(
              fmt::format("{} {}: passed in the baseline, fails now: {}", k->name, r->check, r->first_failure));
          continue;
        case CheckStatus::kNotCovered:
          reasons.push_back(
              fmt::format("{} {}: passed in the baseline, not covered now ({})", k->name, r->check, r->not_covered));
          continue;
        case CheckStatus::kInsufficient:
          reasons.push_back(fmt::format("{} {}: passed in the baseline, insufficient now ({} effective cases)", k->name,
                                        r->check, r->effective));
          continue;
        case CheckStatus::kPass:
          break;
      }
      // A time-budgeted stage's count follows the machine's speed; its required length is the claim.
      if (r->time_budget == 0 && static_cast<double>(r->effective) * factor < static_cast<double>(oc.effective))
        reasons.push_back(fmt::format("{} {}: {} effective cases, the baseline had {} (fewer by more than {}x)",
                                      k->name, r->check, r->effective, oc.effective, factor));
      const double old_util = oc.worst_utilisation.value_or(INFINITY);
      if (r->worst_utilisation > factor * std::max(old_util, 0.01))
        reasons.push_back(fmt::format("{} {}: worst err/bound grew from {:.3g} to {:.3g} (more than {}x)", k->name,
                                      r->check, old_util, r->worst_utilisation, factor));
    }
  }
  return reasons;
}

}  // namespace attest
