// Calibrated constants of the precision gate (see README "Calibration").
#pragma once

namespace attest {

// A kernel fails when its worst error (in u, relative to S_r, and divided by the row's logit
// conditioning sum_j p_j A_j / floor where that exceeds 1) exceeds this factor times the loop
// kernel's, or times the floor when the loop kernel's error is below it.
inline constexpr double kPrecisionGateFactor = 32.0;
inline constexpr double kPrecisionGateFloor = 8.0;

}  // namespace attest
