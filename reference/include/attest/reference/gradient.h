// The exact gradient of attention (docs/design.md#backward) and a hard bound on a float32 backward
// kernel's error, per element of dQ, dK, dV and dsinks. Shares no code with the kernels.
#pragma once

#include <cstdint>
#include <vector>

#include "attest/model/problem.h"

namespace attest {

// What a backward kernel is given besides the problem: the forward's O [B][H][Tq][Dv] and LSE
// [B][H][Tq] (-inf on an empty row) as it received them, and dO [B][H][Tq][Dv]. The bound charges
// the kernel for its own arithmetic only: where O and LSE differ from the exact forward, the
// difference enters the bound (a backward cannot be more exact than the O and LSE it is given).
struct GradientInputs {
  std::vector<float> o, lse, d_o;
};

// Where a float32 backward rounds: every operation at u, each exp within exp_error.
struct GradientNumerics {
  double roundoff = 0x1p-24;
  double exp_error = 0x1p-23;
};

struct ReferenceGradient {
  int working_bits = 0;
  // Exact gradients, rounded to double: dq [B][H][Tq][Dk], dk [B][Hkv][Tk][Dk], dv [B][Hkv][Tk][Dv],
  // dsinks [H] (empty without sinks).
  std::vector<double> dq, dk, dv, dsinks;
  // Per element: the bound on |kernel - exact| of a kernel rounding as GradientNumerics says.
  std::vector<double> dq_bound, dk_bound, dv_bound, dsinks_bound;
  // Per element: the magnitudes its float evaluation adds up, each weight's times its conditioning
  // (max(1, its relative error bound / 8 u)): the scale of a kernel's rounding error, in which gate
  // 2 compares two kernels.
  std::vector<double> dq_scale, dk_scale, dv_scale, dsinks_scale;
  // Per row [B][H][Tq]: 1 when the row sees no key.
  std::vector<std::uint8_t> empty;
  // Per key [B][Hkv][Tk]: 1 when some query row of some head of the group sees it (else its dK and
  // dV are exactly 0).
  std::vector<std::uint8_t> key_seen;
  // Every exact gradient and every intermediate a float32 kernel holds lies below FLT_MAX / 4.
  bool within_float_range = true;
};

// In double-double (100 correct bits), with P recomputed from the exact scores.
ReferenceGradient compute_gradient(const Problem& p, const GradientInputs& in, const GradientNumerics& numerics = {});
// The same algorithm in MPFR at 136 bits: cross-checks the double-double one in tests.
ReferenceGradient compute_gradient_mpfr(const Problem& p, const GradientInputs& in,
                                        const GradientNumerics& numerics = {});

// The loss L = sum O . dO of the exact forward (100 bits), and its central difference quotient in
// q, k or v element `index` with step h (an exact float step): the gradient independent of the
// analytic formula, to check it (tests and gradient_matches_finite_difference): (L(x + h) -
// L(x - h)) / 2h, and the bound on what L's own error adds to it (the truncation error, about
// h^2, is the caller's to estimate: compare steps h and 2h).
enum class GradientOf { kQ, kK, kV, kSinks };
struct FiniteDifference {
  double value = 0;
  double rounding = 0;
};
FiniteDifference finite_difference(const Problem& p, const std::vector<float>& d_o, GradientOf of, std::size_t index,
                                   float h);

}  // namespace attest
