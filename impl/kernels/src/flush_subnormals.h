// Flush-to-zero and denormals-are-zero for the calls of a kernel that declares flushed subnormals
// (ABI 2.9): subnormal operands read as zero and subnormal results become zero, each of its sign,
// as a wasm or GPU build does. Set for the scope of one call and restored after (the mode is per
// thread, and the caller's code must keep its subnormals).
#pragma once

#if defined(__SSE__) || defined(__x86_64__)
#include <xmmintrin.h>
#endif

namespace attest::kernels {

class FlushSubnormals {
 public:
  explicit FlushSubnormals(bool on) : on_(on) {
    if (!on_) return;
#if defined(__SSE__) || defined(__x86_64__)
    saved_ = _mm_getcsr();
    _mm_setcsr(saved_ | kFtz | kDaz);
#elif defined(__aarch64__)
    saved_ = __builtin_aarch64_get_fpcr();
    __builtin_aarch64_set_fpcr(saved_ | kFz);
#endif
  }
  ~FlushSubnormals() {
    if (!on_) return;
#if defined(__SSE__) || defined(__x86_64__)
    _mm_setcsr(saved_);
#elif defined(__aarch64__)
    __builtin_aarch64_set_fpcr(saved_);
#endif
  }
  FlushSubnormals(const FlushSubnormals&) = delete;
  FlushSubnormals& operator=(const FlushSubnormals&) = delete;

 private:
  static constexpr unsigned kFtz = 0x8000, kDaz = 0x0040;  // MXCSR bits 15 and 6
  static constexpr unsigned kFz = 1u << 24;                // FPCR.FZ: both at once on AArch64
  bool on_;
  unsigned saved_ = 0;
};

}  // namespace attest::kernels
