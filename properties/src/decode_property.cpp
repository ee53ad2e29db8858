// decode_matches_prefill: token-by-token and random-chunk decode against one-shot prefill.
#include <fmt/format.h>

#include <random>

#include "attest/properties/compare.h"
#include "attest/properties/harness.h"
#include "attest/properties/properties.h"
#include "attest/properties/session_forward.h"
#include "problem_edits.h"

namespace attest {
// The causal prefill a decode session reproduces: Tq = Tk, the problem's keys, window and RoPE.
Problem decode_prefill_of(const Problem& p) {
  const Shape& s = p.shape;
  Problem out;
  out.shape = s;
  out.shape.q_len = s.k_len;
  out.scale = p.scale;
  out.rope = p.rope;
  out.mask = integer_mask_terms_of(p.mask);
  out.mask.causal = true;
  out.modifiers = p.modifiers;
  out.modifiers.bias.clear();  // a prefill feature: decode sessions take slopes, softcap and sinks
  out.storage = p.storage;
  out.k = p.k;
  out.v = p.v;
  for (int bh = 0; bh < s.batch * s.heads; ++bh)
    for (int t = 0; t < s.k_len; ++t) {
      const auto row = p.q.begin() + (std::size_t(bh) * s.q_len + t % s.q_len) * s.head_dim;
      out.q.insert(out.q.end(), row, row + s.head_dim);
    }
  return out;
}

namespace {

// Rows [t0, t0 + n) of every [outer][T][width] block.
std::vector<float> rows_of(const std::vector<float>& from, int outer, int total, int t0, int n, int width) {
  std::vector<float> out;
  for (int o = 0; o < outer; ++o) {
    const auto start = from.begin() + (std::size_t(o) * total + t0) * width;
    out.insert(out.end(), start, start + std::size_t(n) * width);
  }
  return out;
}

}  // namespace

// Decodes the prefill in the given chunks; LSE is asked for only when `with_lse`.
Outputs run_decode(const Kernel& kernel, const Problem& prefill, const std::vector<int>& chunks, bool with_lse,
                   const AfterStep& after_step) {
  const Shape& s = prefill.shape;
  auto session = open_guarded_session(kernel, session_config_of(prefill));
  const int T = s.k_len;
  Outputs out;
  out.o.assign(prefill.o_size(), NAN);
  if (with_lse) out.lse.assign(prefill.lse_size(), NAN);
  int t0 = 0;
  for (int n : chunks) {
    std::vector<float> o(std::size_t(s.batch) * s.heads * n * s.value_dim),
        lse(with_lse ? std::size_t(s.batch) * s.heads * n : 0);
    session->step(n, rows_of(prefill.q, s.batch * s.heads, T, t0, n, s.head_dim),
                  rows_of(prefill.k, s.batch * s.kv_heads, T, t0, n, s.head_dim),
                  rows_of(prefill.v, s.batch * s.kv_heads, T, t0, n, s.value_dim), o, lse);
    if (after_step) after_step(*session, t0, n);
    for (int bh = 0; bh < s.batch * s.heads; ++bh)
      for (int t = 0; t < n; ++t) {
        const std::size_t from = std::size_t(bh) * n + t, to = std::size_t(bh) * T + t0 + t;
        std::copy_n(&o[from * s.value_dim], s.value_dim, &out.o[to * s.value_dim]);
        if (with_lse) out.lse[to] = lse[from];
      }
    t0 += n;
  }
  return out;
}

Verdict decode_matches_prefill(const Problem& drawn, const Kernel& kernel, Oracle& oracle) {
  // An evicting cache is exact causal attention up to its first eviction: its first keys only.
  const CachePolicy& cache = kernel.capabilities().cache;
  const long long keep = cache.exact_up_to();
  const Problem p =
      cache.evicts() && keep > 0 && drawn.shape.k_len > keep ? first_keys(drawn, static_cast<int>(keep)) : drawn;
  std::vector<int> by_token(p.shape.k_len, 1), chunked;
  std::mt19937_64 rng(seed_of(p, 5));
  for (int left = p.shape.k_len; left > 0;) {
    const int n = std::min(left, 1 + int(rng() % 40));
    chunked.push_back(n);
    left -= n;
  }
  return decode_matches_prefill_in_chunks(p, kernel, oracle, {by_token, chunked});
}

Verdict decode_matches_prefill_in_chunks(const Problem& p, const Kernel& kernel, Oracle& oracle,
                                         const std::vector<std::vector<int>>& chunkings) {
  const std::string name = "decode_matches_prefill";
  const Capabilities caps = kernel.capabilities();
  if (!caps.decode()) return Verdict::not_applicable(name, "kernel does not declare decode");
  if (!exact_session(caps, p.shape.k_len))
    return Verdict::not_applicable(name, fmt::format("Tk {} is past what the declared cache ({}) keeps; "
                                                     "eviction_matches_retained_set checks it",
                                                     p.shape.k_len, caps.cache.summary()));
  const Problem prefill = decode_prefill_of(p);
  const Reference& ref = oracle.reference(prefill);
  // A decode-only kernel has no one-shot prefill: its decodes are held to the exact result alone.
  const std::optional<GuardedOutputs> one_shot =
      caps.forward() ? std::optional<GuardedOutputs>(run_guarded(kernel, prefill)) : std::nullopt;
  double worst = 0;
  for (std::size_t k = 0; k < chunkings.size(); ++k) {
    const std::vector<int>& chunks = chunkings[k];
    const std::string label = chunks.size() == std::size_t(p.shape.k_len) ? "token-by-token decode" : "chunked decode";
    // A kernel whose decode step may skip LSE is also run without it (every other chunking).
    const bool with_lse = caps.lse() && !(caps.contract.decode_lse_optional && k % 2 == 0);
    const Outputs decoded = run_decode(kernel, prefill, chunks, with_lse);
    Comparison exact = compare_with_reference(prefill, ref, decoded, caps, name);
    if (!exact.verdict.passed) {
      exact.verdict.detail = fmt::format("{} ({} steps{}) vs exact: {}", label, chunks.size(),
                                         with_lse ? "" : ", no LSE", exact.verdict.detail);
      return exact.verdict;
    }
    worst = std::max(worst, exact.verdict.utilisation);
    if (!one_shot) continue;
    const Verdict v =
        compare_runs(prefill, ref, *one_shot, decoded, caps, name, fmt::format("{} vs one-shot prefill:", label));
    if (!v.passed) return v;
    worst = std::max(worst, v.utilisation);
  }
  return Verdict::pass(name, worst);
}

}  // namespace attest
