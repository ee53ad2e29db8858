// A plugin shared library opened in this process. `attest kernel-host` opens plugins this way
// (in the child, where a crash only kills the host); `attest bench --in-process` also does, to
// time a plugin without the child process, the protocol and the guard pages. Nothing else runs a
// plugin in attest's own process (docs/design.md#containment): the resolver always puts it in a child.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "attest/abi/process_kernel_server.hpp"
#include "attest/attest_abi.h"
#include "attest/kernels/kernel.h"
#include "page_size_record.h"

namespace attest {

// dlopen()s the library and returns its descriptor (ABI version 1 or 2) after the checks
// kernel-host makes before serving it. Throws KernelLoadError with a one-line reason: no such
// file, not loadable, no entry symbol, a NULL descriptor, an unknown ABI version, no forward.
// The library stays loaded for the life of the process.
const void* open_plugin(const std::string& path);

// A plugin called directly through its C descriptor, in this process: no guard pages, no
// canaries, no timeout. A non-OK status is a KernelFailure; a crash is attest's crash.
class InProcessPlugin final : public Kernel {
 public:
  explicit InProcessPlugin(const std::string& path);  // throws KernelLoadError

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

  // A forward call with the problem already in the ABI's form and the outputs allocated, so
  // that calling it costs the kernel's C function alone (what `attest bench` times).
  class Prepared {
   public:
    void operator()();  // one call; a non-OK status throws KernelFailure

   private:
    friend class InProcessPlugin;
    const InProcessPlugin* kernel_ = nullptr;
    protocol::WireProblem wire_;
    attest_problem_v2 view_{};
    std::vector<std::uint8_t> o_;  // O in its storage format
    std::vector<float> lse_;
  };
  Prepared prepare(const Problem& p) const;

 private:
  friend class InProcessDecode;
  protocol::ServedKernel served_;
  std::string name_;
  Capabilities caps_;
  mutable std::string last_path_ = "default";
  mutable std::string last_backward_path_;  // "": the last backward reported none
  mutable std::string last_packed_path_;    // "": the last packed call reported none
  mutable PageSizeRecord page_sizes_;
};

}  // namespace attest
