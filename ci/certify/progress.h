// Progress of a certification on stderr: one line per check that ran, or, when stderr is a
// terminal, one status line that each check overwrites (a failing check's line stays). Checks
// that did not run, and the long stage's per-case lines, are shown with --verbose only.
#pragma once

#include <string>

#include "certify.h"

namespace attest {

// The line of a finished check: "[   1.3s] blocked deterministic grid: pass (detail)", with
// " at CASE" (case_id.h) when it failed on a case.
void report_check(const CertifyOptions& options, const CheckResult& r, const std::string& detail);
// A line below the check level (one long case): --verbose only.
void report_detail(const CertifyOptions& options, const std::string& line);
// Ends the status line on a terminal, so that what follows starts on a line of its own.
void end_progress();

}  // namespace attest
