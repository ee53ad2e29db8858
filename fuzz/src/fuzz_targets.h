// The five fuzz targets as functions over bytes, shared by libFuzzer builds, the GCC replay
// driver, `attest fuzz` and `attest certify`. The caller names the kernels under test: nothing
// here reads the environment, so one process can run several kernels (one mutant after another)
// and each gets its own verdict.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "attest/kernels/kernel.h"
#include "attest/model/problem.h"
#include "attest/properties/oracle.h"
#include "attest/properties/verdict.h"
#include "fuzz_input.h"

namespace attest::fuzz {

enum class Target { kMaskLeak, kOverflow, kDecode, kDifferential, kBackward };

struct FuzzCase;

// The one table of kernel fuzz targets: `attest certify --fuzz-seconds`, `attest fuzz`, the CI
// fuzz stage, the OSS-Fuzz build and the tests iterate it (attest's own readers are fuzzed by
// fuzz/harness/, which fuzzes files, not kernels).
struct TargetInfo {
  Target target;
  const char* name;
  Flavor flavor;        // how its decoder reads bytes
  FeatureSet required;  // what the kernel must declare for the target to mean anything
  const char* mutant;   // a mutant it must find (CI's fuzz stage shows it does)
  const char* hunts;
  std::vector<Verdict> (*check)(const FuzzCase& c, const Kernel& kernel, Oracle& oracle);
};

const std::vector<TargetInfo>& target_table();
const TargetInfo& info(Target t);
const char* target_name(Target t);
std::optional<Target> target_from_name(const std::string& name);
Flavor flavor_of(Target t);  // how the target's decoder reads bytes

using Kernels = std::vector<std::unique_ptr<Kernel>>;

// NAME, builtin:NAME or mutant:NAME; empty: every registered kernel.
Kernels kernels_named(const std::string& name);

struct Violation {
  std::string kernel;
  Verdict verdict;
  Problem problem;
};

// What one input did on one kernel: a violation, or whether anything was exercised at all
// (an input the kernel's declaration cannot take, or one that left nothing to check, is not
// evidence; `skipped` says why).
struct Outcome {
  std::optional<Violation> violation;
  bool exercised = false;
  std::string skipped;
};
Outcome evaluate_target(Target target, const std::uint8_t* data, std::size_t size, const Kernel& kernel,
                        Oracle& oracle);

// Runs the target on one input with each kernel in turn; the first violation, or nothing.
std::optional<Violation> run_target(Target target, const std::uint8_t* data, std::size_t size, const Kernels& kernels,
                                    Oracle& oracle);

// The same for one given kernel (attest certify's fuzz stage; external kernels too).
std::optional<Violation> run_target_on(Target target, const std::uint8_t* data, std::size_t size, const Kernel& kernel,
                                       Oracle& oracle);

}  // namespace attest::fuzz
