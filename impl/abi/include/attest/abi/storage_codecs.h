// Values in the storage formats the C ABI and the protocol carry (f32, bf16, f16, and for K and V
// 2.4's quantized rows), and back.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "attest/kernels/kernel.h"
#include "attest/model/precision.h"

namespace attest {

// A format's attest_precision code.
std::int32_t abi_code(Scalar s);
// n float32 values from raw memory.
std::vector<float> floats_of(const void* data, std::size_t n);
// Values from a buffer in storage format `s`, and values (representable in `s`) into one.
// Float formats only (f32, bf16, f16).
std::vector<float> floats_from_storage(const std::uint8_t* data, std::size_t n, Scalar s);
std::vector<std::uint8_t> stored(const std::vector<float>& values, Scalar s);
// K or V of a problem, [outer][tokens][width], in any storage format (quantized ones as rows in
// attest_precision's layout; q8_head one group per kv head of a sequence), and back.
std::vector<std::uint8_t> stored_kv(const std::vector<float>& values, Scalar s, int tokens, int width);
std::vector<float> kv_from_storage(const std::uint8_t* data, Scalar s, std::size_t outer, int tokens, int width);
// A decode step's q, k and v in their storage formats (q8_head K and V as codes of the session's
// static scales).
struct StoredStep {
  std::vector<std::uint8_t> q, k, v;
};
// A decode step's K or V rows [outer][n][width] back from storage (q8_head: codes times the kv
// head's static scale, `head_scales` [B][Hkv]).
std::vector<float> step_rows_from_storage(const void* data, Scalar s, std::size_t outer, int n, int width,
                                          const std::vector<float>& head_scales);
// Sequence b of a configuration alone (B = 1, its q8_head scales): how a paged call's sequences,
// packed one after another, are encoded and decoded.
DecodeConfig sequence_config(const DecodeConfig& c, std::size_t b);
StoredStep stored_step(const DecodeConfig& c, const Precision& precision, int n, std::span<const float> q,
                       std::span<const float> k, std::span<const float> v);
// A block-table call's new tokens (PagedStep's packing, sequence after sequence) in their storage formats.
StoredStep stored_paged(const DecodeConfig& c, const Precision& precision, std::span<const std::int32_t> counts,
                        std::span<const float> q, std::span<const float> k, std::span<const float> v);

}  // namespace attest
