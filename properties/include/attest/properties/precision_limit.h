// Where a declared arithmetic fails by itself: an honest declaration must not hide a
// design that is wrong in practice. The model kernel of the declaration runs on equal scores, where
// the exact output is V: the first length at which it overflows although V is finite, within the
// contract's value range, and representable in O's storage, and the first at which it strays more than 1% from V = 1 (a
// sum that stagnates). The certificate reports them as findings, whatever the kernel's verdict.
#pragma once

#include <string>
#include <vector>

#include "attest/kernels/kernel.h"

namespace attest {

struct PrecisionLimit {
  std::string path;      // empty: the kernel's own precision; else a declared path's
  std::string kind;      // "overflow" or "accuracy"
  long long length = 0;  // keys at which it starts (a power of two)
  std::string detail;    // "2 equal keys of V = 65504 give inf"
};

inline constexpr long long kPrecisionLimitHorizon = 65536;  // lengths probed: 1, 2, 4, ... this

// max_abs_value: the contract's largest |V| (0: any), when smaller than the formats allow.
std::vector<PrecisionLimit> precision_limits(const Precision& p, double max_abs_value = 0);
// The kernel's precision and each declared path's.
std::vector<PrecisionLimit> precision_limits(const Capabilities& c);
// "overflow from T = 2 (2 equal keys of V = 65504 give inf); 1% error from T = 4096 (...)".
std::string limits_text(const std::vector<PrecisionLimit>& limits);

}  // namespace attest
