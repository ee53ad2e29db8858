// A forward over a packed varlen batch (packed.h) that reads the packed buffers in place: per
// sequence its key range from cu_seqlens_k, per query row a stable softmax over the visible keys.
// With `faults`, one of the packed-layout mutants.
#include <algorithm>
#include <cmath>
#include <span>
#include <vector>

#include "attest/kernels/builtin_kernels.h"
#include "attest/kernels/faults.h"
#include "attest/kernels/packed.h"
#include "kernel_support.h"

namespace attest {

using namespace kernels;

void packed_forward(const PackedCall& c, std::span<float> o, std::span<float> lse, const KernelFaults& f) {
  const Problem& t = c.terms;
  const Shape& s = t.shape;
  const int heads = s.heads, dk = s.head_dim, dv = s.value_dim, kv_heads = s.kv_heads;
  const long long offset = t.effective_q_offset();
  const float scale = static_cast<float>(t.effective_scale());
  const ModifierView modifiers(t);
  const int total_q = c.total_q(), total_k = c.total_k();
  const int sequences = c.sequences() - (f.packed_drops_last_sequence ? 1 : 0);
  std::vector<float> query(dk), key(dk), scores, weights;
  for (int b = 0; b < sequences; ++b) {
    int k0 = c.cu_seqlens_k[b];
    int nk = c.cu_seqlens_k[b + 1] - k0;
    if (f.packed_next_offset) k0 = c.cu_seqlens_k[b + 1];  // the offsets array read one entry late
    if (f.packed_max_seqlen_as_length) nk = c.max_seqlen_k;
    nk = std::min(nk, total_k - k0);  // a mutant reads the next sequence's keys, never past the buffer
    scores.assign(std::max(nk, 0), kNegInf), weights.assign(std::max(nk, 0), 0.0f);
    for (int i = 0; i < c.cu_seqlens_q[b + 1] - c.cu_seqlens_q[b]; ++i) {
      const int token = c.cu_seqlens_q[b] + i;
      const long long pos = offset + i;
      long long lo = 0, hi = nk;
      if (t.mask.causal) hi = std::min(hi, pos + 1);
      narrow_to_integer_terms(t.mask, pos, lo, hi);
      for (int h = 0; h < heads; ++h) {
        const int g = h / (heads / kv_heads);
        std::copy_n(&c.q[(std::size_t(token) * heads + h) * dk], dk, query.begin());
        if (t.rope.enabled) rope_rotate(query.data(), dk, pos, t.rope.base);
        float max_score = modifiers.has_sinks() ? modifiers.sink(h) : kNegInf;
        for (long long j = lo; j < hi; ++j) {
          std::copy_n(&c.k[((std::size_t(k0) + j) * kv_heads + g) * dk], dk, key.begin());
          if (t.rope.enabled) rope_rotate(key.data(), dk, j, t.rope.base);
          float x = dot(query.data(), key.data(), dk) * scale;
          if (modifiers.changes_logits()) x = modifiers.logit(x, b, h, i, static_cast<int>(j), pos);
          scores[j] = x;
          max_score = std::max(max_score, x);
        }
        float* out = &o[(std::size_t(token) * heads + h) * dv];
        float* out_lse = lse.empty() ? nullptr : &lse[std::size_t(h) * total_q + token];
        if (max_score == kNegInf) {
          write_empty_row(out, dv, out_lse);
          continue;
        }
        float sum = modifiers.has_sinks() ? std::exp(modifiers.sink(h) - max_score) : 0.0f;
        for (long long j = lo; j < hi; ++j)
          sum += weights[j] = scores[j] == kNegInf ? 0.0f : std::exp(scores[j] - max_score);
        std::fill(out, out + dv, 0.0f);
        for (long long j = lo; j < hi; ++j) {
          if (weights[j] == 0.0f) continue;
          const float pj = weights[j] / sum;
          const float* value = &c.v[((std::size_t(k0) + j) * kv_heads + g) * dv];
          for (int d = 0; d < dv; ++d) out[d] += pj * value[d];
        }
        if (out_lse) *out_lse = max_score + std::log(sum);
      }
    }
  }
}

}  // namespace attest
