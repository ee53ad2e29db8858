#include "attest/properties/harness.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <limits>
#include <memory>
#include <vector>

#include "attest/kernels/unwritten.h"

namespace attest {
namespace {

constexpr std::size_t kGuard = 64;                 // floats of canary on each side of an output
constexpr std::uint32_t kCanaryBits = 0x7fa5a5a5;  // a NaN payload no kernel computes

float unwritten_nan() {
  const std::uint32_t bits = kUnwrittenF32Bits;
  float x;
  std::memcpy(&x, &bits, sizeof x);
  return x;
}

float canary() {
  float c;
  std::memcpy(&c, &kCanaryBits, sizeof c);
  return c;
}

// A buffer of n floats pre-filled with NaN, between two guard regions of canaries.
class GuardedBuffer {
 public:
  explicit GuardedBuffer(std::size_t n) : n_(n), storage_(n + 2 * kGuard, canary()) {
    std::fill_n(storage_.begin() + kGuard, n, unwritten_nan());
  }
  std::span<float> span() { return {storage_.data() + kGuard, n_}; }
  std::vector<float> contents() const { return {storage_.data() + kGuard, storage_.data() + kGuard + n_}; }
  // Empty when both guards are intact, else where the first overwrite is.
  std::string damage(const char* name) const {
    for (std::size_t i = 0; i < kGuard; ++i) {
      std::uint32_t before, after;
      std::memcpy(&before, &storage_[kGuard - 1 - i], 4);
      std::memcpy(&after, &storage_[kGuard + n_ + i], 4);
      if (after != kCanaryBits)
        return fmt::format("write outside {} at byte offset {} ({} has {} bytes)", name, 4 * (n_ + i), name, 4 * n_);
      if (before != kCanaryBits)
        return fmt::format("write outside {} at byte offset -{} ({} has {} bytes)", name, 4 * (i + 1), name, 4 * n_);
    }
    return {};
  }

