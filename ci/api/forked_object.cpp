#include "forked_object.h"

#include <filesystem>
#include <string>
#include <system_error>
#include <type_traits>
#include <utility>

namespace attest::api {

int threads_of_this_process() {
  std::error_code error;
  int threads = 0;
  for (std::filesystem::directory_iterator it("/proc/self/task", error), end; !error && it != end; it.increment(error))
    ++threads;
  return threads > 0 ? threads : 1;
}

ForkedObject::ForkedObject(std::unique_ptr<ProcessKernel> served, int threads_at_fork)
    : served_(std::move(served)), threads_at_fork_(threads_at_fork) {}

template <typename Call>
auto ForkedObject::guarded(const Call& call) const -> decltype(call()) {
  try {
    if constexpr (std::is_void_v<decltype(call())>) {
      call();
      answered_ = true;
    } else {
      auto result = call();
      answered_ = true;
      return result;
    }
  } catch (const KernelFailure& e) {
    if (e.kind() != KernelFailure::Kind::kHang || answered_ || threads_at_fork_ <= 1) {
      answered_ = answered_ || !e.isolating();
      throw;
    }
    throw KernelLoadError("the in-process kernel " + name() + " hung on its first call, in a fork of this process; " +
                          std::to_string(threads_at_fork_) +
                          " threads ran here when certify forked it and the fork has only the calling thread: a "
                          "kernel whose worker threads started before certify (a pool in its constructor) waits "
                          "for them forever. Give certify a KernelFactory that builds the kernel in the child, or "
                          "set in_process = true for a trusted kernel (" +
                          e.what() + ")");
  } catch (...) {
    answered_ = true;  // the kernel's own error came back: it runs
    throw;
  }
}

void ForkedObject::forward(const Problem& p, std::span<float> o, std::span<float> lse) const {
  guarded([&] { served_->forward(p, o, lse); });
}

void ForkedObject::backward(const Problem& p, const BackwardInputs& in, const GradientSpans& out) const {
  guarded([&] { served_->backward(p, in, out); });
}

void ForkedObject::merge(const MergeInputs& in, std::span<float> o, std::span<float> lse) const {
  guarded([&] { served_->merge(in, o, lse); });
}

void ForkedObject::forward_packed(const PackedCall& call, std::span<float> o, std::span<float> lse) const {
  guarded([&] { served_->forward_packed(call, o, lse); });
}

std::unique_ptr<DecodeSession> ForkedObject::open_decode(const DecodeConfig& config) const {
  return guarded([&] { return served_->open_decode(config); });
}

std::size_t ForkedObject::page_bytes(const DecodeConfig& config) const {
  return guarded([&] { return served_->page_bytes(config); });
}

void ForkedObject::decode_paged(const DecodeConfig& config, const PagedStep& step) const {
  guarded([&] { served_->decode_paged(config, step); });
}

}  // namespace attest::api
