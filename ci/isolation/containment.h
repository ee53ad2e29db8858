// What contains a kernel's child process (docs/design.md#containment): the limits a caller sets,
// and the default memory limit.
#pragma once

#include <chrono>
#include <cstddef>
#include <optional>

namespace attest {

struct Containment {
  // Per call: a call is a hang once it has run max(this, kHangFactor x its predicted cost), the
  // prediction learnt from the calls this kernel answered (cost_model.h).
  double timeout_seconds = 30.0;
  std::size_t memory_limit_bytes = 0;                             // 0: none
  std::optional<std::chrono::steady_clock::time_point> deadline;  // the whole run's end
};

// Half the machine's memory, at least 1 GiB: what a kernel in a child process may take by default.
std::size_t default_memory_limit();

}  // namespace attest
