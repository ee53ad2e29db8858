// `attest merge`: joins shard certificates (`attest certify --shard K/N --json F`) into the
// certificate of the unsharded run, and gates on it like certify does.
#pragma once

#include <string>
#include <vector>

namespace attest {

struct MergeRequest {
  std::vector<std::string> inputs;  // one certificate per shard, in any order
  std::string json_path, junit_path, baseline_path;
  double baseline_factor = 2.0;
  bool baseline_any_options = false;  // --baseline-any-options
  bool verbose = false;               // --verbose: every check's row, every failure in its kernel's report
};

// Exit code: 0 the merged certificate is certified (and no regression), 1 not; bad input throws.
int run_merge(const MergeRequest& request);

}  // namespace attest
