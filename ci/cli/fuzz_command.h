// `attest fuzz`: runs a libFuzzer target of the fuzz preset (it builds nothing), turns every
// failure it finds into a replayable problem file, and counts a failure only once `attest
// replay` has run that file in a fresh process, with the same kernel, and failed.
#pragma once

#include <string>
#include <vector>

namespace attest {

struct FuzzRequest {
  std::string target;  // a row of fuzz/src/fuzz_targets.cpp's table
  int seconds = 60;
  std::string kernel;      // ATTEST_FUZZ_KERNEL for the target (default: every built-in kernel)
  std::string build_dir;   // the fuzz preset's build directory (default: build/fuzz)
  std::string corpus_dir;  // seeds (default: corpus/, next to build/)
  std::string out_dir = "attest-out";
};

// One input libFuzzer left (crash-, timeout-, oom-) and what became of it.
struct FuzzFinding {
  std::string input;
  std::string kernel;          // decoded with, and replayed on ("": every built-in kernel, none failed)
  std::string problem_path;    // the saved problem file ("" when nothing was violated)
  std::string property;        // the property the replay ran, as the replay prints it
  std::string replay_kernel;   // the kernel the replay ran, as it prints it
  int replay_exit = -1;        // attest replay's exit code (-1: not replayed)
  std::string replay_verdict;  // the first line of its stdout that starts with FAIL or PASS
  bool counted() const { return replay_exit == 1; }
};

struct FuzzOutcome {
  int status = 0;  // run_fuzz's exit code
  std::vector<FuzzFinding> findings;
};

// Exit code: 0 no finding; 1 a finding whose replay failed in a fresh process (saved); 2 usage
// error (no such target, preset not built) or the fuzzer failed without an input; 3 findings
// that did not replay as a property failure (sanitizer reports, timeouts).
FuzzOutcome fuzz_and_replay(const FuzzRequest& request);
// Prints "TARGET MUTANT" per kernel fuzz target (the table of fuzz/src/fuzz_targets.cpp).
int list_fuzz_targets();

int run_fuzz(const FuzzRequest& request);

}  // namespace attest
