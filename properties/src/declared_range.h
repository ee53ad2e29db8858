// The range of a kernel's declared arithmetic (the narrowest of its paths): a kernel that accumulates q.k
// in f16 overflows past 65504 however exact it is, and so does one summing P.V in f16. attest keeps
// the problems it builds inside that range, so an overflow there is never blamed on the kernel.
#pragma once

#include <vector>

#include "attest/kernels/kernel.h"

namespace attest {

struct DeclaredRange {
  double logit;  // the largest sum_c |q_c k_c| x max(1, |scale|) the score format holds, with headroom
  double value;  // the largest |V| of a visible key the P.V accumulator (unnormalised: over Tk keys) and O hold
};
DeclaredRange declared_range(const Capabilities& caps, int k_len);

// Brings p inside the range: Q (then V) scaled down by powers of two, rounded to their storage. The
// logit bound is the cheap max_i |q_i|_1 x max |k| over the finite K of keys some query sees (of
// every key when the kernel scores masked ones, inputs masked_scored), the value bound over the
// V of seen keys: a masked key's poison never shrinks the visible values.
void fit_to_declared_range(Problem& p, const Capabilities& caps);

// The keys whose logits the declared arithmetic must hold ([b][j]): those some query sees, or every
// key for a kernel that scores masked keys (inputs masked_scored). Any other masked key's logit is
// the input domain's (a NaN or +-1e30 poison goes past every range).
std::vector<std::vector<char>> scored_keys(const Problem& p, const Capabilities& caps);

// Whether every scored pair's sum_c |q_c k_c| (times the scale) is inside the score format's range.
bool logits_within_declared_range(const Problem& p, const Capabilities& caps);

}  // namespace attest
