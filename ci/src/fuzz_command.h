// `attest fuzz`: runs a libFuzzer target of the fuzz preset (it builds nothing) and turns
// every failure it finds into a replayable problem file.
#pragma once

#include <string>

namespace attest {

struct FuzzRequest {
  std::string target;       // fuzz_mask_leak, fuzz_overflow, fuzz_decode, fuzz_differential
  int seconds = 60;
  std::string kernel;       // ATTEST_FUZZ_KERNEL for the target (default: every built-in kernel)
  std::string build_dir;    // the fuzz preset's build directory (default: build/fuzz)
  std::string corpus_dir;   // seeds (default: corpus/, next to build/)
  std::string out_dir = "attest-out";
};

// Exit code: 0 no failure, 1 a failure (saved), 2 usage error (no such target, preset not built).
int run_fuzz(const FuzzRequest& request);

}  // namespace attest
