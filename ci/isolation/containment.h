// What contains a kernel's child process (docs/design.md#containment): its own process group,
// killed with attest (descendants included), a memory limit, private protocol descriptors, stdout
// to stderr; the limits a caller sets; and waiting on the child's pipes against a deadline.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <vector>

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

// A running child and attest's ends of its protocol pipes.
struct ContainedChild {
  pid_t pid = -1;
  int pidfd = -1;     // readable when the child exits (so a forked grandchild holding the pipe cannot hide a crash)
  int to_child = -1;  // non-blocking: requests are written against a deadline
  int from_child = -1;
  // The child's TMPDIR, removed with whatever is in it when the child ends: a kernel (or the browser
  // it starts) killed mid-call cannot clean up after itself. Empty for a forked child.
  std::string private_tmp;
};

// Starts `argv` contained, the protocol on its descriptors 3 and 4; or, when `serve` is set, a
// fork of this process that runs serve(3, 4) contained alike. Throws KernelLoadError.
ContainedChild start_contained(const std::vector<std::string>& argv, const std::function<int(int, int)>& serve,
                               std::size_t memory_limit_bytes);
// Closes attest's ends, waits up to polls x 2 ms for the child to exit, then kills its whole
// process group and removes its TMPDIR; returns the child's wait status and leaves `child` empty.
int end_contained(ContainedChild& child, int polls);
// "crashed with signal 11 (Segmentation fault)", "exited with code 3".
std::string describe_exit(int status);

enum class ReadResult { kOk, kEof, kTimeout, kDied };
// Reads n bytes before the deadline. When the child exits, whatever it wrote is still read, then
// the wait ends: a descendant holding the pipe open must not turn a crash into a hang.
ReadResult read_with_deadline(int fd, int pidfd, pid_t pid, char* buf, std::size_t n,
                              std::chrono::steady_clock::time_point deadline);
// Writes n bytes before the deadline, on a non-blocking descriptor: a kernel that stops reading
// its requests (a full pipe) is a hang of the call, never a harness blocked in write().
ReadResult write_with_deadline(int fd, const char* buf, std::size_t n, std::chrono::steady_clock::time_point deadline);

}  // namespace attest
