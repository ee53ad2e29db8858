// Progress of a certification on stderr. On a terminal: one status line that each check
// overwrites (a failing check's line stays). In a log: a line per kernel stage naming the checks
// that passed, and a line of its own for each check that failed or was insufficient. --verbose: a
// line per check, those that did not run and the long stage's cases included.
#pragma once

#include <string>

#include "certify.h"

namespace attest {

// The line of a finished check: "[   1.3s] blocked deterministic grid: pass (detail)", with
// " at CASE" (case_id.h) when it failed on a case.
void report_check(const CertifyOptions& options, const CheckResult& r, const std::string& detail);
// A line below the check level (one long case): --verbose only.
void report_detail(const CertifyOptions& options, const std::string& line);
// Ends the status line on a terminal, or writes a log's pending stage line, so that what follows
// starts on a line of its own.
void end_progress();

}  // namespace attest
