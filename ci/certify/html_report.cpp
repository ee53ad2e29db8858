#include "html_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "html_report_pairs.h"
#include "run_summary.h"

namespace attest {
// A named namespace: a unity build puts this file beside markdown_report.cpp's helpers.
namespace html_page {

std::string escaped(const std::string& text) {
  std::string out;
  for (const char c : text)
    out += c == '<'    ? std::string("&lt;")
           : c == '>'  ? std::string("&gt;")
           : c == '&'  ? std::string("&amp;")
           : c == '"'  ? std::string("&quot;")
           : c == '\'' ? std::string("&#39;")
                       : std::string(1, c);
  return out;
}

constexpr const char* kStyle = R"(<style>
body{font-family:system-ui,sans-serif;margin:2em;color:#222;max-width:80em}
h1{font-size:1.4em} h2{font-size:1.2em;margin-top:2em}
.verdict{padding:.5em .8em;border-radius:4px;font-family:monospace;white-space:pre-wrap}
.certified{background:#e3f4e1;border-left:6px solid #2e7d32}
.not-certified{background:#fbe4e4;border-left:6px solid #c62828}
table{border-collapse:collapse;margin:.8em 0} td,th{border:1px solid #ccc;padding:.2em .5em;font-size:.9em}
th{background:#f3f3f3} td.n{text-align:right}
.fail{color:#c62828;font-weight:bold} .pass{color:#2e7d32}
.bar{position:relative;width:12em;height:1em;background:#eee}
.bar span{position:absolute;left:0;top:0;bottom:0;background:#5b8def}
.bar.over span{background:#c62828}
.bar em{position:absolute;right:.3em;font-size:.75em;font-style:normal}
code{background:#f5f5f5;padding:0 .2em}
table.pairs td,table.pairs th{font-size:.7em;padding:.1em .25em;min-width:1.4em}
table.pairs th.column{writing-mode:vertical-rl;transform:rotate(180deg);vertical-align:bottom}
td.reached{background:#e3f4e1;text-align:right} td.never{background:#c62828;color:#fff;text-align:center}
td.same-axis{background:#f3f3f3;border-color:#f3f3f3}
</style>)";

// err/bound as a bar: its width the utilisation (1 is the bound), red past it.
std::string utilisation_bar(double utilisation) {
  const double shown = std::clamp(utilisation, 0.0, 1.0);
  return fmt::format(
      R"(<div class="bar{}" title="err/bound {:.3g}"><span style="width:{:.1f}%"></span><em>{:.3g}</em></div>)",
      utilisation > 1 ? " over" : "", utilisation, 100 * shown, utilisation);
}

std::string check_rows(const KernelReport& k) {
  std::string rows;
  for (const CheckResult& r : k.checks) {
    if (r.status() == CheckStatus::kNotCovered) continue;
    rows += fmt::format(
        R"(<tr class="check"><td>{}</td><td>{}</td><td class="n">{}</td><td class="n">{}</td><td class="{}">{}</td><td>{}</td><td class="n">{}</td></tr>)"
        "\n",
        escaped(r.stage), escaped(r.check), r.cases, r.effective, r.blocks() ? "fail" : "pass",
        escaped(verdict_text(r)), utilisation_bar(r.worst_utilisation),
        r.effective ? fmt::format("{}&times;{}", r.longest_q, r.longest_k) : "-");
  }
  return rows;
}

// Rows: the kernel's paths; columns: the checks whose coverage top-up set targets on them; a cell:
// targets covered of those required, green when all are.
std::string coverage_matrix(const KernelReport& k) {
  std::set<std::string> paths;
  std::vector<const CheckResult*> checks;
  for (const CheckResult& r : k.checks) {
    bool any = false;
    for (const auto& [path, stats] : r.paths)
      if (stats.targets_required > 0) paths.insert(path), any = true;
    if (any) checks.push_back(&r);
  }
  if (checks.empty()) return "<p>No coverage targets: no check ran a coverage top-up.</p>\n";
  std::string out = "<table class=\"coverage\"><tr><th>path</th>";
  for (const CheckResult* r : checks) out += "<th>" + escaped(r->check) + "</th>";
  out += "</tr>\n";
  for (const std::string& path : paths) {
    out += "<tr><td>" + escaped(path.empty() ? "(one path)" : path) + "</td>";
    for (const CheckResult* r : checks) {
      const auto found = r->paths.find(path);
      if (found == r->paths.end() || found->second.targets_required == 0) {
        out += "<td></td>";
        continue;
      }
      const PathStats& s = found->second;
      const long covered = s.targets_required - static_cast<long>(s.targets_uncovered.size());
      std::string missing;
      for (const std::string& t : s.targets_uncovered) missing += (missing.empty() ? "uncovered: " : ", ") + t;
      out += fmt::format(R"(<td class="n" style="background:{}" title="{}">{}/{}</td>)",
                         covered == s.targets_required ? "#e3f4e1" : "#fbe4e4", escaped(missing), covered,
                         s.targets_required);
    }
    out += "</tr>\n";
  }
  return out + "</table>\n";
}

std::string failures(const KernelReport& k) {
  std::string out;
  for (const CheckResult& r : k.checks) {
    if (r.status() != CheckStatus::kFail) continue;
    out +=
        fmt::format("<li class=\"failure\"><b>{}</b>: {}", escaped(r.check), escaped(r.first_failure.substr(0, 600)));
    if (!r.failing_case.empty()) out += fmt::format("<br>case: <code>{}</code>", escaped(r.failing_case));
    if (!r.counterexample_path.empty())
      out += fmt::format("<br>replay: <code>{}</code>", escaped(replay_command(k, r.counterexample_path)));
    out += "</li>\n";
  }
  return out.empty() ? "" : "<h3>Failing checks</h3>\n<ul>\n" + out + "</ul>\n";
}

std::string kernel_section(const KernelReport& k) {
  std::string verdict = format_verdict_line(k);
  if (!verdict.empty() && verdict.back() == '\n') verdict.pop_back();
  return fmt::format(
      "<section class=\"kernel\">\n<h2>{}</h2>\n<div class=\"verdict {}\">{}</div>\n{}"
      "<h3>Checks that ran</h3>\n<table class=\"checks\"><tr><th>stage</th><th>check</th><th>cases</th>"
      "<th>effective</th><th>verdict</th><th>err/bound</th><th>max Tq&times;Tk</th></tr>\n{}</table>\n"
      "<h3>Coverage: targets per path and check</h3>\n{}"
      "<h3>Coverage: pairs of classes per path</h3>\n<p>A cell: the effective cases of that pair of classes over "
      "every check; red (&#10007;) where a check required the pair and never reached it; empty where no case "
      "reached it.</p>\n{}</section>\n",
      escaped(k.name), k.passed() ? "certified" : "not-certified", escaped(verdict), failures(k), check_rows(k),
      coverage_matrix(k), html_pair_matrices(k));
}

}  // namespace html_page

std::string html_report(const CertificateInfo& info) {
  std::string summary = format_run_summary(info, -1);
  if (!summary.empty() && summary.back() == '\n') summary.pop_back();
  std::string out = fmt::format(
      "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>attest: {}</title>\n{}\n</head><body>\n"
      "<h1>attest: <span id=\"summary\">{}</span></h1>\n<p>{} cases per property</p>\n"
      "<table class=\"kernels\"><tr><th>kernel</th><th>verdict</th></tr>\n",
      html_page::escaped(summary), html_page::kStyle, html_page::escaped(summary), info.property_cases);
  for (const KernelReport& k : info.kernels)
    out += fmt::format("<tr><td>{}</td><td class=\"{}\">{}</td></tr>\n", html_page::escaped(k.name),
                       k.passed() ? "pass" : "fail", k.passed() ? "CERTIFIED" : "NOT CERTIFIED");
  out += "</table>\n";
  for (const KernelReport& k : info.kernels) out += html_page::kernel_section(k);
  return out + "</body></html>\n";
}

}  // namespace attest
