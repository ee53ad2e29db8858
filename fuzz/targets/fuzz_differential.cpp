// libFuzzer target fuzz_differential (see fuzz/README.md).
#include "fuzz_targets.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return attest::fuzz::fuzz_one_input(attest::fuzz::Target::kDifferential, data, size);
}
