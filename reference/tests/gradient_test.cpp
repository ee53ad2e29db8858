// The exact gradient (gradient.h): its double-double and MPFR evaluations agree, and central
// differences of the forward, which share nothing with the gradient formula, agree with both.
#include "attest/reference/gradient.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "attest/reference/reference.h"

namespace attest {
namespace {

struct Variant {
  bool rope = false, softcap = false, sinks = false, alibi = false, bias = false;
};

Problem small_problem(std::uint64_t seed, const Variant& v) {
  Problem p;
  p.shape = {.batch = 1, .heads = 2, .kv_heads = 1, .q_len = 3, .k_len = 5, .head_dim = 4, .value_dim = 3};
  p.mask.causal = true;
  p.rope.enabled = v.rope;
  p.resize_buffers();
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> step(-64, 64);
  for (auto* b : {&p.q, &p.k, &p.v})
    for (float& x : *b) x = static_cast<float>(step(rng)) / 32.0f;
  if (v.softcap) p.modifiers.softcap = 2.5;
  if (v.sinks) p.modifiers.sinks = {0.5f, -1.0f};
  if (v.alibi) p.modifiers.alibi_slopes = {0.25f, -0.5f};
  if (v.bias) {
    p.modifiers.bias.resize(std::size_t(2) * 3 * 5);
    for (float& x : p.modifiers.bias) x = static_cast<float>(step(rng)) / 64.0f;
    p.modifiers.bias[7] = -INFINITY;  // head 0, row 1, key 2 hidden
    p.modifiers.bias_per_batch = false;
  }
  return p;
}

GradientInputs inputs_for(const Problem& p, std::uint64_t seed) {
  const Reference ref = compute_reference(p);
  GradientInputs in;
  for (double x : ref.o) in.o.push_back(static_cast<float>(x));
  for (double x : ref.lse) in.lse.push_back(static_cast<float>(x));
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> step(-64, 64);
  for (std::size_t e = 0; e < p.o_size(); ++e) in.d_o.push_back(static_cast<float>(step(rng)) / 64.0f);
  return in;
}

const Variant kVariants[] = {{},
                             {.rope = true},
                             {.softcap = true},
                             {.sinks = true},
                             {.alibi = true, .bias = true},
                             {.rope = true, .softcap = true, .sinks = true, .alibi = true, .bias = true}};

TEST(Gradient, DoubleDoubleAgreesWithMpfr) {
  for (std::uint64_t seed = 1; seed <= 3; ++seed)
    for (const Variant& v : kVariants) {
      const Problem p = small_problem(seed, v);
      const GradientInputs in = inputs_for(p, seed);
      const ReferenceGradient fast = compute_gradient(p, in), mpfr = compute_gradient_mpfr(p, in);
      for (auto [a, b, bound] : {std::tuple{&fast.dq, &mpfr.dq, &mpfr.dq_bound},
                                 {&fast.dk, &mpfr.dk, &mpfr.dk_bound},
                                 {&fast.dv, &mpfr.dv, &mpfr.dv_bound},
                                 {&fast.dsinks, &mpfr.dsinks, &mpfr.dsinks_bound}})
        for (std::size_t e = 0; e < a->size(); ++e)
          EXPECT_LE(std::fabs((*a)[e] - (*b)[e]), 1e-9 * (*bound)[e] + 1e-300) << "seed " << seed << " element " << e;
    }
}

// Every element of every gradient against central differences of the exact forward.
TEST(Gradient, AgreesWithFiniteDifferencesOfTheForward) {
  int checked = 0;
  for (const Variant& v : kVariants) {
    const Problem p = small_problem(11, v);
    const GradientInputs in = inputs_for(p, 12);
    const ReferenceGradient g = compute_gradient(p, in);
    for (auto [of, exact] : {std::pair{GradientOf::kQ, &g.dq},
                             {GradientOf::kK, &g.dk},
                             {GradientOf::kV, &g.dv},
                             {GradientOf::kSinks, &g.dsinks}})
      for (std::size_t e = 0; e < exact->size(); ++e) {
        const FiniteDifference fd = finite_difference(p, in.d_o, of, e, 0x1p-18f);
        EXPECT_NEAR((*exact)[e], fd.value, 1e-8 * (1 + std::fabs(fd.value))) << "element " << e;
        EXPECT_LT(fd.rounding, 1e-20);
        ++checked;
      }
  }
  EXPECT_GT(checked, 300);
}

// The bound is not vacuous: a float32 gradient is a few ulps of its magnitude off, the bound a
// modest multiple of that.
TEST(Gradient, BoundIsFiniteAndSmall) {
  const Problem p = small_problem(5, {.softcap = true, .sinks = true});
  const ReferenceGradient g = compute_gradient(p, inputs_for(p, 6));
  ASSERT_TRUE(g.within_float_range);
  for (std::size_t e = 0; e < g.dq.size(); ++e) {
    EXPECT_TRUE(std::isfinite(g.dq_bound[e]));
    EXPECT_LT(g.dq_bound[e], 1e-4);
  }
}

}  // namespace
}  // namespace attest
