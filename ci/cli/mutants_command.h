// `attest mutants`: certifies every mutant of impl/mutants/ and reports which checks killed
// it, how fast, and how small the shrunk counterexample is; the mutation score at the bottom.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "attest/properties/size_ladder.h"

namespace attest {

struct MutantsRequest {
  int property_cases = 100;  // the default certify budget
  std::uint64_t seed = 0;
  int fuzz_seconds = 0;    // > 0: also fuzz each target on each mutant (the fuzz preset); a finding
                           // kills only once its replay in a fresh process fails
  std::string fuzz_build;  // the fuzz preset's build directory (default: build/fuzz)
  std::string out_dir = "attest-out/mutants";
  std::string json_path;
  std::string only;                      // run one mutant
  int shard_index = 1, shard_count = 1;  // --shard K/N: the mutants at registry positions p % N == K - 1
  SizeOptions sizes;                     // the ladder and long stages (certify's, up to a shorter maximum)
  bool expected_first = false;           // run each mutant's expected check alone first (same kills, fewer checks run;
                                         // "caught by" then lists only what the run needed)
};

// Exit code: 0 every mutant killed, and by its expected property; 1 otherwise.
int run_mutants(const MutantsRequest& request);

}  // namespace attest
