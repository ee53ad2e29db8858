// Calibrated constants of the precision gate (docs/precision.md#calibration-no-false-alarms).
#pragma once

#include <optional>

#include "attest/properties/harness.h"
#include "attest/properties/oracle.h"
#include "attest/properties/verdict.h"

namespace attest {

// A kernel fails when its worst error (in u, relative to S_r, and divided by the row's logit
// conditioning sum_j p_j A_j / floor where that exceeds 1) exceeds this factor times the model
// kernel's (the loop kernel rounding as declared), or times the floor when the model's is below it.
// f32 everywhere: calibrated on the four built-in kernels and the C example (worst 2.75 x).
inline constexpr double kPrecisionGateFactor = 32.0;
inline constexpr double kPrecisionGateFloor = 8.0;
// A 16-bit rounding anywhere (u = 2^-8 or 2^-11): 32 x 8 u would allow errors as large as the
// values in bf16; these admit every correct 16-bit kernel of `attest calibrate` with a margin and
// fail a kernel that mixes 10% of uniform attention into its rows (ci/results/calibrate.txt).
inline constexpr double kPrecisionGateFactor16 = 4.0;
inline constexpr double kPrecisionGateFloor16 = 2.0;
inline constexpr double kF32Roundoff = 0x1p-24;

struct GateAllowance {
  double factor, floor;
};
GateAllowance gate_allowance(const Precision& precision);

// The kernel's and the model kernel's worst scaled errors on p; nothing when every row is empty
// or the reference is not finite.
struct GateErrors {
  double kernel, model;
  // The precision both were judged at (of the path that served the call); behind an entry rounding
  // coarser than the storage, its arithmetic alone (the errors are then from the rounded inputs' exact result).
  Precision declared;
};
std::optional<GateErrors> precision_gate_errors(const Problem& p, const Kernel& kernel, Oracle& oracle);
// The same from outputs already computed, behind the declared entry rounding when there is one.
std::optional<GateErrors> gate_errors(const Problem& p, const Reference& ref, const Outputs& kernel_out,
                                      const Outputs& model_out, const Precision& declared, Oracle& oracle);
// The same from outputs already computed, over the rows `ref` holds (a long problem's sample).
std::optional<GateErrors> precision_gate_errors_of(const Problem& p, const Reference& ref, const Outputs& kernel_out,
                                                   const Outputs& model_out, const Precision& precision);
// Gate 2's verdict on errors already measured (precision_gate measures, then asks this).
Verdict precision_gate_verdict(const GateErrors& errors, const Precision& precision);

}  // namespace attest
