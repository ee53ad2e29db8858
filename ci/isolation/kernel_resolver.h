// The one kernel-name resolver (every subcommand names kernels through it):
//   NAME, builtin:NAME   a built-in kernel (in this process, or isolated with `isolate`)
//   mutant:NAME          a deliberately broken kernel from impl/mutants/
//   a registered name    a kernel a layer above names (the `attest` program registers its bench
//                        baseline, baseline:blas: ci/bench/bench_kernels.cpp)
//   PATH.so (or a path)  a plugin through the C ABI, in a child process (in this process only
//                        for `attest bench --in-process`: plugin_library.h)
//   cmd:PROGRAM ARGS     a separate program speaking the process protocol (--kernel-cmd)
// In-process names go through make_in_process_kernel (impl/mutants), which the fuzz targets use.
#pragma once

#include <memory>
#include <string>

#include "attest/kernels/kernel.h"
#include "process_kernel.h"

namespace attest {

struct LoadOptions {
  bool isolate = false;            // run built-in kernels and mutants in a child process too
  bool plugin_in_process = false;  // attest bench --in-process: load a plugin into this process
  Containment containment;         // for kernels in a child process
};

// Makes `name` resolve to make() in this process. For kernels of the layers above isolation,
// which the resolver must not include: the program that links them registers them.
using KernelFactory = std::unique_ptr<Kernel> (*)();
void register_named_kernel(const std::string& name, KernelFactory make);

std::unique_ptr<Kernel> resolve_kernel(const std::string& name, const LoadOptions& options = {});
std::unique_ptr<Kernel> command_kernel(const std::string& command, const LoadOptions& options = {});

}  // namespace attest
