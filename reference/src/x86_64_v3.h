// The double-double paths' x86-64-v3 clones (reference.cpp, gradient.cpp): each double-double
// product an FMA instruction instead of a call to the library's fma (both exact: the same bits),
// picked at run time.
#pragma once

#include "attest/reference/gradient.h"

#if defined(__x86_64__) && defined(__GNUC__)
#define ATTEST_X86_64_V3_CLONES
// Flattening inlines the whole double-double loop into one function: 1.4x faster in a release
// build, but under AddressSanitizer 2x slower and over 3x longer to compile (measured on the size
// ladder test), so a sanitized build keeps the calls.
#if defined(__SANITIZE_ADDRESS__)
#define ATTEST_FLATTEN_ORACLE
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ATTEST_FLATTEN_ORACLE
#endif
#endif
#ifndef ATTEST_FLATTEN_ORACLE
#define ATTEST_FLATTEN_ORACLE , gnu::flatten
#endif
#endif

namespace attest::reference_detail {

#ifdef ATTEST_X86_64_V3_CLONES
inline bool runs_x86_64_v3() { return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"); }
#endif

// compute_gradient without its clone, in any build: the tests compare the two bit for bit.
ReferenceGradient compute_gradient_portable(const Problem& p, const GradientInputs& in,
                                            const GradientNumerics& numerics = {});

}  // namespace attest::reference_detail
