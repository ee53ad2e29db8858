// libFuzzer target: the baseline-certificate reader (`attest certify --baseline`). Any bytes
// must give a baseline or BaselineError, never a crash or an out-of-bounds read.
#include <cstdint>
#include <string>

#include "baseline.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    attest::parse_baseline(std::string(reinterpret_cast<const char*>(data), size));
  } catch (const attest::BaselineError&) {
  }
  return 0;
}
