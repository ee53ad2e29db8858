// Problem transformations the properties build on (probes, slices, poisons, permutations).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "attest/kernels/kernel.h"
#include "attest/model/problem.h"

namespace attest {

// Same problem with V replaced: value_dim = dv, v[b][g][j][c] = value(j, c).
template <typename Value>
Problem with_values(const Problem& p, int dv, Value value) {
  Problem out = p;
  out.shape.value_dim = dv;
  out.v.resize(std::size_t(p.shape.batch) * p.shape.kv_heads * p.shape.k_len * dv);
  std::size_t e = 0;
  for (int bg = 0; bg < p.shape.batch * p.shape.kv_heads; ++bg)
    for (int j = 0; j < p.shape.k_len; ++j)
      for (int c = 0; c < dv; ++c) out.v[e++] = value(j, c);
  out.fit_to_storage();  // a quantized V holds no exact 1 (q8: f16(1/127) * 127): its nearest, refitted
  return out;
}

// The V = I probe (docs/design.md#property-catalogue: the output row is the weight row) in blocks of the problem's
// own value width, one call per block: the probe keeps the Dv that may select a kernel's path.
int identity_probe_width(const Problem& p, const Capabilities& caps);
// Block `first` of the probe: v[j][c] = 1 where j == first + c (keys [first, first + width)).
Problem identity_probe(const Problem& p, int width, int first);

// The bias rebuilt for another shape: entry (b, h, i, j) of the new one is old(b', h', i', j') as
// `source` maps it (nothing when the problem has no bias). The broadcast flags are kept.
template <typename Source>
std::vector<float> rebuilt_bias(const Problem& old, const Shape& shape, Source source) {
  const ScoreModifiers& m = old.modifiers;
  if (m.bias.empty()) return {};
  std::vector<float> out;
  for (int b = 0; b < (m.bias_per_batch ? shape.batch : 1); ++b)
    for (int h = 0; h < (m.bias_per_head ? shape.heads : 1); ++h)
      for (int i = 0; i < shape.q_len; ++i)
        for (int j = 0; j < shape.k_len; ++j) out.push_back(source(b, h, i, j));
  return out;
}

// p with a bias: its own, or zeros broadcast as the flags say.
Problem with_bias(const Problem& p, bool per_batch, bool per_head);

// p with ALiBi slopes: its own, or one per query head drawn from `seed` (distinct magnitudes
// 2^(-8(h+1)/H), the ALiBi paper's, times 1 or 4, either sign).
Problem with_alibi_slopes(const Problem& p, std::uint64_t seed);

// The first n keys of every batch and kv head (n <= Tk), with the per-key mask terms cut alike and
// K and V refitted to their storage.
Problem first_keys(const Problem& p, int n);

// Only the keys of part `which` visible (part[j] names key j's part): an explicit mask term, ANDed
// with the rest.
Problem only_keys_of_part(const Problem& p, const std::vector<int>& part, int which);

// The single-query problem of row i: same keys and masks, q_offset fixed to the row's position.
Problem single_query(const Problem& p, int i);

// The single-query problem of row i as the kernel's declaration can take it: as above, or for a
// causal problem whose contract wants bottom-right alignment, with the keys past the query's
// position dropped (causality masks them anyway). nullopt when neither fits.
std::optional<Problem> single_query_within(const Problem& p, int i, const Capabilities& caps);

// Queries permuted by qs and keys (with values) by ks in every batch entry and head: row r of the
// result is row qs[r] (key ks[r]) of p; segments, the explicit mask and the bias follow.
Problem permuted_problem(const Problem& p, const std::vector<int>& qs, const std::vector<int>& ks);

// More rows made empty: the last query of every batch entry (query padding) or, for a kernel
// without it, every key of the last batch entry (key padding).
Problem with_more_empty_rows(const Problem& p, const Capabilities& caps);

// The GQA problem as multi-head attention: every query head with its own copy of its K/V head.
Problem repeated_heads(const Problem& p);

// One (batch, head) as a problem of its own: B = H = Hkv = 1.
Problem single_slice(const Problem& p, int b, int h);

// Largest |<q, k>| over the (query, key) pairs a head reads, in double (float products are exact
// there); with RoPE the rotated products' bound, since rotation can raise a dot product up to it.
double max_abs_dot(const Problem& p);
// Largest sum_k |q_k k_k| over those pairs (with RoPE the pairwise bound); NaN if any is NaN.
// `counted` ([b][j]), when given: only the pairs of those keys.
using KeySet = std::vector<std::vector<char>>;
double max_abs_product_sum(const Problem& p, const KeySet* counted = nullptr);
// p with its largest logit magnitude brought to |target| (sign included), given dot = max_abs_dot(p)
// > 0: through the scale (up to 1e30; not at all when the contract takes the default scale only),
// then through Q, rounded to Q's storage format and saturating at its largest value.
Problem with_logits_up_to(const Problem& p, double target, double dot, const Capabilities& caps);
// with_logits_up_to at the target, or at the largest target / 4^n whose problem a float kernel can
// hold (within_float_range); nullopt when none can. `reached` gets the target used.
std::optional<Problem> with_logits_in_float_range(const Problem& p, double target, double dot, const Capabilities& caps,
                                                  double* reached = nullptr);

// The explicit mask that equals the problem's whole mask conjunction (from the reference's view).
std::vector<std::uint8_t> visibility_of(const Problem& p);

// The causal prefill a decode session of p reproduces: Tq = Tk, p's keys, integer mask terms,
// score modifiers but the bias, RoPE; query row t is p's row t % Tq.
Problem decode_prefill_of(const Problem& p);

// The causal prefill (Tq = Tk) grown to `length` >= Tk tokens: the first Tk rows of Q, K and V are
// its own, the rest drawn from `seed` uniformly at the magnitude (root mean square) of each buffer,
// never past its largest value, then fitted to its storage.
Problem lengthened_prefill(const Problem& prefill, int length, std::uint64_t seed);

// Decodes `prefill` (a causal Tq = Tk problem) in a session, in the given chunks; its outputs
// as one prefill would have them. LSE is asked for only when `with_lse`. `after_step` sees the
// session after the step of tokens [t0, t0 + n).
using AfterStep = std::function<void(const DecodeSession&, int t0, int n)>;
Outputs run_decode(const Kernel& kernel, const Problem& prefill, const std::vector<int>& chunks, bool with_lse,
                   const AfterStep& after_step = {});

// Masked-key poisoning (docs/design.md#property-catalogue): the chosen keys of each batch, keys[b][j].
enum class Poisoned { kKeys, kValues };
// Keys that no query row of their batch may see (`visible`: the mask, [B][Tq][Tk]).
KeySet unseen_keys(const Problem& p, const std::vector<std::uint8_t>& visible);
// Keys that query row i of each batch may not see.
KeySet keys_masked_for_row(const Problem& p, const std::vector<std::uint8_t>& visible, int i);
// Poisons the K (or the V) rows of the chosen keys with NaN, +-inf and +-1e30 in turn (+-1e30 only
// for a kernel promised finite inputs), in every storage format; returns how many keys. K and V are
// poisoned apart: a kernel may zero a row for a NaN key and leak a NaN value.
int poison(Problem& p, const KeySet& keys, Poisoned which, const Capabilities& caps);

// 0 .. n-1 in an order drawn from `seed`.
std::vector<int> shuffled(int n, std::uint64_t seed);

// Rows [outer][n][width] of `from`, reordered: row r of each block comes from row order[r].
template <typename T>
std::vector<T> permute_rows(const std::vector<T>& from, int outer, const std::vector<int>& order, int width) {
  std::vector<T> out(from.size());
  const std::size_t n = order.size();
  for (int o = 0; o < outer; ++o)
    for (std::size_t r = 0; r < n; ++r)
      std::copy_n(from.begin() + ((o * n + order[r]) * width), width, out.begin() + ((o * n + r) * width));
  return out;
}

// A deterministic generator seeded by the problem, so a property's choices replay.
std::uint64_t seed_of(const Problem& p, std::uint64_t salt);

}  // namespace attest
