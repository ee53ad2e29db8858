// A kernel that runs in a child process and speaks the attest process protocol: a user's
// program (--kernel-cmd), or `attest kernel-host` around a plugin or a built-in kernel.
// The child is contained (containment.h): its own process group, killed with attest (and all
// its descendants with it), a memory limit, a per-call timeout and a whole-run deadline; the
// protocol runs on private descriptors and its stdout goes to stderr. Crashes, hangs, faults
// and protocol violations become KernelFailure, and the child is restarted for the next call.
// A kernel that cannot start or describe itself: KernelLoadError.
#pragma once

#include <chrono>
#include <functional>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "attest/abi/process_protocol.hpp"
#include "attest/kernels/cost_model.h"
#include "attest/kernels/kernel.h"
#include "containment.h"
#include "page_size_record.h"

namespace attest {

class ProcessKernel final : public Kernel {
 public:
  struct Options {
    std::vector<std::string> argv;  // program and arguments
    Containment containment;
    std::string description;  // for messages: the command or plugin path
    // Set: the child is a fork of this process that runs this on the protocol's descriptors (an
    // in-process kernel served contained); argv is then unused.
    std::function<int(int in, int out)> serve_in_child;
  };
  explicit ProcessKernel(Options options);  // starts the child and reads its descriptor
  ~ProcessKernel() override;

  std::string name() const override { return name_; }
  Capabilities capabilities() const override { return caps_; }
  void forward(const Problem& p, std::span<float> o, std::span<float> lse) const override;
  std::unique_ptr<DecodeSession> open_decode(const DecodeConfig& config) const override;
  void backward(const Problem& p, const BackwardInputs& in, const GradientSpans& out) const override;
  void merge(const MergeInputs& in, std::span<float> o, std::span<float> lse) const override;
  void forward_packed(const PackedCall& call, std::span<float> o, std::span<float> lse) const override;
  std::size_t page_bytes(const DecodeConfig& config) const override;
  void decode_paged(const DecodeConfig& config, const PagedStep& step) const override;
  std::string last_path() const override { return last_path_; }
  std::string last_backward_path() const override { return last_backward_path_; }
  std::string last_packed_path() const override { return last_packed_path_; }
  // A decode session's step reports its path here: a failing decode check names it.
  void record_path(const std::string& path) const { last_path_ = path.empty() ? "default" : path; }
  void set_cutoff(std::optional<std::chrono::steady_clock::time_point> cutoff) const override { cutoff_ = cutoff; }

  std::uint32_t abi_version() const { return abi_version_; }
  // One request and its reply (at most max_reply payload bytes); restarts the child first if it
  // died. `work` (cost_model.h; 0: not a computation) sets how long the call may take and
  // teaches the cost model. Used by decode sessions.
  std::string call(protocol::Type request, const std::string& payload, protocol::Type reply, std::uint64_t max_reply,
                   double work = 0) const;
  std::uint64_t generation() const { return generation_; }  // increases with every restart

 private:
  void start() const;
  void stop() const;
  void kill_child() const;  // the whole process group, then reap
  [[noreturn]] void fail(KernelFailure::Kind kind, const std::string& why) const;
  struct CallLimit;  // one deadline for the whole call, and why it is there
  CallLimit limit_of(protocol::Type reply, double work) const;
  // The call reached its limit: a hang, the run's deadline or the budget's cutoff. `unsent_request`:
  // the request's size when the kernel had not taken it all.
  [[noreturn]] void fail_at_limit(const CallLimit& limit, std::optional<std::size_t> unsent_request) const;
  // call() with the request in parts (a page pool is sent from where it lives, not copied first).
  std::string exchange(protocol::Type request, std::initializer_list<std::string_view> payload, protocol::Type reply,
                       std::uint64_t max_reply, double work) const;
  // Writes the request within the call's limit; a kernel that stops reading fails as a hang.
  void send_request(protocol::Type request, std::initializer_list<std::string_view> payload,
                    const CallLimit& limit) const;
  std::string read_reply(protocol::Type expected, std::uint64_t max_payload, double work, const CallLimit& limit) const;
  // A computation's call, its reply read by `read`: a fault, a non-OK status ("<who> returned
  // status ...") or a malformed reply ("malformed <what> result") fails it.
  template <typename Result>
  Result computed(protocol::Type request, const std::string& payload, protocol::Type reply, std::uint64_t max_reply,
                  double work, Result (*read)(protocol::Reader&), const char* what, const char* who) const;

  Options options_;
  std::string name_;
  Capabilities caps_;
  std::uint32_t abi_version_ = 0;
  mutable ContainedChild child_;  // none while it is not running
  mutable std::uint64_t generation_ = 0;
  mutable std::string last_path_ = "default";        // of the last forward or decode step
  mutable std::string last_backward_path_;           // of the last backward ("": none reported)
  mutable std::string last_packed_path_;             // of the last packed call ("": none reported)
  friend class ProcessDecodeSession;                 // sets it
  mutable CostModel costs_{kMeasurableCallSeconds};  // what this kernel's answered calls took
  mutable std::optional<std::chrono::steady_clock::time_point> cutoff_;
  mutable PageSizeRecord page_sizes_;
};

// The argv that runs `attest kernel-host` with the given arguments: this executable, or the one
// set_kernel_host_executable named (the library in another program: its installed bin/attest).
std::vector<std::string> kernel_host_argv(const std::vector<std::string>& args);
void set_kernel_host_executable(const std::string& path);

// Caps on what a kernel may send back.
inline constexpr std::size_t kMaxKernelName = 64;
inline constexpr std::size_t kMaxKernelMessage = 1024;
inline constexpr std::size_t kMaxKernelString = std::size_t{64} * 1024;  // any string field as it travels

}  // namespace attest
