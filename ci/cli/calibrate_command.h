// `attest calibrate`: the long run behind the tolerance gates' "no false alarm" claim.
#pragma once

#include <cstdint>
#include <string>

namespace attest {

// Runs matches_reference and precision_gate on `cases` random problems per kernel (all
// built-in kernels, or the one named); prints per kernel: cases, false alarms, worst
// utilisation of each gate. Returns the number of false alarms.
int calibrate(int cases, std::uint64_t seed, const std::string& kernel_name);

}  // namespace attest
