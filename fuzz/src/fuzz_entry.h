// The libFuzzer side of the targets: each fuzz binary (and each GCC replay driver) is one
// process fuzzing one choice of kernels, read from ATTEST_FUZZ_KERNEL by LLVMFuzzerInitialize.
// Linked only into those binaries, never into `attest`, which passes kernels explicitly.
#pragma once

#include <cstddef>
#include <cstdint>

#include "fuzz_targets.h"

namespace attest::fuzz {

// Reads ATTEST_FUZZ_KERNEL (NAME, builtin:NAME or mutant:NAME; unset or empty: every
// registered kernel). Returns 0, as LLVMFuzzerInitialize must.
int fuzz_initialize();

// libFuzzer's entry: runs the kernels fuzz_initialize chose; on a violation prints it (kernel,
// property, explanation) and aborts.
int fuzz_one_input(Target target, const std::uint8_t* data, std::size_t size);

}  // namespace attest::fuzz
