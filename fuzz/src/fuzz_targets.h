// The four fuzz targets as functions over bytes, shared by libFuzzer builds, the GCC replay
// driver and `attest fuzz`. Each runs every registered kernel (or ATTEST_FUZZ_KERNEL: NAME,
// builtin:NAME or mutant:NAME) through the same property functions as the RapidCheck suite.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "attest/kernel.h"
#include "attest/oracle.h"
#include "attest/problem.h"
#include "attest/verdict.h"

namespace attest::fuzz {

enum class Target { kMaskLeak, kOverflow, kDecode, kDifferential };

const char* target_name(Target t);
std::optional<Target> target_from_name(const std::string& name);

struct Violation {
  std::string kernel;
  Verdict verdict;
  Problem problem;
};

// Runs the target on one input; the first violation, or nothing.
std::optional<Violation> run_target(Target target, const std::uint8_t* data, std::size_t size);

// The same for one given kernel (attest certify's fuzz stage; external kernels too).
std::optional<Violation> run_target_on(Target target, const std::uint8_t* data, std::size_t size,
                                       const Kernel& kernel, Oracle& oracle);

// libFuzzer's entry: prints the violation (kernel, property, explanation) and aborts.
int fuzz_one_input(Target target, const std::uint8_t* data, std::size_t size);

}  // namespace attest::fuzz
