#include "fuzz_entry.h"

#include <cstdio>
#include <cstdlib>
#include <memory>

namespace attest::fuzz {
namespace {

struct Session {
  Kernels kernels;
  // Room for every reference one input needs (a property may ask for several edited problems),
  // so the kernels after the first reuse them instead of recomputing.
  Oracle oracle{32};
};

std::unique_ptr<Session> session;  // set once per process, by LLVMFuzzerInitialize

}  // namespace

int fuzz_initialize() {
  const char* chosen = std::getenv("ATTEST_FUZZ_KERNEL");
  session = std::make_unique<Session>(Session{kernels_named(chosen ? chosen : "")});
  return 0;
}

int fuzz_one_input(Target target, const std::uint8_t* data, std::size_t size) {
  if (!session) {
    std::fprintf(stderr, "%s: LLVMFuzzerInitialize was not called\n", target_name(target));
    std::abort();
  }
  const std::optional<Violation> v = run_target(target, data, size, session->kernels, session->oracle);
  if (!v) return 0;
  const Shape& s = v->problem.shape;
  std::fprintf(stderr, "\n%s: %s violates %s (B=%d H=%d Hkv=%d Tq=%d Tk=%d Dk=%d Dv=%d):\n  %s\n", target_name(target),
               v->kernel.c_str(), v->verdict.property.c_str(), s.batch, s.heads, s.kv_heads, s.q_len, s.k_len,
               s.head_dim, s.value_dim, v->verdict.detail.c_str());
  std::fflush(stderr);
  std::abort();
}

}  // namespace attest::fuzz
