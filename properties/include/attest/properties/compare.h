// The hard-bound comparison of kernel outputs with the reference (gate 1 of docs/design.md#tolerance-model).
#pragma once

#include <string>

#include "attest/kernels/kernel.h"
#include "attest/properties/verdict.h"
#include "attest/reference/error_bound.h"
#include "attest/reference/reference.h"

namespace attest {

// The bound's view of a kernel's declared arithmetic and tiling, on problem p: on the path that
// served a call (Outputs::path), at a given precision, or at the loosest of its paths (two runs
// compared). The problem sizes what entry rounding may flush below its format's normal range.
KernelNumerics numerics_of(const Capabilities& caps, const std::string& path, const Problem& p);
KernelNumerics numerics_of(const Capabilities& caps, const Precision& precision, const Problem& p);
KernelNumerics numerics_of(const Capabilities& caps, const Problem& p);

// "b=0 h=1 row=5" for a row index, "b=0 h=1 row=5 col=2" for an output element index.
std::string describe_row(const Problem& p, std::size_t row);
std::string describe_element(const Problem& p, std::size_t element);

struct Comparison {
  Verdict verdict;
  double max_abs_error = 0.0;  // over non-empty output elements
  long vacuous_elements = 0;   // elements whose bound was infinite or as large as their values (not compared)
};

// Every non-empty element within its bound, LSE too when the kernel declares it; empty rows
// exactly as the declared policy says. A NaN reference is a failure, never a pass.
Comparison compare_with_reference(const Problem& p, const Reference& ref, const Outputs& out, const Capabilities& caps,
                                  const std::string& property = "matches_reference");

// Two runs of a kernel that exact arithmetic says are equal (a permuted, sliced or shifted
// problem mapped back): each non-empty element within `factor` x its bound of the other,
// empty rows exactly per policy in `got`. `ref` is the reference of the problem `p`.
Verdict compare_runs(const Problem& p, const Reference& ref, const Outputs& expected, const Outputs& got,
                     const Capabilities& caps, const std::string& property, const std::string& label,
                     double factor = 2.0, int extra_key_tiles = 0);

}  // namespace attest
