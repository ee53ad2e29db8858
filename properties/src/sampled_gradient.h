// The backward of a long problem judged on sampled rows (the long stage): dO is zero outside the
// sampled query rows, so every other row's dS is exactly 0 and the exact gradient needs only the
// sampled rows: dQ of those rows, and dK, dV (and dsinks) of every key, in O(rows x Tk x D)
// instead of the whole problem's O(Tq x Tk x D).
#pragma once

#include <vector>

#include "attest/kernels/kernel.h"
#include "attest/properties/verdict.h"
#include "attest/reference/gradient.h"

namespace attest {

// What the kernel is given and what its gradients are held to.
struct SampledBackward {
  std::vector<int> rows;   // the sampled query rows, ascending
  GradientInputs full;     // the kernel's inputs: O, LSE and dO of the whole problem
  Problem restricted;      // the sampled rows alone (visibility as an explicit mask), every key
  GradientInputs sampled;  // O, LSE and dO of those rows
};

// Whether p can be judged this way: no term that depends on a query's position besides the mask
// (RoPE, ALiBi, a bias), since the restricted problem loses the positions.
bool samples_backward(const Problem& p);

// The inputs for the rows (exact O and LSE there; elsewhere O = 0 and an LSE at or above the row's
// largest logit, so every weight stays finite and, times dO = 0, contributes exactly nothing).
SampledBackward sampled_backward(const Problem& p, std::vector<int> rows, EmptyRowPolicy policy, int jobs);

// The kernel's backward (at the problem's drawn thread count) on those inputs; `kernel_seconds`,
// when given, receives the call's time.
Gradients run_sampled_backward(const Problem& p, const SampledBackward& in, const Kernel& kernel,
                               double* kernel_seconds = nullptr);

// The kernel's dQ on the sampled rows and dK, dV, dsinks on every key against the exact gradient.
Verdict sampled_backward_matches_reference(const Problem& p, const std::vector<int>& rows, const Kernel& kernel,
                                           int jobs, double* kernel_seconds = nullptr);

}  // namespace attest
