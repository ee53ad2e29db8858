// libFuzzer target fuzz_backward (see fuzz/README.md).
#include "fuzz_entry.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) { return attest::fuzz::fuzz_initialize(); }

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return attest::fuzz::fuzz_one_input(attest::fuzz::Target::kBackward, data, size);
}
