// Bytes -> problem for every fuzz target (one decoder). Shape and mask controls are read
// from the END of the input (FuzzedDataProvider's integers), values from the FRONT, so a
// mutation of a shape field leaves the data bytes where they were. Sizes are bounded so
// one input runs in milliseconds to a few hundred.
//
// Two layers. The basic controls (every input written before the extension, and any input
// with flag bit 15 clear) give lengths up to kMaxLength and no score modifiers; they decode
// exactly as they always did, whatever the kernel. With kExtended (bit 15) a few more controls
// follow: lengths up to twice the kernel's largest tile, biased to its tile edges, and the
// score modifiers the kernel declares (softcap, ALiBi slopes, a bias with -inf entries and
// broadcast flags, sinks). So an extended input decodes relative to the kernel given: the same
// bytes mean "the second query tile plus one" on a 32x32 kernel and on a 128x64 one.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "attest/kernels/kernel.h"
#include "attest/model/problem.h"

namespace attest::fuzz {

enum class Flavor {
  kGeneral,   // any mask, magnitudes near 1 to 1e4
  kMasks,     // at least one mask term, usually several; empty rows likely
  kOverflow,  // magnitudes from 1e-40 to the edge of float range, special values, odd scales
  kDecode,    // causal decode shapes; chunk sizes follow
};

inline constexpr int kMaxLength = 40;  // lengths of the basic controls
inline constexpr int kMaxWidth = 16;
inline constexpr int kDefaultTile = 32;  // the tile assumed for a kernel that declares none
// An extended input with more logits than this (B x H x Tq x Tk) runs one batch entry and at
// most two heads (never reached below 64 x 64 tiles: 8 x 66 x 66 is under it).
inline constexpr std::int64_t kSliceBudget = 1 << 16;

// What an extended input may reach on a kernel: lengths up to `max_length` (at least twice its
// largest tile, never below kMaxLength), tile edges of `query_tile` and `key_tile`, and the
// score modifiers it declares. Decoding is a function of the bytes and this.
struct Reach {
  int query_tile = kDefaultTile, key_tile = kDefaultTile;
  int max_length = 2 * kDefaultTile + 2;
  FeatureSet modifiers;  // declared score modifiers: the only ones drawn
};
Reach reach_of(const Capabilities& caps);

// A length control of an extended input (0..255), read next to a basic length `small`:
//   pick % 4 == 0 or 1: `small` itself (most bugs shrink small: keep them frequent);
//   pick % 4 == 2: a tile edge m * tile + delta (u = pick / 4: delta = u % 3 - 1, m = 1 + (u / 3) % M,
//                  M the whole tiles below the cap), so u = 3 (m - 1) + delta + 1 names the same
//                  edge on every kernel with at least m tiles below its cap;
//   pick % 4 == 3: anywhere in 1..cap.
constexpr int kSmallPick = 0;
constexpr int tile_edge_pick(int m, int delta) { return 4 * (3 * (m - 1) + delta + 1) + 2; }
int extended_length(int pick, int small, int tile, int cap);
// A padding length of an extended input (0..255) over a length `len`, next to the basic control
// `small_valid` (read against the basic length `small_len`):
//   pick % 4 == 0: small_valid scaled to len (0 stays 0, all stays all);  == 1: small_valid itself;
//   == 2: a tile edge as above, at most len;  == 3: anywhere in 0..len.
int valid_length(int pick, int small_valid, int small_len, int len, int tile);

// Everything the decoder reads, in order: the decoded form of an input's control bytes.
struct Controls {
  int batch = 1;                       // 1..2
  int head_config = 0;                 // 0..7: (H, Hkv) of kHeadPairs
  int q_len = 1, k_len = 1;            // 1..kMaxLength
  int head_dim = 1, value_dim = 1;     // 1..kMaxWidth
  std::uint16_t flags = 0;             // Flag bits
  int window = 1;                      // 1..kMaxLength
  int q_offset = 0;                    // -8..48 (used with kOffsetExplicit)
  int qk_exponent = 0;                 // -40..18: q, k ~ 10^(qk_exponent/2)
  int v_exponent = 0;                  // -40..36
  int specials = 0;                    // 0..255: density of special values (overflow flavor)
  int scale_choice = 0;                // 0..7
  std::vector<int> kv_valid, q_valid;  // per batch
  std::uint64_t segment_bits = 0;      // bit t: a new segment starts at t
  int explicit_density = 0;            // 0..255
  std::uint32_t explicit_seed = 0;
  std::vector<int> chunks;  // decode: chunk sizes 1..kMaxLength
  // Read only with kExtended, after all of the above (Reach and extended_length say how they decode):
  std::uint8_t extended = 0;  // Extended bits: modifiers wanted, bias broadcast
  int q_size = kSmallPick, k_size = kSmallPick, window_size = kSmallPick;  // 0..255, extended_length
  std::vector<int> kv_valid_size, q_valid_size;  // per batch, 0..255: padding lengths (valid_length)
  int softcap = 0;                               // 0..255: c = 10^(4 x / 255), 1 to 1e4
  int slope_exponent = 0;                        // 0..255: magnitude 2^(x / 32 - 6), 1/64 to 4
  int slope_kinds = 0;                           // 0..255: 2 bits per head: 0, +geometric, -geometric, +magnitude
  int bias_exponent = 0;                         // 0..255: magnitude 10^(5 x / 255 - 1), 0.1 to 1e4
  int bias_minus_inf = 0;                        // 0..255: an entry is -inf with probability x / 256
  std::uint32_t bias_seed = 0;
  int sink_exponent = 0;  // 0..255: magnitude 10^(6 x / 255 - 2), 0.01 to 1e4
  int sink_kinds = 0;     // 0..255: 2 bits per head: 0, +magnitude, -magnitude, -magnitude (h+1)/H
  // Read only with kMoreTerms in `extended`, last:
  int integer_terms = 0;  // 0..255: bit k turns on the k-th integer mask term of the feature table
                          // (its parameter the window control; window and chunk have flags too)
};

enum Extended : std::uint8_t {
  kSoftcapOn = 1 << 0,
  kAlibiOn = 1 << 1,
  kBiasOn = 1 << 2,
  kSinksOn = 1 << 3,
  kBiasPerBatch = 1 << 4,
  kBiasPerHead = 1 << 5,
  kMoreTerms = 1 << 6,  // the integer_terms control follows (a new integer mask term needs no new bit)
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
  kChunk = 1 << 11,          // chunked local attention; the chunk size is the window control (no new control:
                             // inputs written before it decode as they did)
  kKvStorageOnly = 1 << 12,  // with kBf16 / kF16: only K and V stored in that format (an f16 KV cache)
  // Bits 13 and 14 are ignored, but set in inputs the fuzzer found before (corpus/regressions/):
  // never give them a meaning. Bit 15 was clear in every committed input when it got one.
  kExtended = 1 << 15,  // the extended controls follow (tile-relative lengths, score modifiers)
};

struct FuzzCase {
  Problem problem;
  std::vector<int> chunks;  // decode flavor: chunk sizes summing to Tk
};

// The input as the kernel with this reach reads it; without one, as a kernel that declares no
// tiles and no score modifiers (inputs without kExtended decode the same either way).
FuzzCase decode_input(const std::uint8_t* data, std::size_t size, Flavor flavor, const Reach& reach);
FuzzCase decode_input(const std::uint8_t* data, std::size_t size, Flavor flavor);
// The controls alone (tests, seeds).
Controls decode_controls(const std::uint8_t* data, std::size_t size, Flavor flavor);

// The inverse, for seeds: the bytes whose decoding yields these controls and values.
std::vector<std::uint8_t> encode_input(const Controls& controls, const std::vector<std::int16_t>& values,
                                       Flavor flavor);

}  // namespace attest::fuzz
