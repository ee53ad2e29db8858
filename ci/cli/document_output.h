// Where certify and merge write their documents (--json, --junit). `-` means stdout: the
// document goes there, and what attest prints on stdout meanwhile (the report, the verdict lines)
// goes to stderr, so stdout holds the document alone and can be piped.
#pragma once

#include <iostream>
#include <string>

namespace attest {

inline bool is_stdout(const std::string& path) { return path == "-"; }

// While alive, and if any of the paths is `-`: std::cout writes to stderr.
class DocumentOutput {
 public:
  explicit DocumentOutput(bool to_stdout) : stdout_(to_stdout ? std::cout.rdbuf(std::cerr.rdbuf()) : nullptr) {}
  ~DocumentOutput() {
    if (stdout_) std::cout.rdbuf(stdout_);
  }
  DocumentOutput(const DocumentOutput&) = delete;
  DocumentOutput& operator=(const DocumentOutput&) = delete;

  // Writes text to path (atomically), or to the real stdout for `-`. Nothing for an empty path.
  void write(const std::string& path, const std::string& text) const;

 private:
  std::streambuf* stdout_;  // the real stdout while std::cout is redirected
};

}  // namespace attest
