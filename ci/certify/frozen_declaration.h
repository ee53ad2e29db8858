// The kernel as a certification sees it: its capabilities() read once, at the start. An in-process
// kernel that answers differently later (a narrower contract after the first call, so that checks
// skip what it got wrong) fails the call where that shows, instead of narrowing the checks.
#pragma once

#include "attest/kernels/kernel.h"

namespace attest {

class FrozenDeclaration final : public Kernel {
 public:
  explicit FrozenDeclaration(const Kernel& kernel) : kernel_(kernel), caps_(kernel.capabilities()) {}
  std::string name() const override { return kernel_.name(); }
  Capabilities capabilities() const override { return caps_; }
  void forward(const Problem& p, std::span<float> o, std::span<float> lse) const override;
  void backward(const Problem& p, const BackwardInputs& in, const GradientSpans& out) const override;
  void merge(const MergeInputs& in, std::span<float> o, std::span<float> lse) const override;
  void forward_packed(const PackedCall& call, std::span<float> o, std::span<float> lse) const override;
  std::unique_ptr<DecodeSession> open_decode(const DecodeConfig& config) const override;
  std::size_t page_bytes(const DecodeConfig& config) const override;
  void decode_paged(const DecodeConfig& config, const PagedStep& step) const override;
  std::string last_path() const override { return kernel_.last_path(); }
  std::string last_backward_path() const override { return kernel_.last_backward_path(); }
  std::string last_packed_path() const override { return kernel_.last_packed_path(); }
  void set_cutoff(std::optional<std::chrono::steady_clock::time_point> cutoff) const override {
    kernel_.set_cutoff(cutoff);
  }

 private:
  void still_declared() const;  // throws KernelFailure (kStatus) when capabilities() changed
  const Kernel& kernel_;
  const Capabilities caps_;
};

}  // namespace attest
