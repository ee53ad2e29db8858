#include "invoked_program.h"

#include <unistd.h>

#include <filesystem>
#include <string>
#include <system_error>

namespace attest {
namespace {

// Whether `candidate` is an executable file that is `self` (a link to it counts).
bool is_self(const std::filesystem::path& candidate, const std::filesystem::path& self) {
  std::error_code error;
  return ::access(candidate.c_str(), X_OK) == 0 && std::filesystem::equivalent(candidate, self, error) && !error;
}

// What the shell runs for a bare `name`: the first executable of that name on PATH ("" for none).
std::filesystem::path found_on_path(const std::string& name, const std::string& path_variable) {
  std::size_t start = 0;
  while (start <= path_variable.size()) {
    std::size_t end = path_variable.find(':', start);
    if (end == std::string::npos) end = path_variable.size();
    // An empty entry is the working directory, as the shell takes it.
    const std::string dir = end == start ? "." : path_variable.substr(start, end - start);
    const std::filesystem::path candidate = std::filesystem::path(dir) / name;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
    start = end + 1;
  }
  return {};
}

}  // namespace

std::string invoked_program(const std::string& argv0, const std::string& path_variable, const std::string& self) {
  if (argv0.find('/') != std::string::npos) return argv0;
  std::error_code error;
  const std::filesystem::path resolved = std::filesystem::canonical(self, error);
  if (error) return argv0.empty() ? "attest" : argv0;
  if (!argv0.empty()) {
    const std::filesystem::path found = found_on_path(argv0, path_variable);
    if (!found.empty() && is_self(found, resolved)) return argv0;
  }
  return resolved.string();
}

}  // namespace attest
