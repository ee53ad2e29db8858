#include "kernel_resolver.h"

#include <filesystem>

#include "blas_baseline.h"
#include "attest/mutants.h"
#include "plugin_library.h"
#include "process_kernel.h"

namespace attest {

std::unique_ptr<Kernel> resolve_kernel(const std::string& name, const LoadOptions& options) {
  if (name.starts_with("cmd:")) return command_kernel(name.substr(4), options);
  const bool is_path = name.find('/') != std::string::npos || name.ends_with(".so");
  if (is_path) {
    if (!std::filesystem::exists(name)) throw KernelLoadError("no such file: " + name);
    if (options.plugin_in_process) return std::make_unique<InProcessPlugin>(name);
    return std::make_unique<ProcessKernel>(
        ProcessKernel::Options{kernel_host_argv({"--plugin", name}), options.containment, name});
  }
  if (options.isolate)
    return std::make_unique<ProcessKernel>(
        ProcessKernel::Options{kernel_host_argv({"--builtin", name}), options.containment, name});
  if (name == "baseline:blas") return make_blas_baseline_kernel();
  return make_in_process_kernel(name);
}

std::unique_ptr<Kernel> command_kernel(const std::string& command, const LoadOptions& options) {
  // Through the shell, so the command may carry quoted arguments; exec keeps one process.
  return std::make_unique<ProcessKernel>(
      ProcessKernel::Options{{"/bin/sh", "-c", "exec " + command}, options.containment, command});
}

}  // namespace attest
