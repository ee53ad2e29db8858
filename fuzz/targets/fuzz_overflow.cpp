// libFuzzer target fuzz_overflow (see fuzz/README.md).
#include "fuzz_targets.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return attest::fuzz::fuzz_one_input(attest::fuzz::Target::kOverflow, data, size);
}
