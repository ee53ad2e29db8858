// attest as a library (the installed package: find_package(attest CONFIG), target attest::attest):
// certify a kernel from C++ and get the certificate as a value. The kernel may be an in-process
// attest::Kernel subclass, a plugin (a shared library speaking attest_abi.h), a `cmd:PROGRAM`
// speaking the process protocol, or a built-in kernel's name. attest/gtest.h wraps it for
// GoogleTest (EXPECT_CERTIFIED).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "attest/kernels/kernel.h"

namespace attest::api {

struct CertifyOptions {
  std::string budget = "quick";  // cases per property: quick (10), default (100), thorough (1000) or a number
  std::uint64_t seed = 1;        // 0: from the clock (printed in the certificate)
  // As strict as `attest certify` by default: the budget's lengths and long-stage time budget.
  int max_len = 0;           // the longest Tq, Tk of the size stages; 0: the budget's (4096 quick, 32768 default)
  double long_seconds = -1;  // the long stage's time budget; < 0: the budget's (8 s quick, 20 s default); 0: none
  bool size_stages = true;   // false: the property and deterministic stages only (the verdict line says so)
  std::string out_dir = "attest-out";  // counterexamples (replayable problem files) go here
  double timeout_seconds = 30;         // per call: longer is a hang (a failed check), whatever the budget
  // An attest::Kernel runs in a child process (a fork of this one) by default: its exit(), crash or
  // hang fails a check instead of ending or stopping the caller. A fork keeps only the calling
  // thread: a kernel object whose worker threads started in its constructor has none in the child,
  // hangs on its first call, and certify throws KernelLoadError saying why. Give certify a
  // KernelFactory instead: the kernel is then built in the child, threads and all. true: in this process, faster, for a
  // trusted kernel; the verdict line then says "in process, not contained".
  bool in_process = false;
  // The attest executable that serves plugins and cmd: kernels' isolation (`attest kernel-host`):
  // the installed package's bin/attest (find_package(attest) defines it); empty: this program.
#ifdef ATTEST_INSTALLED_EXECUTABLE
  std::string attest_executable = ATTEST_INSTALLED_EXECUTABLE;
#else
  std::string attest_executable;
#endif
};

// One check of the certificate.
struct Check {
  std::string stage, name, status;  // status: "pass", "fail", "not covered", "insufficient"
  long cases = 0, effective = 0;
  std::string first_failure;   // "case: explanation" when it failed
  std::string counterexample;  // the saved problem file, when one was saved
  std::string replay;          // the command that replays it ("attest replay FILE"; for an in-process
                               // kernel "... --kernel YOUR_KERNEL": a plugin or cmd: serving it)
};

struct Certificate {
  bool certified = false;
  std::string kernel;   // the kernel's own name
  std::string verdict;  // "CERTIFIED tiled for causal, ..." or "NOT CERTIFIED x: failed: ..."
  std::string report;   // the human report: declaration, the table of checks, failures
  std::vector<Check> checks;
  std::string json;  // the certificate document (ci/schema/certificate.schema.json)
  std::vector<const Check*> failed() const;
};

// Builds the kernel to certify. Contained, it is called in each child process attest serves the
// kernel from (again after a crash), so a kernel starting a thread pool in its constructor has its
// threads where its calls run; in process, once.
using KernelFactory = std::function<std::unique_ptr<Kernel>()>;

// Throws std::invalid_argument on bad options, and attest::KernelLoadError when the kernel cannot
// be loaded; a kernel that crashes, hangs or fails is a NOT CERTIFIED certificate, not an exception.
Certificate certify(const Kernel& kernel, const CertifyOptions& options = {});
Certificate certify(const KernelFactory& make, const CertifyOptions& options = {});
Certificate certify(const std::string& kernel, const CertifyOptions& options = {});

}  // namespace attest::api