 private:
  std::size_t n_;
  std::vector<float> storage_;
};

// A copy of the buffer whose allocation continues with NaN past its size.
std::vector<float> with_nan_tail(const std::vector<float>& v) {
  std::vector<float> out;
  out.reserve(v.size() + kGuard);
  out.assign(v.size() + kGuard, std::numeric_limits<float>::quiet_NaN());
  std::copy(v.begin(), v.end(), out.begin());
  out.resize(v.size());  // capacity (and the NaN tail) stays
  return out;
}

}  // namespace

bool never_written(float x) {
  std::uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  return bits == kUnwrittenF32Bits;
}

namespace {
thread_local PathLog* active_path_log = nullptr;
// The kernels whose last call on this thread was a backward (each leaves at its next forward): a
// set, so that a check's own call of the loop backward (its precision model) does not hide that the
// checked kernel's last call was a backward.
thread_local std::vector<const Kernel*> backward_last;

bool last_call_was_backward(const Kernel& kernel) {
  return std::find(backward_last.begin(), backward_last.end(), &kernel) != backward_last.end();
}
}  // namespace

std::string backward_call_path(const Kernel& kernel) {
  const std::string reported = kernel.last_backward_path();
  return reported.empty() ? "unknown (a backward call; the kernel reports no path for it)" : reported;
}

std::string packed_call_path(const Kernel& kernel) {
  const std::string reported = kernel.last_packed_path();
  return reported.empty() || reported == kPackedPath ? kPackedPath : std::string(kPackedPath) + " (" + reported + ")";
}

std::string last_call_path(const Kernel& kernel) {
  if (last_call_was_backward(kernel)) return backward_call_path(kernel);
  return kernel.last_path();
}
void forget_last_call() { backward_last.clear(); }

namespace {
// Drawn once per process from the clock and an address: a kernel cannot know it.
std::uint64_t outside_declaration_token() {
  static const std::uint64_t token = [] {
    static int anchor;
    const auto now = static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
    return (now * 0x9E3779B97F4A7C15ULL) ^ reinterpret_cast<std::uintptr_t>(&anchor) ^ 0xA77E57ULL;
  }();
  return token;
}
}  // namespace

OutsideDeclaration::OutsideDeclaration(const std::string& why)
    : std::runtime_error(why), token_(outside_declaration_token()) {}
bool OutsideDeclaration::raised_by_attest() const { return token_ == outside_declaration_token(); }

struct HarnessRaise {
  [[noreturn]] static void outside(const std::string& why) { throw OutsideDeclaration(why); }
  // A kernel call that throws an OutsideDeclaration (a kernel's own, re-declared) fails the call.
  template <typename Call>
  static void kernel_call(Call call) {
    try {
      call();
    } catch (const OutsideDeclaration&) {
      throw KernelFailure(KernelFailure::Kind::kStatus,
                          "the kernel threw attest's OutsideDeclaration itself (only attest may)");
    }
  }
};

namespace {

// A kernel's reply broke the ABI in `call` after it had loaded: its failure, with the host's words.
[[noreturn]] void broke_the_abi(const char* call, const std::string& why) {
  throw KernelFailure(KernelFailure::Kind::kProtocol,
                      fmt::format("the kernel's {} broke the ABI (the kernel's fault, not attest's): {}", call, why));
}

// One call of an open session. The kernel host cannot have restarted under it (the session would
// be gone: a crash), so a load error here is the host refusing the kernel's reply.
template <typename Call>
auto session_call(const char* name, Call call) {
  try {
    decltype(call()) out;
    HarnessRaise::kernel_call([&] { out = call(); });
    return out;
  } catch (const KernelLoadError& e) {
    broke_the_abi(name, e.what());
  } catch (const KernelFailure& e) {
    if (e.kind() == KernelFailure::Kind::kProtocol) broke_the_abi(name, e.what());
    throw;
  }
}

class GuardedSession final : public DecodeSession {
 public:
  explicit GuardedSession(std::unique_ptr<DecodeSession> inner) : inner_(std::move(inner)) {}
  void step(int n, std::span<const float> q, std::span<const float> k, std::span<const float> v, std::span<float> o,
            std::span<float> lse) override {
    session_call("decode_step", [&] { return (inner_->step(n, q, k, v, o, lse), 0); });
  }
  long long length() const override { return inner_->length(); }
  std::size_t cache_bytes() const override { return inner_->cache_bytes(); }
  std::vector<long long> retained_positions(int b, int t) const override {
    return session_call("decode_retained", [&] { return inner_->retained_positions(b, t); });
  }

