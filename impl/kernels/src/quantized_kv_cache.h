// A paged KV cache in a quantized format (quantized.h): q8 (int8 codes, an f16 scale per 32
// values), q8_token (a scale per row), q8_head (a static scale per kv head), q4 (4-bit codes, two
// per byte along the row, the first in the low nibble, a scale per 32), e4m3 or e5m2 (one fp8
// byte per value), or f16 (two bytes per value, little endian). Scales are f16 values
// kept as floats, so the read path needs no conversion. Pages of 16 tokens come from one pool;
// each sequence has a block table from its logical pages to physical ones.
//
// A page stores its keys transposed, [code rows][16] bytes and [blocks][16] scales per kv head
// (a q4 code row holds two dimensions, an f16 dimension two code rows: low bytes, then high), so
// one query's 16 scores are one vector: no horizontal sums. Values stay rows, [16][row bytes], for P.V.
//
// Rows are quantized on append with the canonical encoding (scale = the block's largest magnitude
// over the largest code, rounded to f16; codes to nearest): what attest sends is exactly in the
// format, so this gets its codes back and loses nothing.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "attest/kernels/faults.h"
#include "attest/model/precision.h"

namespace attest::kernels {

inline constexpr int kPageTokens = 16;

// One page's keys of one kv head: code byte r of slot c at codes[r * 16 + c], the scale of block
// b of slot c at scales[b * 16 + c].
struct KeyPage {
  const std::uint8_t* codes;
  const float* scales;
};
// Consecutive value rows of one page and kv head: row c's bytes at codes + c * row_bytes, its
// scales at scales + c * blocks.
struct ValueRows {
  const std::uint8_t* codes;
  const float* scales;
};

// How one format lays a row of `width` values out, and the faults its readers may carry.
struct KvLayout {
  Scalar format;
  int width;
  KernelFaults faults;

  bool has_scales() const {
    return format == Scalar::kQ8 || format == Scalar::kQ4 || format == Scalar::kQ8Token || format == Scalar::kQ8Head;
  }
  // Values per scale (q8_head: a row's scale is its kv head's static one, kept per row like q8_token's).
  int block() const { return format == Scalar::kQ8Token || format == Scalar::kQ8Head || !has_scales() ? width : 32; }
  int blocks() const { return has_scales() ? (width + block() - 1) / block() : 0; }
  int code_bytes() const { return format == Scalar::kF16 ? 2 : 1; }  // per value (q4: two values a byte)
  int row_bytes() const { return format == Scalar::kQ4 ? (width + 1) / 2 : width * code_bytes(); }
};

// One page of kPageTokens tokens of every kv head as bytes, so that a page may live in a pool
// the caller owns (block tables, Kernel::decode_paged): per kv head the transposed key codes, then
// their scales (floats), the value rows, their scales; each part starts on a 64-byte boundary.
class PageFormat {
 public:
  PageFormat(Scalar format, int kv_heads, int head_dim, int value_dim, const KernelFaults& faults);

  const KvLayout& keys() const { return keys_; }
  const KvLayout& values() const { return values_; }
  std::size_t bytes() const { return bytes_; }
  // Writes one token's K [Hkv][Dk] and V [Hkv][Dv] (strided by the caller) into `slot`; q8_head
  // quantizes them with the sequence's static scales, k_scales and v_scales [Hkv].
  void write(std::uint8_t* page, int slot, const float* k, std::size_t k_head_stride, const float* v,
             std::size_t v_head_stride, const float* k_scales, const float* v_scales) const;
  KeyPage key_page(const std::uint8_t* page, int g) const;
  ValueRows value_rows(const std::uint8_t* page, int g, int slot) const;
  // The bytes one token takes in a page (codes and scales of K and V).
  std::size_t token_bytes() const;

 private:
  KvLayout keys_, values_;
  int kv_heads_;
  std::size_t k_scales_at_ = 0, v_codes_at_ = 0, v_scales_at_ = 0, bytes_ = 0;
};

// A session's own paged cache: pages from one pool, each sequence's block table.
class QuantizedKvCache {
 public:
  QuantizedKvCache(Scalar format, int batch, int kv_heads, int head_dim, int value_dim, const KernelFaults& faults);

  void append(int b, const float* k, std::size_t k_head_stride, const float* v, std::size_t v_head_stride,
              const float* k_scales = nullptr, const float* v_scales = nullptr);

  int length(int b) const { return lengths_[b]; }
  const PageFormat& format() const { return format_; }
  const std::uint8_t* page_of(int b, int j) const;  // the page holding key j of sequence b
  std::size_t bytes() const;                        // pages allocated x the bytes their tokens take (codes and scales)

 private:
  PageFormat format_;
  std::vector<std::vector<std::uint8_t>> pages_;
  std::vector<std::vector<int>> block_table_;  // logical page -> physical page, per sequence
  std::vector<int> lengths_;
};

// Logical page p of a block table: its entry p, or for the page-table mutant entry p + 1 (the
// last entry from itself). `entries` is how many the sequence uses.
inline int physical_page(const std::int32_t* table, std::size_t entries, std::size_t logical, const KernelFaults& f) {
  return table[std::min(logical + (f.page_table_off_by_one ? 1 : 0), entries - 1)];
}

// The canonical encoding of x[0..width) in `layout`: row_bytes() code bytes, blocks() scales; with
// `fixed_scale` (q8_head), the codes of that one scale instead.
void quantize_row(const KvLayout& layout, const float* x, std::uint8_t* codes, float* scales,
                  const float* fixed_scale = nullptr);
// scores[c] = sum_i q[i] K_c[i] for the page's 16 slots (per block: the codes' dot product times
// the slot's block scale). Slots past the sequence hold zeros; the caller reads the ones it needs.
void page_scores(const KvLayout& layout, const float* q, KeyPage keys, float* scores);
// out += sum_c weights[c] V_c over the `count` rows from `values` whose logit is not -inf (a masked
// key's V is never read).
void accumulate_values(const KvLayout& layout, float* out, const float* weights, const float* logits, ValueRows values,
                       int count);

}  // namespace attest::kernels
