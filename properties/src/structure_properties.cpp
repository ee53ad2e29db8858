// Symmetries of exact attention: permutation, GQA as repeated heads, independent slices, RoPE shifts.
#include <fmt/format.h>

#include <algorithm>
#include <numeric>
#include <random>

#include "attest/model/problem_fields.h"
#include "attest/properties/compare.h"
#include "attest/properties/harness.h"
#include "attest/properties/properties.h"
#include "problem_edits.h"

namespace attest {
namespace {

// Room to move every position of p by prepending keys: how far Tk and q_offset may both grow,
// inside the contract and the range of a problem (shifts past 4096 are never drawn).
long long shift_room(const Problem& p, const Contract& contract) {
  long long room = 4096;
  if (!contract.k_len.unlimited()) room = std::min(room, contract.k_len.max - p.shape.k_len);
  const long long offset = p.effective_q_offset();
  const long long offset_max = contract.q_offset.unlimited() ? kMaxOffset : std::min(contract.q_offset.max, kMaxOffset);
  room = std::min(room, offset_max - offset);
  return room;
}

}  // namespace

Verdict permutation_equivariance(const Problem& p, const Kernel& kernel, Oracle& oracle) {
  const std::string name = "permutation_equivariance";
  for (Feature f : features_used_by(p).members())
    if (info(f).positional)
      return Verdict::vacuous(name, std::string("the problem uses ") + info(f).name + ", which depends on positions");
  const Shape& s = p.shape;
  const std::vector<int> qs = shuffled(s.q_len, seed_of(p, 1)), ks = shuffled(s.k_len, seed_of(p, 2));
  const Problem permuted = permuted_problem(p, qs, ks);
  const Reference& ref = oracle.reference(p);
  const GuardedOutputs original = run_guarded(kernel, p);
  GuardedOutputs got = run_guarded(kernel, permuted);
  // Map the permuted outputs back to the original row order.
  Outputs back;
  back.o.resize(got.o.size());
  back.lse.resize(got.lse.size());
  for (int bh = 0; bh < s.batch * s.heads; ++bh)
    for (int r = 0; r < s.q_len; ++r) {
      const std::size_t from = std::size_t(bh) * s.q_len + r, to = std::size_t(bh) * s.q_len + qs[r];
      std::copy_n(&got.o[from * s.value_dim], s.value_dim, &back.o[to * s.value_dim]);
      if (!got.lse.empty()) back.lse[to] = got.lse[from];
    }
  return compare_runs(p, ref, original, back, kernel.capabilities(), name, "permuted rows mapped back:");
}

Verdict gqa_matches_repeated_heads(const Problem& given, const Kernel& kernel, Oracle& oracle) {
  const std::string name = "gqa_matches_repeated_heads";
  const Shape& s = given.shape;
  if (s.kv_heads == s.heads) return Verdict::vacuous(name, "H == Hkv: no head is shared");
  // ALiBi slopes belong to query heads: for a kernel that declares them, every other problem
  // without slopes gets distinct ones (a slope looked up by kv head differs only here).
  const bool add_slopes = kernel.capabilities().declares(Feature::kAlibi) && seed_of(given, 6) % 2;
  Problem p = add_slopes ? with_alibi_slopes(given, seed_of(given, 6)) : given;
  kernel.capabilities().contract.fit_alibi_slopes(p);  // the standard set is distinct per head too
  kernel.capabilities().contract.fit_alibi_or_bias(p, !add_slopes);
  const Problem mha = repeated_heads(p);
  const Reference& ref = oracle.reference(p);
  return compare_runs(p, ref, run_guarded(kernel, mha), run_guarded(kernel, p), kernel.capabilities(), name,
                      fmt::format("GQA {}:{} vs repeated heads{}:", s.heads, s.kv_heads,
                                  p.modifiers.alibi_slopes.empty() ? "" : " (ALiBi slopes per query head)"));
}

Verdict slices_are_independent(const Problem& p, const Kernel& kernel, Oracle& oracle) {
  const std::string name = "slices_are_independent";
  const Shape& s = p.shape;
  if (s.batch * s.heads == 1) return Verdict::vacuous(name, "one (batch, head): nothing to slice");
  const Reference& ref = oracle.reference(p);
  const GuardedOutputs whole = run_guarded(kernel, p);
  std::mt19937_64 rng(seed_of(p, 3));
  const std::pair<int, int> picks[] = {
      {0, 0}, {s.batch - 1, s.heads - 1}, {int(rng() % s.batch), int(rng() % s.heads)}};
  double worst = 0;
  for (auto [b, h] : picks) {
    const GuardedOutputs alone = run_guarded(kernel, single_slice(p, b, h));
    // Compare the slice's rows only: build outputs equal to `whole` except the slice.
    Outputs spliced = whole;
    const std::size_t row0 = (std::size_t(b) * s.heads + h) * s.q_len;
    std::copy(alone.o.begin(), alone.o.end(), spliced.o.begin() + row0 * s.value_dim);
    if (!alone.lse.empty()) std::copy(alone.lse.begin(), alone.lse.end(), spliced.lse.begin() + row0);
    const Verdict v = compare_runs(p, ref, whole, spliced, kernel.capabilities(), name,
                                   fmt::format("slice (b={}, h={}) alone vs batched:", b, h));
    if (!v.passed) return v;
    worst = std::max(worst, v.utilisation);
  }
  return Verdict::pass(name, worst);
}

Verdict rope_relative_position(const Problem& p, const Kernel& kernel, Oracle& oracle) {
  const std::string name = "rope_relative_position";
  if (!p.rope.enabled) return Verdict::vacuous(name, "the problem has no RoPE");
  const Shape& s = p.shape;
  // Prepend `shift` keys that an explicit mask hides: every real key and query moves by shift.
  // A term fixed in absolute position (chunk) stays the same only under whole multiples of its
  // parameter: the shift is rounded up to a multiple of all of them.
  long long period = 1;
  for (const FeatureInfo* term : integer_mask_terms())
    if (term->absolute && (p.mask.*term->parameter))
      period = std::lcm(period, static_cast<long long>(*(p.mask.*term->parameter)));
  if (period > 4096)
    return Verdict::vacuous(name, fmt::format("a shift by whole multiples of {} keys is too long", period));
  // The shifted problem is attest's own: it stays inside the declared contract (Tk, q_offset) and
  // the range a problem may take, or the check does not run (never a failure of the kernel).
  const long long longest = shift_room(p, kernel.capabilities().contract);
  if (longest < period)
    return Verdict::vacuous(name,
                            fmt::format("no shift of positions fits: Tk {} with q_offset {} can grow by {} at most "
                                        "(the declared contract's Tk and q_offset, q_offset within +-{}), "
                                        "the shift needs {}",
                                        s.k_len, p.effective_q_offset(), std::max(0LL, longest), kMaxOffset, period));
  long long drawn = 1 + static_cast<long long>(seed_of(p, 4) % 200);
  drawn = std::min((drawn + period - 1) / period * period, longest / period * period);
  const int shift = static_cast<int>(drawn);
  Problem moved = p;
  moved.shape.k_len = s.k_len + shift;
  moved.q_offset = p.effective_q_offset() + shift;
  auto prepend = [&](const std::vector<float>& from, int width, Scalar storage) {
    // q8_head: zeros, which cannot move the static scale the problem's own rows share.
    const float fill = storage == Scalar::kQ8Head ? 0.0f : 0.5f;
    std::vector<float> out;
    for (int bg = 0; bg < s.batch * s.kv_heads; ++bg) {
      out.insert(out.end(), std::size_t(shift) * width, fill);
      out.insert(out.end(), from.begin() + std::size_t(bg) * s.k_len * width,
                 from.begin() + std::size_t(bg + 1) * s.k_len * width);
    }
    return out;
  };
  moved.k = prepend(p.k, s.head_dim, p.storage.k);
  moved.v = prepend(p.v, s.value_dim, p.storage.v);
  moved.fit_to_storage();  // the prepended rows, in a scaled format
  MaskSpec& m = moved.mask;
  for (int& n : m.kv_valid) n += shift;
  if (!m.k_segment.empty()) {
    std::vector<int> seg;
    for (int b = 0; b < s.batch; ++b) {
      seg.insert(seg.end(), shift, -1);
      seg.insert(seg.end(), p.mask.k_segment.begin() + std::size_t(b) * s.k_len,
                 p.mask.k_segment.begin() + std::size_t(b + 1) * s.k_len);
    }
    m.k_segment = seg;
  }
  std::vector<std::uint8_t> mask;
  for (int b = 0; b < s.batch; ++b)
    for (int i = 0; i < s.q_len; ++i) {
      mask.insert(mask.end(), shift, 0);
      for (int j = 0; j < s.k_len; ++j)
        mask.push_back(
            p.mask.explicit_mask.empty() ? 1 : p.mask.explicit_mask[(std::size_t(b) * s.q_len + i) * s.k_len + j]);
    }
  m.explicit_mask = mask;
  moved.modifiers.bias = rebuilt_bias(p, moved.shape, [&](int b, int h, int i, int j) {
    return j < shift ? 0.0f : p.modifiers.bias[p.modifiers.bias_index(s, b, h, i, j - shift)];
  });
  const Reference& ref = oracle.reference(p);
  // The shifted run has more key tiles: the bound counts them (all of its own when a declared path
  // of another key tile serves it).
  const Capabilities& caps = kernel.capabilities();
  const int tile = caps.key_tile_for(p), moved_tile = caps.key_tile_for(moved);
  const int extra_tiles = moved_tile != tile && moved_tile > 0 ? (moved.shape.k_len + moved_tile - 1) / moved_tile + 1
                          : tile > 0                           ? shift / tile + 1
                                                               : 0;
  return compare_runs(p, ref, run_guarded(kernel, p), run_guarded(kernel, moved), kernel.capabilities(), name,
                      fmt::format("positions shifted by {}:", shift), 2.0, extra_tiles);
}

}  // namespace attest
