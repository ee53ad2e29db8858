// What the backward properties share (docs/design.md#backward): the inputs a backward is given, and the
// comparison of its gradients with the exact ones under the gradient bound.
#pragma once

#include <string>
#include <vector>

#include "attest/kernels/kernel.h"
#include "attest/properties/oracle.h"
#include "attest/properties/verdict.h"
#include "attest/reference/gradient.h"

namespace attest {

// dO for a problem: multiples of 1/64 in [-1, 1], drawn from the problem's fingerprint (a replayed
// problem gets the same dO).
std::vector<float> output_gradient_for(const Problem& p);

// The inputs of a backward call: the exact forward's O and LSE rounded to float (an empty row as
// the declared policy writes it: O 0 or NaN, LSE -inf; with a sink O 0 and LSE sigma), and d_o.
// The backward is judged alone: its forward's own error never reaches it.
GradientInputs backward_inputs(const Problem& p, Oracle& oracle, std::vector<float> d_o, EmptyRowPolicy policy);
BackwardInputs spans_of(const GradientInputs& in);

// Each of dQ, dK, dV (and dsinks) within its bound of the exact gradient; a NaN or an element
// never written fails. `label` says which call is compared (a probe, a permutation). `query_rows`:
// p holds these rows of a larger problem (sampled), named by them in a failure.
Verdict compare_gradients(const Problem& p, const ReferenceGradient& ref, const Gradients& got,
                          const std::string& property, const std::string& label = "",
                          const std::vector<int>& query_rows = {});

// Where a backward declared with these capabilities rounds: f32 arithmetic, exp within its
// declared ulps (at least 2).
GradientNumerics gradient_numerics(const Capabilities& caps);

// One backward call (at the problem's drawn thread count) and the exact gradient it is held to.
struct GradientRun {
  GradientInputs in;
  ReferenceGradient ref;
  Gradients got;
};
GradientRun run_gradient(const Problem& p, const Kernel& kernel, Oracle& oracle, std::vector<float> d_o);

inline constexpr const char* kBeyondFloat = "the exact gradients or their intermediates exceed float range";
// Whether some row of the problem sees a key (else the gradients are all zero, nothing to judge).
bool any_row_sees(const ReferenceGradient& ref);

// The backward of p (dO drawn from it, a drawn thread count) against the exact gradient: the check
// gradient_matches_reference makes, and the size ladder at the declared tiles' lengths.
Verdict backward_matches_reference(const Problem& p, const Kernel& kernel, Oracle& oracle, const std::string& property);

// The thread counts a backward is called with: the kernel's choice (0), 1, 2, 3, 4, 8 and 16, the
// same on every machine so that a replay draws the same one. Correctness is judged at each,
// determinism across them and the machine's cores.
extern const std::vector<int> kThreadCounts;
// The count of one backward call, drawn from the problem's fingerprint (a replay draws it again).
int drawn_threads(const Problem& p);

// "dK[b=0 g=1 key=5 col=2]" for element e of the named gradient of p (its query rows numbered as
// `query_rows` says, when given).
std::string describe_gradient(const Problem& p, const std::string& which, std::size_t e,
                              const std::vector<int>& query_rows = {});

}  // namespace attest
