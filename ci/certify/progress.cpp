#include "progress.h"

#include <fmt/format.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <iostream>

namespace attest {
namespace {

bool status_line_pending = false;  // a terminal's status line was written without its newline

bool on_terminal() {
  static const bool terminal = ::isatty(STDERR_FILENO) == 1;
  return terminal;
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
  if (status_line_pending) std::cerr << "\r\033[K" << std::flush;
  status_line_pending = false;
}

}  // namespace attest
