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

#include "attest/reference/reference.h"
#include "random_problem.h"

namespace attest {
namespace {

using testing_support::Coverage;
using testing_support::first_difference;
using testing_support::random_problem;

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
