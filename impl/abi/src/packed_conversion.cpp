// A packed varlen call (packed.h) as the C ABI carries it (attest_packed_problem, ABI 2.8), both ways.
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "attest/abi/wire_conversion.h"
#include "attest/kernels/packed.h"

namespace attest {

attest_packed_problem packed_problem_view(const PackedCall& c, const std::int32_t* cu_seqlens_q,
                                          const std::int32_t* cu_seqlens_k) {
  const Problem& t = c.terms;
  attest_packed_problem w{};
  w.batch = t.shape.batch, w.heads = t.shape.heads, w.kv_heads = t.shape.kv_heads;
  w.head_dim = t.shape.head_dim, w.value_dim = t.shape.value_dim;
  w.max_seqlen_q = c.max_seqlen_q, w.max_seqlen_k = c.max_seqlen_k;
  w.scale = t.effective_scale();
  w.q_offset = t.effective_q_offset();
  w.causal = t.mask.causal ? 1 : 0;
  w.window = t.mask.window.value_or(0), w.chunk = t.mask.chunk.value_or(0), w.lookahead = t.mask.lookahead.value_or(0);
  w.rope = t.rope.enabled ? 1 : 0, w.rope_base = t.rope.base;
  w.softcap = t.modifiers.softcap.value_or(0.0);
  w.alibi_slopes = t.modifiers.alibi_slopes.empty() ? nullptr : t.modifiers.alibi_slopes.data();
  w.sinks = t.modifiers.sinks.empty() ? nullptr : t.modifiers.sinks.data();
  w.cu_seqlens_q = cu_seqlens_q, w.cu_seqlens_k = cu_seqlens_k;
  w.q = c.q.empty() ? nullptr : c.q.data();
  w.k = c.k.empty() ? nullptr : c.k.data();
  w.v = c.v.empty() ? nullptr : c.v.data();
  return w;
}

PackedCall packed_call_of(const attest_packed_problem& w) {
  auto fail = [](const std::string& why) { throw ProblemError("invalid packed call: " + why); };
  if (w.batch < 1 || w.heads < 1 || w.kv_heads < 1 || w.head_dim < 1 || w.value_dim < 1)
    fail("batch, heads, kv_heads and the widths must be >= 1");
  const bool wide = !w.cu_seqlens_q && !w.cu_seqlens_k;  // 2.10: int64 offsets
  if (wide ? !w.cu_seqlens_q64 || !w.cu_seqlens_k64 : !w.cu_seqlens_q || !w.cu_seqlens_k)
    fail("cu_seqlens_q or cu_seqlens_k is NULL (both in int32, or both NULL and both in int64)");
  if (w.window < 0 || w.chunk < 0 || w.lookahead < 0 || w.softcap < 0 || !std::isfinite(w.scale))
    fail("a negative mask term or softcap, or a non-finite scale");
  PackedCall c;
  if (wide) {
    const auto narrow = [&](const std::int64_t* from, std::vector<std::int32_t>& to) {
      for (const std::int64_t* e = from; e != from + w.batch + 1; ++e) {
        if (*e < 0 || *e > std::numeric_limits<std::int32_t>::max()) fail("an int64 cu_seqlens entry past 2^31 - 1");
        to.push_back(static_cast<std::int32_t>(*e));
      }
    };
    narrow(w.cu_seqlens_q64, c.cu_seqlens_q), narrow(w.cu_seqlens_k64, c.cu_seqlens_k);
  } else {
    c.cu_seqlens_q.assign(w.cu_seqlens_q, w.cu_seqlens_q + w.batch + 1);
    c.cu_seqlens_k.assign(w.cu_seqlens_k, w.cu_seqlens_k + w.batch + 1);
  }
  c.max_seqlen_q = w.max_seqlen_q, c.max_seqlen_k = w.max_seqlen_k;
  Problem& t = c.terms;
  t.shape = {w.batch,    w.heads,    w.kv_heads, std::max(1, w.max_seqlen_q), std::max(1, w.max_seqlen_k),
             w.head_dim, w.value_dim};
  t.scale = w.scale, t.q_offset = w.q_offset;
  t.mask.causal = w.causal != 0;
  if (w.window > 0) t.mask.window = w.window;
  if (w.chunk > 0) t.mask.chunk = w.chunk;
  if (w.lookahead > 0) t.mask.lookahead = w.lookahead;
  t.rope = {w.rope != 0, w.rope_base};
  if (w.softcap > 0) t.modifiers.softcap = w.softcap;
  if (w.alibi_slopes) t.modifiers.alibi_slopes.assign(w.alibi_slopes, w.alibi_slopes + w.heads);
  if (w.sinks) t.modifiers.sinks.assign(w.sinks, w.sinks + w.heads);
  for (int b = 0; b < w.batch; ++b)  // the sizes below trust the offsets: check them first
    if (c.cu_seqlens_q[b + 1] < c.cu_seqlens_q[b] || c.cu_seqlens_k[b + 1] < c.cu_seqlens_k[b] ||
        c.cu_seqlens_q[0] != 0 || c.cu_seqlens_k[0] != 0)
      fail("cu_seqlens must start at 0 and not decrease");
  const std::size_t tq = c.total_q(), tk = c.total_k();
  if ((tq > 0 && !w.q) || (tk > 0 && (!w.k || !w.v))) fail("q, k or v is NULL");
  if (tq > 0) c.q.assign(w.q, w.q + tq * w.heads * w.head_dim);
  if (tk > 0) c.k.assign(w.k, w.k + tk * w.kv_heads * w.head_dim), c.v.assign(w.v, w.v + tk * w.kv_heads * w.value_dim);
  return c;
}

}  // namespace attest
