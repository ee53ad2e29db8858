// The fast reference's 4-key dot products give every field of the one-key path bit for bit.
#include "four_key_dot.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "attest/reference.h"

namespace attest {
namespace {

// Same bits, or NaN in both (a NaN's payload may depend on the order of a sum's operands).
template <typename T>
std::string first_difference(const char* field, const std::vector<T>& a, const std::vector<T>& b) {
  if (a.size() != b.size()) return std::string(field) + ": sizes differ";
  for (std::size_t e = 0; e < a.size(); ++e) {
    if constexpr (std::is_floating_point_v<T>) {
      if (std::isnan(a[e]) && std::isnan(b[e])) continue;
      if (std::bit_cast<std::uint64_t>(a[e]) == std::bit_cast<std::uint64_t>(b[e])) continue;
    } else if (a[e] == b[e]) {
      continue;
    }
    std::ostringstream out;
    out << field << "[" << e << "]: " << std::hexfloat << a[e] << " vs " << b[e];
    return out.str();
  }
  return "";
}

std::string first_difference(const Reference& a, const Reference& b) {
  if (a.working_bits != b.working_bits) return "working_bits";
  for (const std::string& d :
       {first_difference("o", a.o, b.o), first_difference("o_residual", a.o_residual, b.o_residual),
        first_difference("spread", a.spread, b.spread), first_difference("spread_cond", a.spread_cond, b.spread_cond),
        first_difference("spread_logit", a.spread_logit, b.spread_logit),
        first_difference("max_abs_value", a.max_abs_value, b.max_abs_value),
        first_difference("value_min", a.value_min, b.value_min),
        first_difference("value_max", a.value_max, b.value_max), first_difference("lse", a.lse, b.lse),
        first_difference("lse_residual", a.lse_residual, b.lse_residual), first_difference("empty", a.empty, b.empty),
        first_difference("visible_keys", a.visible_keys, b.visible_keys),
        first_difference("cond_max", a.cond_max, b.cond_max), first_difference("mean_cond", a.mean_cond, b.mean_cond),
        first_difference("logit_spread", a.logit_spread, b.logit_spread),
        first_difference("logit_range", a.logit_range, b.logit_range),
        first_difference("weights", a.weights, b.weights), first_difference("visible", a.visible, b.visible),
        first_difference("computed", a.computed, b.computed)})
    if (!d.empty()) return d;
  return "";
}

// What the random problems covered, so that the test cannot pass on a narrow draw.
struct Coverage {
  int rope = 0, odd_dk = 0, ragged_tk = 0, sinks = 0, softcap = 0, masked = 0, tiny = 0, huge = 0;
};

// A small problem with every feature drawn at random: RoPE, sinks, softcap, ALiBi, a bias with
// -inf entries, causal/window/kv_valid/explicit masks, magnitudes 2^-20 .. 2^20 per tensor.
Problem random_problem(std::mt19937_64& rng, Coverage& seen) {
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  auto coin = [&] { return pick(0, 1) == 1; };
  Problem p;
  const int kv_heads = pick(1, 2), group = pick(1, 2);
  p.rope.enabled = coin();
  int dk = pick(1, 11);
  if (p.rope.enabled) dk += dk % 2;  // RoPE pairs need an even Dk
  p.shape = {.batch = pick(1, 2),
             .heads = kv_heads * group,
             .kv_heads = kv_heads,
             .q_len = pick(1, 6),
             .k_len = pick(1, 19),
             .head_dim = dk,
             .value_dim = pick(1, 4)};
  const Shape& s = p.shape;
  if (p.rope.enabled && coin()) p.rope.base = 500.0;
  p.mask.causal = coin();
  if (pick(0, 3) == 0) p.mask.window = pick(1, 8);
  if (pick(0, 3) == 0)
    for (int b = 0; b < s.batch; ++b) p.mask.kv_valid.push_back(pick(0, s.k_len));
  if (pick(0, 4) == 0) p.q_offset = pick(-3, 20);
  p.resize_buffers();
  if (pick(0, 5) == 0) {
    p.mask.explicit_mask.resize(std::size_t(s.batch) * s.q_len * s.k_len);
    for (auto& x : p.mask.explicit_mask) x = pick(0, 3) != 0;
  }
  if (coin()) p.modifiers.softcap = std::ldexp(1.0, pick(-2, 6));
  std::normal_distribution<double> normal(0.0, 1.0);
  if (pick(0, 3) == 0)
    for (int h = 0; h < s.heads; ++h) p.modifiers.alibi_slopes.push_back(static_cast<float>(normal(rng)));
  if (coin())
    for (int h = 0; h < s.heads; ++h) p.modifiers.sinks.push_back(static_cast<float>(4 * normal(rng)));
  if (pick(0, 3) == 0) {
    p.modifiers.bias.resize(std::size_t(s.batch) * s.heads * s.q_len * s.k_len);
    for (float& x : p.modifiers.bias)
      x = pick(0, 7) == 0 ? -std::numeric_limits<float>::infinity() : static_cast<float>(normal(rng));
  }
  int lowest = 20, highest = -20;
  for (auto* tensor : {&p.q, &p.k, &p.v}) {
    const int e = pick(-20, 20);
    lowest = std::min(lowest, e), highest = std::max(highest, e);
    for (float& x : *tensor) x = static_cast<float>(std::ldexp(normal(rng), e));
  }
  seen.rope += p.rope.enabled;
  seen.odd_dk += dk % 2;
  seen.ragged_tk += s.k_len % 4 != 0;
  seen.sinks += !p.modifiers.sinks.empty();
  seen.softcap += p.modifiers.softcap.has_value();
  seen.masked += p.mask.causal || p.mask.window || !p.mask.explicit_mask.empty();
  seen.tiny += lowest <= -15;
  seen.huge += highest >= 15;
  return p;
}

TEST(FourKeyDot, EveryFieldEqualsTheOneKeyPathBitForBit) {
  std::mt19937_64 rng(41);
  Coverage seen;
  const int problems = 2000;
  for (int n = 0; n < problems; ++n) {
    const Problem p = random_problem(rng, seen);
    ReferenceOptions options{.weights = n % 2 == 0};
    if (n % 5 == 0) options.query_rows = {0, p.shape.q_len - 1};
    const Reference four = compute_reference_fast(p, options);
    const Reference one = reference_detail::compute_reference_fast_one_key(p, options);
    const std::string difference = first_difference(four, one);
    ASSERT_EQ(difference, "") << "problem " << n << ": Tq " << p.shape.q_len << " Tk " << p.shape.k_len << " Dk "
                              << p.shape.head_dim << (p.rope.enabled ? " RoPE" : "");
  }
  // Each feature is drawn in a good share of the problems.
  for (int count :
       {seen.rope, seen.odd_dk, seen.ragged_tk, seen.sinks, seen.softcap, seen.masked, seen.tiny, seen.huge})
    EXPECT_GE(count, problems / 20);
}

// The 4-key blocks straddle the mask's edge and Tk's end: a long causal row with keys of very
// different magnitudes (the partial sums' renormalisation matters) on 2 threads.
TEST(FourKeyDot, LongRowsOnThreadsEqualTheOneKeyPath) {
  for (bool rope : {false, true}) {
    Problem p;
    p.shape = {.batch = 1, .heads = 2, .kv_heads = 1, .q_len = 9, .k_len = 203, .head_dim = 10, .value_dim = 3};
    p.mask.causal = true;
    p.rope.enabled = rope;
    p.resize_buffers();
    std::mt19937_64 rng(7);
    std::normal_distribution<double> normal(0.0, 1.0);
    for (auto* tensor : {&p.q, &p.k, &p.v})
      for (std::size_t e = 0; e < tensor->size(); ++e)
        (*tensor)[e] = static_cast<float>(std::ldexp(normal(rng), static_cast<int>(e % 7) * 5 - 15));
    const ReferenceOptions options{.weights = true, .jobs = 2};
    EXPECT_EQ(first_difference(compute_reference_fast(p, options),
                               reference_detail::compute_reference_fast_one_key(p, options)),
              "")
        << (rope ? "RoPE" : "no RoPE");
  }
}

}  // namespace
}  // namespace attest
