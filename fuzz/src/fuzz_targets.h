// The four fuzz targets as functions over bytes, shared by libFuzzer builds, the GCC replay
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

#include "attest/kernel.h"
#include "attest/oracle.h"
#include "attest/problem.h"
#include "attest/verdict.h"
#include "fuzz_input.h"

namespace attest::fuzz {

enum class Target { kMaskLeak, kOverflow, kDecode, kDifferential };

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

// Runs the target on one input with each kernel in turn; the first violation, or nothing.
std::optional<Violation> run_target(Target target, const std::uint8_t* data, std::size_t size,
                                    const Kernels& kernels, Oracle& oracle);

// The same for one given kernel (attest certify's fuzz stage; external kernels too).
std::optional<Violation> run_target_on(Target target, const std::uint8_t* data, std::size_t size,
                                       const Kernel& kernel, Oracle& oracle);

}  // namespace attest::fuzz
