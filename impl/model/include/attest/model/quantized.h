// Quantized KV storage (docs/design.md#serving-caches). fp8 e4m3 and e5m2 are element formats like bf16 (round_to
// works per value). The scaled integer formats are not: each group of values along a row shares
// one f16 scale d, and a value is d * code:
//   q8       groups of 32, code in [-127, 127]    (like ggml's q8_0)
//   q4       groups of 32, code in [-8, 7]        (stored as code + 8, two per byte: values 2m
//                                                  and 2m + 1 in byte m, low nibble first)
//   q4_0     as q4, in ggml's block_q4_0 order     (byte j: value j low, value j + 16 high)
//   q8_token one group per row (a scale per token and head), code in [-127, 127]
//   q8_head  one group per kv head of a sequence, every token's row (a static scale, fixed
//            before the first token, as serving caches with per-head scales keep), [-127, 127]
// A row is one token's K (Dk values) or V (Dv values) of one head; for q8_head, all of them of
// one kv head of one sequence (fit_width). Whether a value is representable depends on its
// group, so these formats are fitted and checked a row at a time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "attest/model/precision.h"

namespace attest {

bool scaled(Scalar s);  // q8, q4, q8_token, q8_head, q4_0
// The values fitted as one row of K or V ([B][Hkv][tokens][width]): a token's `width`, or for
// q8_head a sequence's kv head, tokens x width.
int fit_width(Scalar s, int tokens, int width);
// The canonical scale of a group (fit_rows' d): NaN when the group holds a NaN or mixes infinities
// with finite values, infinity when it is all infinite.
float canonical_scale(std::span<const float> group, Scalar s);
// Values per scale in a row of `width` (scaled formats only): 32, or the row.
int group_width(Scalar s, int width);
// The codes' bounds of a scaled format.
int code_min(Scalar s);
int code_max(Scalar s);

// Replaces each value by the nearest the format holds, rows of `width` at a time. Element formats
// round each value. Scaled formats take the canonical encoding of each group: d is the group's
// largest magnitude over code_max (q4, q4_0: its signed largest over -8), rounded to f16 and saturated
// there; codes round to nearest. A group with a NaN, or an infinity among finite values, becomes
// all NaN (a NaN scale); all-infinite groups stay. Fitting twice changes nothing.
void fit_rows(std::span<float> values, int width, Scalar s);
bool rows_representable(std::span<const float> values, int width, Scalar s);

// Bytes a format stores for `rows` rows of `width` values, scales included.
std::size_t stored_bytes(Scalar s, std::size_t rows, int width);

// The canonical encoding of fitted rows: per group, the f16 scale's bits (2 bytes, little endian)
// then its codes (q8: one int8 each; q4: code + 8, two per byte, low nibble first; q4_0: code + 8,
// byte j holding value j low and value j + ceil(n / 2) high for a group of n, as ggml's
// block_q4_0 for n = 32; e4m3 and e5m2: one byte per value, no scale). decode_rows inverts it.
std::vector<std::uint8_t> encode_rows(std::span<const float> values, int width, Scalar s);
std::vector<float> decode_rows(std::span<const std::uint8_t> bytes, std::size_t rows, int width, Scalar s);

// Rounding on entry, one row of an input at a time (Precision::q_entry): an element format rounds
// each value (round_to); q8 (2.6, Q only) quantizes as ggml's quantize_row_q8_0 does Q for a q8_0
// or q4_0 K: per 32 values, d = max|x| / 127, codes x * (127 / max|x|) rounded to nearest in f32,
// and each value becomes f16(d) * code. Not fit_rows: the codes come from the unrounded scale.
void round_on_entry(std::span<float> row, Scalar s);
// The largest |x - rounded x| of round_on_entry for a value of a q8 group whose largest magnitude
// is `largest`: half a step, the f16 rounding of the scale times 127, and its subnormal spacing.
double entry_quantization_error(double largest);

// fp8 bit patterns of values representable there (e4m3: S EEEE MMM, bias 7, no infinity,
// 0x7F NaN; e5m2: S EEEEE MM, bias 15, IEEE-like), and back.
std::uint8_t to_bits8(float x, Scalar s);
float from_bits8(std::uint8_t bits, Scalar s);

}  // namespace attest
