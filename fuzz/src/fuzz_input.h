// Bytes -> problem for every fuzz target (one decoder). Shape and mask controls are read
// from the END of the input (FuzzedDataProvider's integers), values from the FRONT, so a
// mutation of a shape field leaves the data bytes where they were. Sizes are bounded so
// one input runs in milliseconds.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "attest/problem.h"

namespace attest::fuzz {

enum class Flavor {
  kGeneral,   // any mask, magnitudes near 1 to 1e4
  kMasks,     // at least one mask term, usually several; empty rows likely
  kOverflow,  // magnitudes from 1e-40 to the edge of float range, special values, odd scales
  kDecode,    // causal decode shapes; chunk sizes follow
};

inline constexpr int kMaxLength = 40;
inline constexpr int kMaxWidth = 16;

// Everything the decoder reads, in order: the decoded form of an input's control bytes.
struct Controls {
  int batch = 1;        // 1..2
  int head_config = 0;  // 0..7: (H, Hkv) of kHeadPairs
  int q_len = 1, k_len = 1;          // 1..kMaxLength
  int head_dim = 1, value_dim = 1;   // 1..kMaxWidth
  std::uint16_t flags = 0;           // Flag bits
  int window = 1;                    // 1..kMaxLength
  int q_offset = 0;                  // -8..48 (used with kOffsetExplicit)
  int qk_exponent = 0;               // -40..18: q, k ~ 10^(qk_exponent/2)
  int v_exponent = 0;                // -40..36
  int specials = 0;                  // 0..255: density of special values (overflow flavor)
  int scale_choice = 0;              // 0..7
  std::vector<int> kv_valid, q_valid;  // per batch
  std::uint64_t segment_bits = 0;    // bit t: a new segment starts at t
  int explicit_density = 0;          // 0..255
  std::uint32_t explicit_seed = 0;
  std::vector<int> chunks;           // decode: chunk sizes 1..kMaxLength
};

enum Flag : std::uint16_t {
  kCausal = 1 << 0,
  kWindow = 1 << 1,
  kKeyPadding = 1 << 2,
  kQueryPadding = 1 << 3,
  kSegments = 1 << 4,
  kExplicit = 1 << 5,
  kRope = 1 << 6,
  kOffsetTopLeft = 1 << 7,
  kOffsetExplicit = 1 << 8,
  kBf16 = 1 << 9,
  kF16 = 1 << 10,
  kChunk = 1 << 11,  // chunked local attention; the chunk size is the window control (no new control:
                     // inputs written before it decode as they did)
  kKvStorageOnly = 1 << 12,  // with kBf16 / kF16: only K and V stored in that format (an f16 KV cache)
};

struct FuzzCase {
  Problem problem;
  std::vector<int> chunks;  // decode flavor: chunk sizes summing to Tk
};

FuzzCase decode_input(const std::uint8_t* data, std::size_t size, Flavor flavor);

// The inverse, for seeds: the bytes whose decoding yields these controls and values.
std::vector<std::uint8_t> encode_input(const Controls& controls, const std::vector<std::int16_t>& values,
                                       Flavor flavor);

}  // namespace attest::fuzz
