// The NaN attest fills a kernel's outputs with before each call: an element that still holds it
// was never written. The C ABI publishes the same bits as ATTEST_UNWRITTEN_F32 for external
// kernels; the ABI's C++ side pins that copy to this one.
#pragma once

#include <cstdint>

namespace attest {

inline constexpr std::uint32_t kUnwrittenF32Bits = 0x7FCAFE00u;

}  // namespace attest
