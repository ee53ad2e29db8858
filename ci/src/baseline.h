// A baseline certificate as the regression gate reads it: every field it uses, checked for
// type (and for verdicts, value) before the run starts, so a damaged or hostile file is a
// one-line error naming the field, never a crash or a half-compared certificate.
#pragma once

#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace attest {

class BaselineError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct BaselineCheck {
  std::string stage, check;
  std::string verdict;  // "pass", "fail" or "n/a"
  long cases = 0;
  std::optional<double> worst_utilisation;  // null in the file: unbounded
};

struct BaselineKernel {
  std::string name;
  std::vector<BaselineCheck> checks;
};

struct Baseline {
  std::vector<BaselineKernel> kernels;
};

// Parses a certificate written by `attest certify --json`; throws BaselineError.
Baseline parse_baseline(const std::string& text);
Baseline read_baseline(const std::string& path);

}  // namespace attest
