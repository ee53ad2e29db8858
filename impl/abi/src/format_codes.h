// attest_precision's format codes and attest's formats, one table: the storage codecs, the wire
// conversion and the C adapter all map through it (private to impl/abi).
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>

#include "attest/attest_abi.h"
#include "attest/model/precision.h"

namespace attest::abi_formats {

// attest_precision's codes and attest's formats, in the same order (2.4's and q4_0 are K and V storage only).
inline constexpr std::pair<std::int32_t, Scalar> kFormats[] = {
    {ATTEST_F32, Scalar::kF32},   {ATTEST_BF16, Scalar::kBF16},        {ATTEST_F16, Scalar::kF16},
    {ATTEST_E4M3, Scalar::kE4M3}, {ATTEST_E5M2, Scalar::kE5M2},        {ATTEST_Q8, Scalar::kQ8},
    {ATTEST_Q4, Scalar::kQ4},     {ATTEST_Q8_TOKEN, Scalar::kQ8Token}, {ATTEST_Q8_HEAD, Scalar::kQ8Head},
    {ATTEST_Q4_0, Scalar::kQ4_0}};

// A format code; `kv_storage`: the storage of K or V, which may also be a 2.4 quantized format.
inline Scalar scalar_of(std::int32_t code, const std::string& field, bool kv_storage = false) {
  for (const auto& [c, s] : kFormats)
    if (c == code && (kv_storage || c <= ATTEST_F16)) return s;
  throw std::invalid_argument("descriptor: " + field + " = " + std::to_string(code) +
                              (kv_storage ? " is not an attest_precision code (ATTEST_F32 .. ATTEST_Q4_0)"
                                          : " is not ATTEST_F32, ATTEST_BF16 or ATTEST_F16 (quantized formats store K "
                                            "and V only)"));
}

inline std::int32_t code_of(Scalar s) {
  for (const auto& [c, format] : kFormats)
    if (format == s) return c;
  throw std::invalid_argument(std::string("descriptor: ") + to_string(s) + " has no attest_precision code");
}

}  // namespace attest::abi_formats
