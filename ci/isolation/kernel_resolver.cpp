#include "kernel_resolver.h"

#include <filesystem>
#include <map>

#include "attest/mutants/mutants.h"
#include "plugin_library.h"
#include "process_kernel.h"

namespace attest {
namespace {

std::map<std::string, KernelFactory>& registered_kernels() {
  static std::map<std::string, KernelFactory> kernels;  // built on first use: safe from static initializers
  return kernels;
}

}  // namespace

void register_named_kernel(const std::string& name, KernelFactory make) { registered_kernels()[name] = make; }

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
  if (const auto found = registered_kernels().find(name); found != registered_kernels().end()) return found->second();
  return make_in_process_kernel(name);
}

std::unique_ptr<Kernel> command_kernel(const std::string& command, const LoadOptions& options) {
  // Through the shell, so the command may carry quoted arguments; exec keeps one process.
  return std::make_unique<ProcessKernel>(
      ProcessKernel::Options{{"/bin/sh", "-c", "exec " + command}, options.containment, command});
}

}  // namespace attest
