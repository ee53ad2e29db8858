// A kernel that runs in a child process and speaks the attest process protocol: a user's
// program (--kernel-cmd), or `attest kernel-host` around a plugin or a built-in kernel.
// Crashes, hangs and writes outside the outputs become KernelFailure; the child is restarted
// for the next call. A kernel that cannot start or speaks the protocol wrongly: KernelLoadError.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "attest/kernel.h"
#include "attest/process_protocol.hpp"

namespace attest {

class ProcessKernel final : public Kernel {
 public:
  struct Options {
    std::vector<std::string> argv;  // program and arguments
    double timeout_seconds = 30.0;  // per call
    std::string description;        // for messages: the command or plugin path
  };
  explicit ProcessKernel(Options options);  // starts the child and reads its descriptor
  ~ProcessKernel() override;

  std::string name() const override { return name_; }
  Capabilities capabilities() const override { return caps_; }
  void forward(const Problem& p, std::span<float> o, std::span<float> lse) const override;
  std::unique_ptr<DecodeSession> open_decode(const DecodeConfig& config) const override;
  std::string last_path() const override { return last_path_; }

  std::uint32_t abi_version() const { return abi_version_; }
  // One request and its reply; restarts the child first if it died. Used by decode sessions.
  std::string call(protocol::Type request, const std::string& payload, protocol::Type reply) const;
  std::uint64_t generation() const { return generation_; }  // increases with every restart

 private:
  void start() const;
  void stop() const;
  [[noreturn]] void child_died(const std::string& during) const;
  std::string read_reply(protocol::Type expected) const;

  Options options_;
  std::string name_;
  Capabilities caps_;
  std::uint32_t abi_version_ = 0;
  mutable pid_t pid_ = -1;
  mutable int to_child_ = -1;
  mutable int from_child_ = -1;
  mutable std::uint64_t generation_ = 0;
  mutable std::string last_path_ = "default";
};

// The argv that runs `attest kernel-host` with the given arguments (this executable).
std::vector<std::string> kernel_host_argv(const std::vector<std::string>& args);

}  // namespace attest
