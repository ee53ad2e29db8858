#include "frozen_declaration.h"

namespace attest {

void FrozenDeclaration::still_declared() const {
  if (!(kernel_.capabilities() == caps_))
    throw KernelFailure(KernelFailure::Kind::kStatus,
                        "the kernel's capabilities() changed after attest first read them (a declaration is fixed "
                        "for the whole certification)");
}

void FrozenDeclaration::forward(const Problem& p, std::span<float> o, std::span<float> lse) const {
  still_declared();
  kernel_.forward(p, o, lse);
}

void FrozenDeclaration::backward(const Problem& p, const BackwardInputs& in, const GradientSpans& out) const {
  still_declared();
  kernel_.backward(p, in, out);
}

void FrozenDeclaration::merge(const MergeInputs& in, std::span<float> o, std::span<float> lse) const {
  still_declared();
  kernel_.merge(in, o, lse);
}

void FrozenDeclaration::forward_packed(const PackedCall& call, std::span<float> o, std::span<float> lse) const {
  still_declared();
  kernel_.forward_packed(call, o, lse);
}

std::unique_ptr<DecodeSession> FrozenDeclaration::open_decode(const DecodeConfig& config) const {
  still_declared();
  return kernel_.open_decode(config);
}

std::size_t FrozenDeclaration::page_bytes(const DecodeConfig& config) const {
  still_declared();
  return kernel_.page_bytes(config);
}

void FrozenDeclaration::decode_paged(const DecodeConfig& config, const PagedStep& step) const {
  still_declared();
  kernel_.decode_paged(config, step);
}

}  // namespace attest
