// The double-double gradient's x86-64-v3 clone gives the portable path's bits, every field.
#include "x86_64_v3.h"

#include <gtest/gtest.h>

#include <cmath>
#include <exception>
#include <random>
#include <string>

#include "attest/reference/gradient.h"
#include "attest/reference/reference.h"
#include "random_problem.h"

namespace attest {
namespace {

using testing_support::first_difference;

std::string first_difference(const ReferenceGradient& a, const ReferenceGradient& b) {
  if (a.working_bits != b.working_bits) return "working_bits";
  if (a.within_float_range != b.within_float_range) return "within_float_range";
  for (const std::string& d :
       {first_difference("dq", a.dq, b.dq), first_difference("dk", a.dk, b.dk), first_difference("dv", a.dv, b.dv),
        first_difference("dsinks", a.dsinks, b.dsinks), first_difference("dq_bound", a.dq_bound, b.dq_bound),
        first_difference("dk_bound", a.dk_bound, b.dk_bound), first_difference("dv_bound", a.dv_bound, b.dv_bound),
        first_difference("dsinks_bound", a.dsinks_bound, b.dsinks_bound),
        first_difference("dq_scale", a.dq_scale, b.dq_scale), first_difference("dk_scale", a.dk_scale, b.dk_scale),
        first_difference("dv_scale", a.dv_scale, b.dv_scale),
        first_difference("dsinks_scale", a.dsinks_scale, b.dsinks_scale), first_difference("empty", a.empty, b.empty),
        first_difference("key_seen", a.key_seen, b.key_seen)})
    if (!d.empty()) return d;
  return "";
}

TEST(X86_64_V3, GradientCloneEqualsThePortablePathBitForBit) {
  std::mt19937_64 rng(43);
  testing_support::Coverage seen;
  const int problems = 600;
  for (int n = 0; n < problems; ++n) {
    const Problem p = testing_support::random_problem(rng, seen);
    // A kernel's O and LSE: the forward rounded to float; dO drawn at its own magnitude.
    const Reference ref = compute_reference_fast(p);
    GradientInputs in;
    for (double x : ref.o) in.o.push_back(static_cast<float>(x));
    for (double x : ref.lse) in.lse.push_back(static_cast<float>(x));
    std::normal_distribution<double> normal(0.0, 1.0);
    const int e = std::uniform_int_distribution<int>(-20, 20)(rng);
    for (std::size_t k = 0; k < p.o_size(); ++k) in.d_o.push_back(static_cast<float>(std::ldexp(normal(rng), e)));
    std::string clone, portable;
    ReferenceGradient a, b;
    try {
      a = compute_gradient(p, in);
    } catch (const std::exception& x) {
      clone = x.what();
    }
    try {
      b = reference_detail::compute_gradient_portable(p, in);
    } catch (const std::exception& x) {
      portable = x.what();
    }
    ASSERT_EQ(clone, portable) << "problem " << n;
    ASSERT_EQ(first_difference(a, b), "") << "problem " << n << ": Tq " << p.shape.q_len << " Tk " << p.shape.k_len
                                          << " Dk " << p.shape.head_dim << (p.rope.enabled ? " RoPE" : "");
  }
  for (int count : {seen.rope, seen.odd_dk, seen.sinks, seen.softcap, seen.masked, seen.tiny, seen.huge})
    EXPECT_GE(count, problems / 20);
}

}  // namespace
}  // namespace attest
