// Values in their storage formats (f32, bf16, f16, and for K and V the quantized rows of 2.4) as
// the C ABI and the protocol carry them, and back.
#include "attest/abi/storage_codecs.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>

#include "attest/model/quantized.h"
#include "format_codes.h"

namespace attest {
namespace {

using abi_formats::code_of;

template <typename T>
std::vector<std::uint8_t> as_bytes(const std::vector<T>& v) {
  std::vector<std::uint8_t> out(v.size() * sizeof(T));
  if (!out.empty()) std::memcpy(out.data(), v.data(), out.size());
  return out;
}

}  // namespace

// Values (representable in `s`) as the bytes of that storage format, and back.
std::vector<std::uint8_t> stored(const std::vector<float>& values, Scalar s) {
  if (s == Scalar::kF32) return as_bytes(values);
  if (info(s).bytes != 2) throw std::invalid_argument(std::string("stored: ") + to_string(s) + " is stored in rows");
  std::vector<std::uint16_t> bits(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) bits[i] = to_bits16(values[i], s);
  return as_bytes(bits);
}

std::vector<float> floats_of(const void* data, std::size_t n) {
  std::vector<float> out(n);
  if (n) std::memcpy(out.data(), data, n * sizeof(float));
  return out;
}

std::vector<float> floats_from_storage(const std::uint8_t* data, std::size_t n, Scalar s) {
  if (s == Scalar::kF32) return floats_of(data, n);
  if (info(s).bytes != 2)
    throw std::invalid_argument(std::string("floats_from_storage: ") + to_string(s) + " is stored in rows");
  std::vector<float> out(n);
  for (std::size_t i = 0; i < n; ++i) {
    std::uint16_t bits;
    std::memcpy(&bits, data + 2 * i, 2);
    out[i] = from_bits16(bits, s);
  }
  return out;
}

std::int32_t abi_code(Scalar s) { return code_of(s); }

std::vector<std::uint8_t> stored_kv(const std::vector<float>& values, Scalar s, int tokens, int width) {
  if (s == Scalar::kF32 || info(s).bytes == 2) return stored(values, s);
  return encode_rows(values, fit_width(s, tokens, width), s);
}

std::vector<float> kv_from_storage(const std::uint8_t* data, Scalar s, std::size_t outer, int tokens, int width) {
  if (s == Scalar::kF32 || info(s).bytes == 2) return floats_from_storage(data, outer * tokens * width, s);
  const int row = fit_width(s, tokens, width);
  const std::size_t rows = outer * tokens * width / row;
  return decode_rows({data, stored_bytes(s, rows, row)}, rows, row, s);
}

// A decode step's K or V rows, [B][Hkv][n][width]; q8_head rows scaled by their kv head's static
// scale (`head_scales` [B][Hkv]) and carried as codes alone.
std::vector<std::uint8_t> stored_step_rows(std::span<const float> x, Scalar s, int n, int width,
                                           const std::vector<float>& head_scales) {
  if (s != Scalar::kQ8Head) return stored_kv({x.begin(), x.end()}, s, n, width);
  std::vector<std::uint8_t> codes(x.size());
  const std::size_t per_head = std::size_t(n) * width;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const float d = head_scales.at(i / per_head);
    const float code = d == 0 || !std::isfinite(d) ? 0.0f : std::nearbyint(x[i] / d);
    codes[i] = static_cast<std::uint8_t>(static_cast<std::int8_t>(std::clamp(code, -127.0f, 127.0f)));
  }
  return codes;
}

std::vector<float> step_rows_from_storage(const void* data, Scalar s, std::size_t outer, int n, int width,
                                          const std::vector<float>& head_scales) {
  const auto* bytes = static_cast<const std::uint8_t*>(data);
  if (s != Scalar::kQ8Head) return kv_from_storage(bytes, s, outer, n, width);
  std::vector<float> x(outer * n * width);
  const std::size_t per_head = std::size_t(n) * width;
  for (std::size_t i = 0; i < x.size(); ++i)
    x[i] = head_scales.at(i / per_head) * float(static_cast<std::int8_t>(bytes[i]));
  return x;
}

StoredStep stored_step(const DecodeConfig& c, const Precision& precision, int n, std::span<const float> q,
                       std::span<const float> k, std::span<const float> v) {
  return {stored_kv({q.begin(), q.end()}, precision.q, n, c.head_dim),
          stored_step_rows(k, precision.k, n, c.head_dim, c.k_scales),
          stored_step_rows(v, precision.v, n, c.value_dim, c.v_scales)};
}

// Sequence b of a configuration alone (B = 1, its q8_head scales): how a paged call's sequences,
// packed one after another, are encoded and decoded.
DecodeConfig sequence_config(const DecodeConfig& c, std::size_t b) {
  DecodeConfig one = c;
  one.batch = 1;
  auto slice = [&](const std::vector<float>& scales) {
    return scales.empty() ? scales
                          : std::vector<float>(scales.begin() + b * c.kv_heads, scales.begin() + (b + 1) * c.kv_heads);
  };
  one.k_scales = slice(c.k_scales), one.v_scales = slice(c.v_scales);
  return one;
}

StoredStep stored_paged(const DecodeConfig& c, const Precision& precision, std::span<const std::int32_t> counts,
                        std::span<const float> q, std::span<const float> k, std::span<const float> v) {
  StoredStep out;
  std::size_t token0 = 0;
  auto append = [](std::vector<std::uint8_t>& to, const std::vector<std::uint8_t>& from) {
    to.insert(to.end(), from.begin(), from.end());
  };
  for (std::size_t b = 0; b < counts.size(); ++b) {
    const int n = counts[b];
    if (n == 0) continue;
    const StoredStep part =
        stored_step(sequence_config(c, b), precision, n,
                    q.subspan(token0 * c.heads * c.head_dim, std::size_t(n) * c.heads * c.head_dim),
                    k.subspan(token0 * c.kv_heads * c.head_dim, std::size_t(n) * c.kv_heads * c.head_dim),
                    v.subspan(token0 * c.kv_heads * c.value_dim, std::size_t(n) * c.kv_heads * c.value_dim));
    append(out.q, part.q), append(out.k, part.k), append(out.v, part.v);
    token0 += n;
  }
  return out;
}

}  // namespace attest