 private:
  std::unique_ptr<DecodeSession> inner_;
};

}  // namespace

std::unique_ptr<DecodeSession> open_guarded_session(const Kernel& kernel, const DecodeConfig& config) {
  std::unique_ptr<DecodeSession> inner;  // opening may load the kernel: a load error stays one
  HarnessRaise::kernel_call([&] { inner = kernel.open_decode(config); });
  return std::make_unique<GuardedSession>(std::move(inner));
}

std::size_t guarded_page_bytes(const Kernel& kernel, const DecodeConfig& config) {
  std::size_t bytes = 0;  // the first call may load the kernel: a load error stays one
  HarnessRaise::kernel_call([&] { bytes = kernel.page_bytes(config); });
  return bytes;
}

void run_paged_guarded(const Kernel& kernel, const DecodeConfig& config, const PagedStep& step) {
  HarnessRaise::kernel_call([&] { kernel.decode_paged(config, step); });
}

PathLog::PathLog() : outer_(active_path_log) { active_path_log = this; }
PathLog::~PathLog() { active_path_log = outer_; }
void PathLog::record(const Problem& p, const std::string& path) {
  if (active_path_log) active_path_log->calls_.push_back({&p, path});
}

GuardedOutputs run_guarded(const Kernel& kernel, const Problem& p) {
  p.validate();
  if (const std::string why = kernel.capabilities().unsupported_because(p); !why.empty())
    HarnessRaise::outside("the check needed a problem outside the kernel's declaration (" + why + ")");
  Problem copy = p;
  copy.q = with_nan_tail(p.q);
  copy.k = with_nan_tail(p.k);
  copy.v = with_nan_tail(p.v);
  GuardedBuffer o(p.o_size()), lse(p.lse_size());
  std::erase(backward_last, &kernel);
  HarnessRaise::kernel_call(
      [&] { kernel.forward(copy, o.span(), kernel.capabilities().lse() ? lse.span() : std::span<float>()); });
  GuardedOutputs out;
  out.path = kernel.last_path();
  PathLog::record(p, out.path);
  // A declared path is the kernel's word: a call served elsewhere breaks it.
  if (const std::string broken = declared_path_violation(kernel.capabilities().paths, p, out.path); !broken.empty())
    throw KernelFailure(KernelFailure::Kind::kFault, "declared paths: " + broken);
  out.o = o.contents();
  if (kernel.capabilities().lse()) out.lse = lse.contents();
  out.canary_report = o.damage("O");
  if (out.canary_report.empty()) out.canary_report = lse.damage("LSE");
  out.canaries_intact = out.canary_report.empty();
  auto same = [](const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
  };
  out.inputs_intact = same(copy.q, p.q) && same(copy.k, p.k) && same(copy.v, p.v);
  // Memory outside the outputs is never the kernel's to write: every property fails on it,
  // as it does for a kernel in a child process.
  if (!out.canaries_intact) throw KernelFailure(KernelFailure::Kind::kFault, out.canary_report);
  if (!out.inputs_intact) throw KernelFailure(KernelFailure::Kind::kFault, "the kernel changed its input buffers");
  return out;
}

Gradients run_backward_guarded(const Kernel& kernel, const Problem& p, const BackwardInputs& in) {
  p.validate();
  if (const std::string why = kernel.capabilities().unsupported_because(p); !why.empty())
    HarnessRaise::outside("the check needed a problem outside the kernel's declaration (" + why + ")");
  if (!kernel.capabilities().backward()) HarnessRaise::outside("the kernel declares no backward");
  Problem copy = p;
  copy.q = with_nan_tail(p.q);
  copy.k = with_nan_tail(p.k);
  copy.v = with_nan_tail(p.v);
  const std::vector<float> o = with_nan_tail({in.o.begin(), in.o.end()});
  const std::vector<float> lse = with_nan_tail({in.lse.begin(), in.lse.end()});
  const std::vector<float> d_o = with_nan_tail({in.d_o.begin(), in.d_o.end()});
  GuardedBuffer dq(p.q_size()), dk(p.k_size()), dv(p.v_size()), dsinks(p.modifiers.sinks.size());
  if (!last_call_was_backward(kernel))
    backward_last.push_back(&kernel);  // before the call: one that throws is named too
  HarnessRaise::kernel_call([&] {
    kernel.backward(copy, {o, lse, d_o, in.threads}, {dq.span(), dk.span(), dv.span(), dsinks.span()});
  });
  Gradients out;
  out.path = kBackwardPath;  // one path for every backward call: its coverage is counted apart from the forward's
  PathLog::record(p, out.path);
  out.dq = dq.contents(), out.dk = dk.contents(), out.dv = dv.contents(), out.dsinks = dsinks.contents();
  std::string damage = dq.damage("dQ");
  for (const auto& [buffer, name] : {std::pair{&dk, "dK"}, {&dv, "dV"}, {&dsinks, "dsinks"}})
    if (damage.empty()) damage = buffer->damage(name);
  if (!damage.empty()) throw KernelFailure(KernelFailure::Kind::kFault, damage);
  auto same = [](const std::vector<float>& a, std::span<const float> b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
  };
  if (!same(copy.q, p.q) || !same(copy.k, p.k) || !same(copy.v, p.v) || !same(o, in.o) || !same(lse, in.lse) ||
      !same(d_o, in.d_o))
    throw KernelFailure(KernelFailure::Kind::kFault, "the kernel changed its input buffers");
  return out;
}

}  // namespace attest
