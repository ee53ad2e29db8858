#include "certificate.h"

#include <chrono>
#include <cmath>
#include <ctime>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace attest {
namespace {

using nlohmann::json;

const char* verdict_of(const CheckResult& r) { return !r.applicable ? "n/a" : r.passed() ? "pass" : "fail"; }

// JSON has no infinity: an unbounded utilisation is written as null.
json number_or_null(double x) { return std::isfinite(x) ? json(x) : json(nullptr); }

json capabilities_json(const Capabilities& c) {
  json features = json::array();
  const std::pair<const char*, bool> all[] = {
      {"causal", c.causal},   {"window", c.window},         {"key_padding", c.key_padding},
      {"query_padding", c.query_padding}, {"segments", c.segments}, {"explicit_mask", c.explicit_mask},
      {"gqa", c.gqa},         {"lse", c.lse},               {"rope", c.rope},
      {"decode", c.decode}};
  for (const auto& [name, on] : all)
    if (on) features.push_back(name);
  return {{"features", features},
          {"empty_rows", to_string(c.empty_rows)},
          {"precision", to_string(c.precision)},
          {"key_tile", c.key_tile}};
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
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += (static_cast<unsigned char>(c) < 0x20 && c != '\n' && c != '\t') ? ' ' : c;
    }
  }
  return out;
}

}  // namespace

bool KernelReport::passed() const {
  for (const CheckResult& r : checks)
    if (!r.passed()) return false;
  return true;
}

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
                    {"failures", r.failures},
                    {"worst_utilisation", number_or_null(r.worst_utilisation)},
                    {"seconds", r.seconds}};
      if (r.seed) check["seed"] = r.seed;
      if (!r.first_failure.empty()) check["first_failure"] = r.first_failure;
      if (!r.counterexample_path.empty()) check["counterexample"] = r.counterexample_path;
      if (!r.reproduce.empty()) check["reproduce"] = r.reproduce;
      checks.push_back(check);
      for (const auto& [path, stats] : r.paths) {
        paths[path].cases += stats.cases;
        paths[path].worst_utilisation = std::max(paths[path].worst_utilisation, stats.worst_utilisation);
      }
    }
    json path_list = json::array();
    for (const auto& [path, stats] : paths)
      path_list.push_back({{"path", path}, {"cases", stats.cases},
                           {"worst_utilisation", number_or_null(stats.worst_utilisation)}});
    all = all && k.passed();
    kernels.push_back({{"source", k.source},
                       {"name", k.name},
                       {"descriptor", capabilities_json(k.capabilities)},
                       {"certified", k.passed()},
                       {"checks", checks},
                       {"paths", path_list}});
  }
  json doc = {{"format", kCertificateFormat},
              {"version", kCertificateVersion},
              {"harness", {{"name", "attest"}, {"version", ATTEST_VERSION}}},
              {"created", now_utc()},
              {"seed", info.seed},
              {"cases_per_property", info.property_cases},
              {"certified", all},
              {"kernels", kernels}};
  return doc.dump(2, ' ', false, json::error_handler_t::replace);  // never throws on odd bytes
}

std::string certificate_junit(const CertificateInfo& info) {
  std::string out = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"attest\">\n";
  for (const KernelReport& k : info.kernels) {
    long failures = 0, skipped = 0;
    double seconds = 0;
    for (const CheckResult& r : k.checks) {
      failures += !r.passed();
      skipped += !r.applicable;
      seconds += r.seconds;
    }
    out += fmt::format("  <testsuite name=\"attest.{}\" tests=\"{}\" failures=\"{}\" skipped=\"{}\" time=\"{:.3f}\">\n",
                       xml_escape(k.name), k.checks.size(), failures, skipped, seconds);
    for (const CheckResult& r : k.checks) {
      out += fmt::format("    <testcase classname=\"attest.{}.{}\" name=\"{}\" time=\"{:.3f}\">", xml_escape(k.name),
                         r.stage, r.check, r.seconds);
      if (!r.applicable) out += "<skipped/>";
      if (!r.passed())
        out += fmt::format("<failure message=\"{}\">{}{}</failure>", xml_escape(r.first_failure),
                           xml_escape(r.first_failure),
                           r.counterexample_path.empty() ? "" : "\ncounterexample: " + xml_escape(r.counterexample_path));
      out += "</testcase>\n";
    }
    out += "  </testsuite>\n";
  }
  return out + "</testsuites>\n";
}

std::vector<std::string> regressions(const Baseline& baseline, const CertificateInfo& now, double factor) {
  std::vector<std::string> reasons;
  for (const KernelReport& k : now.kernels) {
    const BaselineKernel* old_kernel = nullptr;
    for (const BaselineKernel& ok : baseline.kernels)
      if (ok.name == k.name) old_kernel = &ok;
    if (!old_kernel) continue;  // a kernel new to this certificate has nothing to regress from
    for (const CheckResult& r : k.checks) {
      for (const BaselineCheck& oc : old_kernel->checks) {
        if (oc.stage != r.stage || oc.check != r.check) continue;
        if (oc.verdict == "pass" && !r.passed())
          reasons.push_back(fmt::format("{} {}: passed in the baseline, fails now: {}", k.name, r.check,
                                        r.first_failure));
        const double old_util = oc.worst_utilisation.value_or(INFINITY);
        if (oc.verdict == "pass" && r.passed() && r.worst_utilisation > factor * std::max(old_util, 0.01))
          reasons.push_back(fmt::format("{} {}: worst err/bound grew from {:.3g} to {:.3g} (more than {}x)", k.name,
                                        r.check, old_util, r.worst_utilisation, factor));
      }
    }
  }
  return reasons;
}

}  // namespace attest
