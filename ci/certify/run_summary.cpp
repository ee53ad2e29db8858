#include "run_summary.h"

#include <fmt/format.h>

#include <string>

#include "replay_program.h"

namespace attest {
std::string replay_command(const KernelReport& k, const std::string& counterexample) {
  std::string command = replay_program() + " replay " + shell_word(counterexample);
  const std::string& source = k.source;
  if (source.starts_with("cmd:")) return command + " --kernel-cmd " + shell_word(source.substr(4));
  const bool named_in_file = source.starts_with("builtin:") || source.starts_with("mutant:") ||
                             source.starts_with("baseline:") || source.find('/') == std::string::npos;
  return named_in_file ? command : command + " --kernel " + shell_word(source);
}

std::string format_run_summary(const CertificateInfo& info, double seconds) {
  std::size_t certified = 0;
  for (const KernelReport& k : info.kernels) certified += k.passed();
  const std::size_t n = info.kernels.size();
  std::string counts = fmt::format("{} CERTIFIED", certified);
  if (certified < n) counts += fmt::format(", {} NOT CERTIFIED", n - certified);
  const std::string time = seconds >= 0 ? fmt::format(", {:.0f} s", seconds) : "";
  return fmt::format("{} kernel{}: {} (seed {}{})\n", n, n == 1 ? "" : "s", counts, info.seed, time);
}

std::string format_failing_checks(const CertificateInfo& info) {
  std::string out;
  for (const KernelReport& k : info.kernels)
    for (const CheckResult& r : k.checks) {
      if (r.status() != CheckStatus::kFail) continue;
      out += format_failure(k, r);
      if (!r.counterexample_path.empty()) out += "    replay: " + replay_command(k, r.counterexample_path) + "\n";
      if (!r.reproduce.empty()) out += fmt::format("    seed {}; RapidCheck: RC_PARAMS=\"{}\"\n", r.seed, r.reproduce);
    }
  return out.empty() ? "" : "Failing checks:\n" + out;
}

std::string format_run_end(const CertificateInfo& info, double seconds, ReportDetail detail) {
  return format_run_summary(info, seconds) + (detail == ReportDetail::kCompact ? format_failing_checks(info) : "");
}

}  // namespace attest
