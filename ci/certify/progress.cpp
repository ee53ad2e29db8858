#include "progress.h"

#include <fmt/format.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <iostream>
#include <optional>
#include <string>
#include <vector>

namespace attest {
namespace {

bool status_line_pending = false;  // a terminal's status line was written without its newline

bool on_terminal() {
  static const bool terminal = ::isatty(STDERR_FILENO) == 1;
  return terminal;
}

// In a log (stderr not a terminal, no --verbose) the passing checks of one kernel's stage make one
// line, written when the stage ends: the report's table repeats each check, the log need not.
struct StageTally {
  std::string kernel, stage;
  std::vector<std::string> checks;
  std::string slowest;
  double slowest_seconds = -1;
  double ended = 0;  // when its last check finished: the line's time, though it is written later
};
std::optional<StageTally> tally;

void flush_tally() {
  if (!tally) return;
  std::string names;
  for (const std::string& check : tally->checks) names += (names.empty() ? "" : " ") + check;
  std::cerr << fmt::format("[{:7.1f}s] {} {}: {} pass: {} (slowest {} {:.1f} s)\n", tally->ended, tally->kernel,
                           tally->stage, tally->checks.size(), names, tally->slowest, tally->slowest_seconds);
  tally.reset();
}

void add_to_tally(const CheckResult& r) {
  if (tally && (tally->kernel != r.kernel || tally->stage != r.stage)) flush_tally();
  if (!tally) tally = StageTally{r.kernel, r.stage, {}, {}, -1, 0};
  tally->checks.push_back(r.check);
  tally->ended = elapsed_seconds();
  if (r.seconds > tally->slowest_seconds) tally->slowest = r.check, tally->slowest_seconds = r.seconds;
}

std::size_t terminal_width() {
  winsize w{};
  return ::ioctl(STDERR_FILENO, TIOCGWINSZ, &w) == 0 && w.ws_col > 0 ? w.ws_col : 80;
}

}  // namespace

void report_check(const CertifyOptions& options, const CheckResult& r, const std::string& detail) {
  if (!options.progress) return;
  const CheckStatus status = r.status();
  if (status == CheckStatus::kNotCovered && !options.verbose) return;
  std::string line = fmt::format("[{:7.1f}s] {} {} {}: {} ({})", elapsed_seconds(), r.kernel, r.stage, r.check,
                                 to_string(status), detail);
  if (!r.failing_case.empty()) line += " at " + r.failing_case;
  if (!on_terminal() && !options.verbose) {
    if (status == CheckStatus::kPass) return add_to_tally(r);
    flush_tally();  // a check that blocks, on a line of its own after the passes before it
  }
  // A terminal keeps one status line, rewritten in place; a failure stays on screen.
  if (on_terminal() && !options.verbose && status != CheckStatus::kFail) {
    const std::size_t width = terminal_width() - 1;
    if (line.size() > width) line.resize(width);
    std::cerr << "\r\033[K" << line << std::flush;
    status_line_pending = true;
    return;
  }
  std::cerr << (status_line_pending ? "\r\033[K" : "") << line << "\n";
  status_line_pending = false;
}

void report_detail(const CertifyOptions& options, const std::string& line) {
  if (options.progress && options.verbose) std::cerr << line << "\n";
}

void end_progress() {
  flush_tally();
  if (status_line_pending) std::cerr << "\r\033[K" << std::flush;
  status_line_pending = false;
}

}  // namespace attest
