// A kernel object of the caller's served from a fork of the caller's process. A fork keeps only the
// calling thread: when the process ran other threads as certify forked it and the kernel's very first
// call hangs, those threads are likely the kernel's own (a pool started in its constructor), absent
// in the child, and every later call would hang the same way, each for the whole per-call limit. That
// first hang is then a load error at once, naming the cause and the ways out.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "attest/kernels/kernel.h"
#include "process_kernel.h"

namespace attest::api {

// Threads of this process now (/proc/self/task); 1 when it cannot be read.
int threads_of_this_process();

class ForkedObject final : public Kernel {
 public:
  // `threads_at_fork`: threads of the caller's process when certify was called.
  ForkedObject(std::unique_ptr<ProcessKernel> served, int threads_at_fork);

  std::string name() const override { return served_->name(); }
  Capabilities capabilities() const override { return served_->capabilities(); }
  void forward(const Problem& p, std::span<float> o, std::span<float> lse) const override;
  void backward(const Problem& p, const BackwardInputs& in, const GradientSpans& out) const override;
  void merge(const MergeInputs& in, std::span<float> o, std::span<float> lse) const override;
  void forward_packed(const PackedCall& call, std::span<float> o, std::span<float> lse) const override;
  std::unique_ptr<DecodeSession> open_decode(const DecodeConfig& config) const override;
  std::size_t page_bytes(const DecodeConfig& config) const override;
  void decode_paged(const DecodeConfig& config, const PagedStep& step) const override;
  std::string last_path() const override { return served_->last_path(); }
  std::string last_backward_path() const override { return served_->last_backward_path(); }
  std::string last_packed_path() const override { return served_->last_packed_path(); }
  void set_cutoff(std::optional<std::chrono::steady_clock::time_point> cutoff) const override {
    served_->set_cutoff(cutoff);
  }

 private:
  template <typename Call>
  auto guarded(const Call& call) const -> decltype(call());

  std::unique_ptr<ProcessKernel> served_;
  int threads_at_fork_;
  mutable bool answered_ = false;  // some call came back (a result or the kernel's own error)
};

}  // namespace attest::api
