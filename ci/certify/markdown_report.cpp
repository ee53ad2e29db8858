#include "markdown_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <string>

#include "run_summary.h"

namespace attest {
namespace {

// Text inside a table cell or inline code: no line breaks, no cell separators, no backticks
// (a kernel's name and its failure messages are the kernel's to choose).
std::string markdown_cell(const std::string& text) {
  std::string out;
  for (char c : text)
    out += c == '|'                 ? std::string("\\|")
           : c == '`'               ? std::string("'")
           : c == '\n' || c == '\r' ? std::string(" ")
                                    : std::string(1, c);
  return out;
}

// The table's verdict, a blocking one in bold.
std::string markdown_verdict(const CheckResult& r) {
  return r.blocks() ? "**" + verdict_text(r) + "**" : verdict_text(r);
}

std::string kernel_section(const KernelReport& k) {
  long ran = 0;
  for (const CheckResult& r : k.checks) ran += r.status() != CheckStatus::kNotCovered;
  std::string verdict = format_verdict_line(k);
  if (!verdict.empty() && verdict.back() == '\n') verdict.pop_back();
  std::string out =
      fmt::format("\n### {}\n\n`{}`\n\n<details><summary>{} checks ran, {} not covered</summary>\n\n",
                  markdown_cell(k.name), markdown_cell(verdict), ran, static_cast<long>(k.checks.size()) - ran);
  out += "| stage | check | cases | effective | verdict | err/bound | max Tq x Tk |\n|---|---|--:|--:|---|--:|--:|\n";
  for (const CheckResult& r : k.checks)
    if (r.status() != CheckStatus::kNotCovered)
      out += fmt::format("| {} | {} | {} | {} | {} | {:.3g} | {} |\n", r.stage, r.check, r.cases, r.effective,
                         markdown_verdict(r), r.worst_utilisation,
                         r.effective ? fmt::format("{}x{}", r.longest_q, r.longest_k) : "-");
  return out + "\n</details>\n";
}

}  // namespace

std::string markdown_report(const CertificateInfo& info) {
  std::string summary = format_run_summary(info, -1);
  summary.pop_back();  // its newline
  std::string out =
      fmt::format("## attest: {}\n\n{} cases per property\n\n", markdown_cell(summary), info.property_cases);
  out += "| kernel | verdict | checks ran | not covered | worst err/bound |\n|---|---|--:|--:|--:|\n";
  for (const KernelReport& k : info.kernels) {
    long ran = 0;
    double worst = 0;
    for (const CheckResult& r : k.checks)
      if (r.status() != CheckStatus::kNotCovered) ++ran, worst = std::max(worst, r.worst_utilisation);
    out += fmt::format("| {} | {} | {} | {} | {:.3g} |\n", markdown_cell(k.name),
                       k.passed() ? "CERTIFIED" : "**NOT CERTIFIED**", ran, static_cast<long>(k.checks.size()) - ran,
                       worst);
  }
  std::string failing;
  for (const KernelReport& k : info.kernels)
    for (const CheckResult& r : k.checks) {
      if (r.status() != CheckStatus::kFail) continue;
      failing += fmt::format("- **{}** `{}`: {}\n", markdown_cell(k.name), r.check,
                             markdown_cell(r.first_failure.substr(0, 400)));
      if (!r.failing_case.empty()) failing += fmt::format("  - case: `{}`\n", markdown_cell(r.failing_case));
      if (!r.counterexample_path.empty())
        failing += fmt::format("  - replay: `{}`\n", markdown_cell(replay_command(k, r.counterexample_path)));
    }
  if (!failing.empty()) out += "\n### Failing checks\n\n" + failing;
  for (const KernelReport& k : info.kernels) out += kernel_section(k);
  return out;
}

}  // namespace attest
