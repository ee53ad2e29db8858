#include "quantized_kv_cache.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "attest/model/quantized.h"
#include "simd_vec.h"

namespace attest::kernels {
namespace {

using simd::vec16;
using simd::vec16i;
using bytes16 = std::uint8_t __attribute__((vector_size(16)));
using shorts16 = std::int16_t __attribute__((vector_size(32)));

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNan = std::numeric_limits<float>::quiet_NaN();

// 16 bytes widened to 32-bit lanes through 16 bits (GCC 12 lowers a one-step widening of bytes
// to scalar code), as unsigned values.
[[gnu::always_inline]] inline vec16i widen(const std::uint8_t* p) {
  bytes16 b;
  std::memcpy(&b, p, sizeof b);
  return __builtin_convertvector(__builtin_convertvector(b, shorts16), vec16i);
}

// The value of 16 codes: int8 for the q8 formats, fp8 by its bits (exponent rebiased by a power
// of two, so subnormals come out exact); a mutant reads e4m3's saturated 448 as infinity.
template <Scalar F>
[[gnu::always_inline]] inline vec16 decode16(const std::uint8_t* p, bool saturated_as_inf) {
  const vec16i x = widen(p);
  if constexpr (F == Scalar::kQ8 || F == Scalar::kQ8Token) {
    return __builtin_convertvector((x ^ 0x80) - 0x80, vec16);  // sign-extend the byte
  } else {
    constexpr bool e4m3 = F == Scalar::kE4M3;
    const vec16i magnitude = x & 0x7F, sign = (x & 0x80) << 24;
    vec16 v = (vec16)(magnitude << (e4m3 ? 20 : 21)) * (e4m3 ? 0x1p120f : 0x1p112f);
    if constexpr (e4m3) {
      v = magnitude == 0x7F ? simd::splat(kNan) : v;
      if (saturated_as_inf) v = magnitude == 0x7E ? simd::splat(kInf) : v;
    } else {
      v = magnitude == 0x7C ? simd::splat(kInf) : magnitude > 0x7C ? simd::splat(kNan) : v;
    }
    return (vec16)((vec16i)v | sign);
  }
}

// 16 f16 values from their bit patterns in 32-bit lanes: the exponent rebiased by a power of two
// (subnormals exact), infinities and NaN by their exponent.
[[gnu::always_inline]] inline vec16 f16_values(vec16i bits) {
  const vec16i magnitude = bits & 0x7FFF, sign = (bits & 0x8000) << 16;
  vec16 v = (vec16)(magnitude << 13) * 0x1p112f;
  v = magnitude == 0x7C00 ? simd::splat(kInf) : magnitude > 0x7C00 ? simd::splat(kNan) : v;
  return (vec16)((vec16i)v | sign);
}
// A transposed key page's f16 dimension: 16 low bytes, then the 16 high bytes.
[[gnu::always_inline]] inline vec16 f16_planar(const std::uint8_t* p) {
  return f16_values(widen(p) | (widen(p + 16) << 8));
}
// A value row's 16 consecutive f16 values.
[[gnu::always_inline]] inline vec16 f16_row(const std::uint8_t* p) {
  shorts16 h;
  std::memcpy(&h, p, sizeof h);
  return f16_values(__builtin_convertvector(h, vec16i) & 0xFFFF);
}

// q4: a byte's low and high nibble as codes - 8.
[[gnu::always_inline]] inline vec16 low_nibbles(vec16i x) { return __builtin_convertvector((x & 0xF) - 8, vec16); }
[[gnu::always_inline]] inline vec16 high_nibbles(vec16i x) { return __builtin_convertvector((x >> 4) - 8, vec16); }

// One value of a row.
float decode_one(const KvLayout& layout, const std::uint8_t* row, int i) {
  switch (layout.format) {
    case Scalar::kQ4:
      return float(((row[i / 2] >> (i % 2 ? 4 : 0)) & 0xF) - 8);
    case Scalar::kE4M3:
      if (layout.faults.e4m3_saturated_as_inf && (row[i] & 0x7F) == 0x7E)
        return std::copysign(kInf, row[i] & 0x80 ? -1.0f : 1.0f);
      return from_bits8(row[i], layout.format);
    case Scalar::kE5M2:
      return from_bits8(row[i], layout.format);
    case Scalar::kF16:
      return from_bits16(static_cast<std::uint16_t>(row[2 * i] | row[2 * i + 1] << 8), Scalar::kF16);
    default:
      return float(static_cast<std::int8_t>(row[i]));
  }
}

// Inlined into each clone of the dispatchers below (a plain function would be compiled once, for
// baseline x86-64).
template <Scalar F>
[[gnu::always_inline]] inline void page_scores_of(const KvLayout& layout, const float* q, KeyPage keys, float* scores) {
  const int n = layout.width, block = layout.block(), last_block = layout.blocks() - 1;
  const bool inf = layout.faults.e4m3_saturated_as_inf;
  vec16 total{};
  for (int b0 = 0, index = 0; b0 < n; b0 += block, ++index) {
    const int end = std::min(n, b0 + block);
    vec16 acc0{}, acc1{};  // two chains, so the adds overlap
    if constexpr (F == Scalar::kQ4) {
      for (int i = b0; i < end; i += 2) {  // a code row holds dimensions i (low nibble) and i + 1
        const vec16i x = widen(keys.codes + std::size_t(i / 2) * kPageTokens);
        acc0 += simd::splat(q[i]) * low_nibbles(x);
        if (i + 1 < end) acc1 += simd::splat(q[i + 1]) * high_nibbles(x);
      }
    } else if constexpr (F == Scalar::kF16) {
      for (int i = b0; i < end; ++i)
        (i % 2 ? acc1 : acc0) += simd::splat(q[i]) * f16_planar(keys.codes + std::size_t(2 * i) * kPageTokens);
    } else {
      int i = b0;
      for (; i + 2 <= end; i += 2) {
        acc0 += simd::splat(q[i]) * decode16<F>(keys.codes + std::size_t(i) * kPageTokens, inf);
        acc1 += simd::splat(q[i + 1]) * decode16<F>(keys.codes + std::size_t(i + 1) * kPageTokens, inf);
      }
      if (i < end) acc0 += simd::splat(q[i]) * decode16<F>(keys.codes + std::size_t(i) * kPageTokens, inf);
    }
    if (layout.has_scales()) {
      // Mutant: each block's scale read from the block after it (the last keeps its own).
      const int scale_at = std::min(index + (layout.faults.q8_scale_next_block ? 1 : 0), last_block);
      total += simd::load16(keys.scales + std::size_t(scale_at) * kPageTokens) * (acc0 + acc1);
    } else {
      total += acc0 + acc1;
    }
  }
  simd::store16(scores, total);
}

template <Scalar F>
[[gnu::always_inline]] inline void accumulate_values_of(const KvLayout& layout, float* out, const float* weights,
                                                        const float* logits, ValueRows values, int count) {
  const int n = layout.width, block = layout.block(), blocks = layout.blocks(), row_bytes = layout.row_bytes();
  const bool inf = layout.faults.e4m3_saturated_as_inf;
  for (int c = 0; c < count; ++c) {
    if (logits[c] == -kInf) continue;  // a masked key's V is never read
    const std::uint8_t* row = values.codes + std::size_t(c) * row_bytes;
    const float w = weights[c];
    for (int b0 = 0, index = 0; b0 < n; b0 += block, ++index) {
      const int end = std::min(n, b0 + block);
      // w * (d * code): d * code is the stored value, exactly; the weight then rounds once per
      // product, as in an f32 kernel. (w * d) * code would round w * d in the subnormal range and
      // let the code multiply that error by up to 127.
      float d = 1.0f;
      if (layout.has_scales())
        d = values.scales[std::size_t(c) * blocks +
                          std::min(index + (layout.faults.q8_scale_next_block ? 1 : 0), blocks - 1)];
      int i = b0;
      for (; i + 16 <= end; i += 16) {
        vec16 v;
        if constexpr (F == Scalar::kQ4) {  // 8 bytes: values i, i + 1 from each byte's low, high nibble
          std::uint8_t pairs[16] = {};
          std::memcpy(pairs, row + i / 2, 8);
          const vec16i x = widen(pairs);
          const vec16 lo = low_nibbles(x), hi = high_nibbles(x);
          v = __builtin_shufflevector(lo, hi, 0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
        } else if constexpr (F == Scalar::kF16) {
          v = f16_row(row + 2 * i);
        } else {
          v = decode16<F>(row + i, inf);
        }
        simd::store16(out + i, simd::load16(out + i) + simd::splat(w) * (simd::splat(d) * v));
      }
      for (; i < end; ++i) out[i] += w * (d * decode_one(layout, row, i));
    }
  }
}

// The canonical scale of a finite block: its largest magnitude over the largest code (q4: its
// signed largest over -8), rounded to f16 and saturated there; NaN with a NaN in the block,
// infinite with an infinity (finite values beside it become inf * 0 = NaN).
float block_scale(const float* x, int n, Scalar format) {
  float largest = 0;
  for (int i = 0; i < n; ++i) {
    if (std::isnan(x[i])) return kNan;
    if (std::fabs(x[i]) > std::fabs(largest)) largest = x[i];
  }
  if (std::isinf(largest)) return kInf;
  const float d = format == Scalar::kQ4 ? largest / -8.0f : std::fabs(largest) / 127.0f;
  return std::clamp(round_to(d, Scalar::kF16), -65504.0f, 65504.0f);
}

}  // namespace

void quantize_row(const KvLayout& layout, const float* x, std::uint8_t* codes, float* scales,
                  const float* fixed_scale) {
  const Scalar format = layout.format;
  if (format == Scalar::kF16) {
    for (int i = 0; i < layout.width; ++i) {
      const std::uint16_t bits = to_bits16(x[i], format);
      codes[2 * i] = static_cast<std::uint8_t>(bits), codes[2 * i + 1] = static_cast<std::uint8_t>(bits >> 8);
    }
    return;
  }
  if (!layout.has_scales()) {
    for (int i = 0; i < layout.width; ++i) codes[i] = to_bits8(x[i], format);
    return;
  }
  const int lo = code_min(format), hi = code_max(format);
  if (format == Scalar::kQ4) std::fill_n(codes, layout.row_bytes(), 0);
  for (int b0 = 0, index = 0; b0 < layout.width; b0 += layout.block(), ++index) {
    const int end = std::min(layout.width, b0 + layout.block());
    const float d = scales[index] = fixed_scale ? *fixed_scale : block_scale(x + b0, end - b0, format);
    for (int i = b0; i < end; ++i) {
      float code = 0;
      if (std::isinf(d) && std::isinf(x[i]))
        code = (x[i] > 0) == (d > 0) ? float(hi) : float(lo);
      else if (std::isfinite(d) && d != 0)
        code = std::clamp(float(std::nearbyint(double(x[i]) / d)), float(lo), float(hi));
      if (format != Scalar::kQ4) {
        codes[i] = static_cast<std::uint8_t>(static_cast<std::int8_t>(code));
        continue;
      }
      // Mutant: the pair written high nibble first.
      const bool high = (i % 2 == 1) != layout.faults.q4_nibbles_swapped;
      codes[i / 2] |= static_cast<std::uint8_t>((int(code) + 8) << (high ? 4 : 0));
    }
  }
  if (format == Scalar::kQ4 && layout.width % 2)  // the unused high nibble of an odd row: code 0
    codes[layout.width / 2] |= static_cast<std::uint8_t>(8 << 4);
}

ATTEST_MULTIVERSION
void page_scores(const KvLayout& layout, const float* q, KeyPage keys, float* scores) {
  switch (layout.format) {
    case Scalar::kQ4:
      return page_scores_of<Scalar::kQ4>(layout, q, keys, scores);
    case Scalar::kE4M3:
      return page_scores_of<Scalar::kE4M3>(layout, q, keys, scores);
    case Scalar::kE5M2:
      return page_scores_of<Scalar::kE5M2>(layout, q, keys, scores);
    case Scalar::kF16:
      return page_scores_of<Scalar::kF16>(layout, q, keys, scores);
    default:
      return page_scores_of<Scalar::kQ8>(layout, q, keys, scores);
  }
}

ATTEST_MULTIVERSION
void accumulate_values(const KvLayout& layout, float* out, const float* weights, const float* logits, ValueRows values,
                       int count) {
  switch (layout.format) {
    case Scalar::kQ4:
      return accumulate_values_of<Scalar::kQ4>(layout, out, weights, logits, values, count);
    case Scalar::kE4M3:
      return accumulate_values_of<Scalar::kE4M3>(layout, out, weights, logits, values, count);
    case Scalar::kE5M2:
      return accumulate_values_of<Scalar::kE5M2>(layout, out, weights, logits, values, count);
    case Scalar::kF16:
      return accumulate_values_of<Scalar::kF16>(layout, out, weights, logits, values, count);
    default:
      return accumulate_values_of<Scalar::kQ8>(layout, out, weights, logits, values, count);
  }
}

namespace {
std::size_t aligned64(std::size_t n) { return (n + 63) / 64 * 64; }
}  // namespace

PageFormat::PageFormat(Scalar format, int kv_heads, int head_dim, int value_dim, const KernelFaults& faults)
    : keys_{format, head_dim, faults}, values_{format, value_dim, faults}, kv_heads_(kv_heads) {
  if (!scaled(format) && format != Scalar::kE4M3 && format != Scalar::kE5M2 && format != Scalar::kF16)
    throw std::invalid_argument(std::string("quantized KV cache: ") + to_string(format) + " is not a cache format");
  const std::size_t heads = kv_heads, slots = kPageTokens;
  k_scales_at_ = aligned64(heads * keys_.row_bytes() * slots);
  v_codes_at_ = k_scales_at_ + aligned64(heads * keys_.blocks() * slots * sizeof(float));
  v_scales_at_ = v_codes_at_ + aligned64(heads * slots * values_.row_bytes());
  bytes_ = v_scales_at_ + aligned64(heads * slots * values_.blocks() * sizeof(float));
}

void PageFormat::write(std::uint8_t* page, int slot, const float* k, std::size_t k_head_stride, const float* v,
                       std::size_t v_head_stride, const float* k_scales, const float* v_scales) const {
  if (keys_.format == Scalar::kQ8Head && (!k_scales || !v_scales))
    throw std::invalid_argument("quantized KV cache: q8_head needs each kv head's static scales");
  const std::size_t heads = kv_heads_, k_rows = keys_.row_bytes(), k_blocks = keys_.blocks();
  const std::size_t v_bytes = values_.row_bytes(), v_blocks = values_.blocks();
  std::vector<std::uint8_t> row_codes(k_rows);  // a key row before it is scattered into its page
  std::vector<float> row_scales(k_blocks);
  float* page_k_scales = reinterpret_cast<float*>(page + k_scales_at_);
  float* page_v_scales = reinterpret_cast<float*>(page + v_scales_at_);
  for (std::size_t g = 0; g < heads; ++g) {
    // Mutant: kv head g quantized with the static scale of the next kv head (another group's).
    const std::size_t scale_of = keys_.faults.q8_head_scale_of_next_head ? (g + 1) % heads : g;
    const float* k_scale = k_scales ? &k_scales[scale_of] : nullptr;
    const float* v_scale = v_scales ? &v_scales[scale_of] : nullptr;
    quantize_row(keys_, k + g * k_head_stride, row_codes.data(), row_scales.data(), k_scale);
    for (std::size_t r = 0; r < k_rows; ++r) page[(g * k_rows + r) * kPageTokens + slot] = row_codes[r];
    for (std::size_t block = 0; block < k_blocks; ++block)
      page_k_scales[(g * k_blocks + block) * kPageTokens + slot] = row_scales[block];
    const std::size_t row = g * kPageTokens + slot;
    quantize_row(values_, v + g * v_head_stride, page + v_codes_at_ + row * v_bytes, page_v_scales + row * v_blocks,
                 v_scale);
  }
}

KeyPage PageFormat::key_page(const std::uint8_t* page, int g) const {
  return {page + std::size_t(g) * keys_.row_bytes() * kPageTokens,
          reinterpret_cast<const float*>(page + k_scales_at_) + std::size_t(g) * keys_.blocks() * kPageTokens};
}

ValueRows PageFormat::value_rows(const std::uint8_t* page, int g, int slot) const {
  const std::size_t row = std::size_t(g) * kPageTokens + slot;
  return {page + v_codes_at_ + row * values_.row_bytes(),
          reinterpret_cast<const float*>(page + v_scales_at_) + row * values_.blocks()};
}

std::size_t PageFormat::token_bytes() const {
  return std::size_t(kv_heads_) *
         (keys_.row_bytes() + values_.row_bytes() + sizeof(float) * (keys_.blocks() + values_.blocks()));
}

QuantizedKvCache::QuantizedKvCache(Scalar format, int batch, int kv_heads, int head_dim, int value_dim,
                                   const KernelFaults& faults)
    : format_(format, kv_heads, head_dim, value_dim, faults), block_table_(batch), lengths_(batch, 0) {}

void QuantizedKvCache::append(int b, const float* k, std::size_t k_head_stride, const float* v,
                              std::size_t v_head_stride, const float* k_scales, const float* v_scales) {
  const int j = lengths_[b], slot = j % kPageTokens;
  if (slot == 0) {  // the sequence's last page is full: take a fresh one from the pool
    block_table_[b].push_back(static_cast<int>(pages_.size()));
    pages_.emplace_back(format_.bytes());
  }
  format_.write(pages_[block_table_[b][j / kPageTokens]].data(), slot, k, k_head_stride, v, v_head_stride, k_scales,
                v_scales);
  ++lengths_[b];
}

const std::uint8_t* QuantizedKvCache::page_of(int b, int j) const {
  const std::vector<int>& table = block_table_[b];
  return pages_[physical_page(table.data(), table.size(), j / kPageTokens, format_.keys().faults)].data();
}

std::size_t QuantizedKvCache::bytes() const { return pages_.size() * kPageTokens * format_.token_bytes(); }

}  // namespace attest::kernels
