// The closing lines of a run: "7 kernels: 7 CERTIFIED (seed 1, 104 s)", and when a check failed,
// a "Failing checks:" list with each failure's case and the command that replays it.
#pragma once

#include <string>

#include "certificate.h"

namespace attest {

// `seconds` < 0: not said (a merge of shards has no one duration).
std::string format_run_summary(const CertificateInfo& info, double seconds);
// "Failing checks:" and each failing check of every kernel (format_failure, then its replay
// command and RapidCheck's reproduce string); "" when nothing failed.
std::string format_failing_checks(const CertificateInfo& info);
// What a run prints after its kernels' reports: the summary, then (compact: the reports left
// failures out) the failing checks.
std::string format_run_end(const CertificateInfo& info, double seconds, ReportDetail detail);
// The command that replays a counterexample saved for kernel `k`: a plugin or a process kernel is
// named again (a problem file never names code to run), a built-in one is named by the file.
std::string replay_command(const KernelReport& k, const std::string& counterexample);

}  // namespace attest
