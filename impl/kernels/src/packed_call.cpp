// Packing a padded problem into the varlen layout (packed.h), checking a packed call, and laying
// its outputs back out padded for the comparison with the reference.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "attest/kernels/packed.h"

namespace attest {

std::size_t PackedCall::o_size() const {
  return static_cast<std::size_t>(total_q()) * terms.shape.heads * terms.shape.value_dim;
}
std::size_t PackedCall::lse_size() const { return static_cast<std::size_t>(total_q()) * terms.shape.heads; }

std::string packed_form_refused(const Problem& p) {
  if (!p.mask.q_segment.empty()) return "segments are indexed by padded positions";
  if (!p.mask.explicit_mask.empty()) return "an explicit mask is indexed by padded positions";
  if (!p.modifiers.bias.empty()) return "a bias is indexed by padded positions";
  return {};
}

PackedCall packed_call_of(const Problem& p) {
  if (const std::string why = packed_form_refused(p); !why.empty()) throw ProblemError("no packed form: " + why);
  p.validate();
  const Shape& s = p.shape;
  PackedCall c;
  c.cu_seqlens_q.assign(1, 0), c.cu_seqlens_k.assign(1, 0);
  for (int b = 0; b < s.batch; ++b) {
    const int nq = p.mask.q_valid.empty() ? s.q_len : p.mask.q_valid[b];
    const int nk = p.mask.kv_valid.empty() ? s.k_len : p.mask.kv_valid[b];
    c.cu_seqlens_q.push_back(c.cu_seqlens_q.back() + nq), c.cu_seqlens_k.push_back(c.cu_seqlens_k.back() + nk);
    c.max_seqlen_q = std::max(c.max_seqlen_q, nq), c.max_seqlen_k = std::max(c.max_seqlen_k, nk);
  }
  const std::size_t dk = s.head_dim, dv = s.value_dim;
  c.q.reserve(c.total_q() * s.heads * dk);
  c.k.reserve(c.total_k() * s.kv_heads * dk);
  c.v.reserve(c.total_k() * s.kv_heads * dv);
  for (int b = 0; b < s.batch; ++b) {  // token-major: [token][head][width]
    for (int i = 0; i < c.cu_seqlens_q[b + 1] - c.cu_seqlens_q[b]; ++i)
      for (int h = 0; h < s.heads; ++h) {
        const auto row = p.q.begin() + static_cast<std::ptrdiff_t>(((std::size_t(b) * s.heads + h) * s.q_len + i) * dk);
        c.q.insert(c.q.end(), row, row + static_cast<std::ptrdiff_t>(dk));
      }
    for (int j = 0; j < c.cu_seqlens_k[b + 1] - c.cu_seqlens_k[b]; ++j)
      for (int g = 0; g < s.kv_heads; ++g) {
        const std::size_t at = (std::size_t(b) * s.kv_heads + g) * s.k_len + j;
        c.k.insert(c.k.end(), p.k.begin() + static_cast<std::ptrdiff_t>(at * dk),
                   p.k.begin() + static_cast<std::ptrdiff_t>((at + 1) * dk));
        c.v.insert(c.v.end(), p.v.begin() + static_cast<std::ptrdiff_t>(at * dv),
                   p.v.begin() + static_cast<std::ptrdiff_t>((at + 1) * dv));
      }
  }
  c.terms = p;
  c.terms.storage = {};  // a packed call's buffers are float32
  c.terms.q_offset = p.effective_q_offset();
  c.terms.shape.q_len = std::max(1, c.max_seqlen_q), c.terms.shape.k_len = std::max(1, c.max_seqlen_k);
  c.terms.mask.kv_valid.clear(), c.terms.mask.q_valid.clear();
  c.terms.q.clear(), c.terms.k.clear(), c.terms.v.clear();
  return c;
}

void check_packed_call(const PackedCall& c, std::span<const float> o, std::span<const float> lse) {
  auto fail = [](const std::string& why) { throw ProblemError("invalid packed call: " + why); };
  const Shape& s = c.terms.shape;
  if (c.cu_seqlens_q.size() < 2 || c.cu_seqlens_q.size() != c.cu_seqlens_k.size() ||
      static_cast<int>(c.cu_seqlens_q.size()) != s.batch + 1)
    fail("cu_seqlens_q and cu_seqlens_k must both hold batch + 1 offsets");
  if (s.heads < 1 || s.kv_heads < 1 || s.heads % s.kv_heads != 0 || s.head_dim < 1 || s.value_dim < 1)
    fail("heads, kv_heads and the widths must be >= 1, heads a multiple of kv_heads");
  int longest_q = 0, longest_k = 0;
  for (std::size_t b = 0; b + 1 < c.cu_seqlens_q.size(); ++b) {
    const long long nq = static_cast<long long>(c.cu_seqlens_q[b + 1]) - c.cu_seqlens_q[b];
    const long long nk = static_cast<long long>(c.cu_seqlens_k[b + 1]) - c.cu_seqlens_k[b];
    if (nq < 0 || nk < 0) fail("cu_seqlens must not decrease (sequence " + std::to_string(b) + ")");
    longest_q = std::max<int>(longest_q, static_cast<int>(nq)),
    longest_k = std::max<int>(longest_k, static_cast<int>(nk));
  }
  if (c.cu_seqlens_q[0] != 0 || c.cu_seqlens_k[0] != 0) fail("cu_seqlens must start at 0");
  if (c.max_seqlen_q != longest_q || c.max_seqlen_k != longest_k) fail("max_seqlen_q/k must be the longest sequence");
  if (!c.terms.q_offset) fail("terms.q_offset must be explicit");
  if (!packed_form_refused(c.terms).empty() || !c.terms.mask.kv_valid.empty() || !c.terms.mask.q_valid.empty() ||
      !(c.terms.storage == Problem::Storage{}))
    fail("terms must carry no padding, segments, explicit mask or bias, and float32 storage");
  const std::size_t tq = c.total_q(), tk = c.total_k();
  if (c.q.size() != tq * s.heads * s.head_dim || c.k.size() != tk * s.kv_heads * s.head_dim ||
      c.v.size() != tk * s.kv_heads * s.value_dim || o.size() != c.o_size() ||
      (!lse.empty() && lse.size() != c.lse_size()))
    fail("q/k/v/o/lse sizes do not match cu_seqlens and the widths");
}

void unpack_outputs(const Problem& p, const PackedCall& c, std::span<const float> packed_o,
                    std::span<const float> packed_lse, bool nan_rows, std::vector<float>& o, std::vector<float>& lse) {
  const Shape& s = p.shape;
  const std::size_t dv = s.value_dim;
  const bool sinks = !p.modifiers.sinks.empty();  // a padded row then has O = 0, LSE = sigma
  const float empty_o = nan_rows && !sinks ? std::numeric_limits<float>::quiet_NaN() : 0.0f;
  o.assign(p.o_size(), empty_o);
  lse.clear();
  // NOLINTNEXTLINE(bugprone-narrowing-conversions): clang-tidy 14 calls the float infinity a narrowed constant
  const float empty_lse = nan_rows ? std::numeric_limits<float>::quiet_NaN() : -std::numeric_limits<float>::infinity();
  if (!packed_lse.empty()) lse.assign(p.lse_size(), empty_lse);
  for (int b = 0; b < s.batch; ++b)
    for (int h = 0; h < s.heads; ++h)
      for (int i = 0; i < s.q_len; ++i) {
        const std::size_t row = (std::size_t(b) * s.heads + h) * s.q_len + i;
        if (i >= c.cu_seqlens_q[b + 1] - c.cu_seqlens_q[b]) {
          if (sinks && !lse.empty()) lse[row] = p.modifiers.sinks[h];
          continue;
        }
        const std::size_t token = static_cast<std::size_t>(c.cu_seqlens_q[b]) + i;
        std::copy_n(packed_o.begin() + static_cast<std::ptrdiff_t>((token * s.heads + h) * dv), dv,
                    o.begin() + static_cast<std::ptrdiff_t>(row * dv));
        if (!lse.empty()) lse[row] = packed_lse[std::size_t(h) * c.total_q() + token];
      }
}

}  // namespace attest
