// `attest selfcheck`: attest certifies the exact kernel of each of N drawn declarations
// (declaration_draw.h, declared_model.h). A correct kernel must be CERTIFIED whatever it honestly
// declares, so every other verdict is a defect of attest (a false alarm), reported with the
// declaration, the report and the failing checks' counterexamples.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

namespace attest {

struct SelfcheckOptions {
  int declarations = 200;
  std::uint64_t seed = 1;
  std::vector<int> only;  // these declarations alone (to reproduce findings); empty: 0 .. N-1
  // Open defects, by declaration number: reported as known, not counted; one that now certifies
  // counts (the list only shrinks).
  std::set<int> known;
  int property_cases = 10;  // per property (quick)
  // Also through the C ABI and the process protocol: each model served from a fork of attest, its
  // declaration read back from the descriptor it sends.
  bool through_protocol = false;
  std::string out_dir = "attest-selfcheck";
  // Only the draw: the distribution of the declarations' fields, nothing certified (seconds for
  // thousands, to see what a run would reach).
  bool draw_only = false;
};

// Prints one line per declaration and a summary; returns the number of unexpected outcomes (a
// false alarm not in `known`, or a known one that is CERTIFIED now).
int run_selfcheck(const SelfcheckOptions& options);

// The declaration numbers a known-defects file lists for `seed`: lines "SEED INDEX  # why", '#'
// comments. Throws std::invalid_argument naming the line of a malformed one.
std::set<int> read_known_false_alarms(const std::string& path, std::uint64_t seed);

}  // namespace attest
