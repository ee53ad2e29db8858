#include "replay_command.h"

#include <fmt/format.h>

#include <iostream>
#include <string>

#include "attest/properties/problem_file.h"
#include "attest/properties/property_driver.h"
#include "replay_program.h"

namespace attest {
namespace {

// Kernels a file may name and replay may run: code inside attest itself, nothing else.
bool names_builtin_code(const std::string& name) {
  if (name.starts_with("mutant:") || name.starts_with("builtin:") || name == "baseline:blas") return true;
  for (const KernelEntry& e : kernel_registry())
    if (name == e.name) return true;
  return false;
}

}  // namespace

int run_replay(const std::string& path, const std::string& kernel_override, const std::string& command_override,
               LoadOptions load) {
  const ProblemFile file = load_problem_file(path);
  std::unique_ptr<Kernel> kernel;
  if (!command_override.empty()) {
    kernel = resolve_kernel("cmd:" + command_override, load);
  } else if (!kernel_override.empty()) {
    kernel = resolve_kernel(kernel_override, load);
  } else {
    if (file.kernel.empty()) throw std::invalid_argument(path + " names no kernel; pass --kernel");
    // A file is data, never code: a plugin or command recorded in it runs only when the user names it.
    if (!names_builtin_code(file.kernel)) {
      const bool command = file.kernel.starts_with("cmd:");
      std::cerr << fmt::format(
          "attest: {} was recorded with an external kernel; attest does not run code named in a file.\n"
          "To replay it with that kernel, run:\n  {} replay {} {} {}\n",
          path, replay_program(), shell_word(path), command ? "--kernel-cmd" : "--kernel",
          shell_word(command ? file.kernel.substr(4) : file.kernel));
      return 2;
    }
    load.isolate = load.isolate || file.isolated;
    kernel = resolve_kernel(file.kernel, load);
  }
  const PropertyInfo& property = find_property(file.property);
  Oracle oracle;
  const Shape& s = file.problem.shape;
  std::cout << fmt::format("replay {}: property {} on {} (B={} H={} Hkv={} Tq={} Tk={} Dk={} Dv={})\n", path,
                           property.name, kernel->name(), s.batch, s.heads, s.kv_heads, s.q_len, s.k_len, s.head_dim,
                           s.value_dim);
  const ReplayOutcome outcome = replay_check(property, file.problem, *kernel, oracle);
  std::cout << outcome.text;
  if (!file.verdict.empty()) std::cout << "recorded: " << file.verdict << "\n";
  return outcome.exit_code;
}

}  // namespace attest
