// Moving a problem inside a kernel's declaration: the golden and grid cases, fuzz inputs and
// length ladders are written for the general model; a kernel with a contract (head widths,
// Dk == Dv, default scale, causal only, size limits) or fewer features gets the nearest problem
// it accepts instead of a refusal or a skip.
#pragma once

#include <optional>
#include <string>

#include "attest/kernels/kernel.h"

namespace attest {

// Undeclared features removed; widths, sizes, scale, offset and causality brought into the
// contract; buffers and per-token masks rebuilt (deterministically from the problem) where the
// shape changed. nullopt when no such problem exists; `why` then says what stood in the way.
std::optional<Problem> fit_to_declaration(const Problem& p, const Capabilities& caps, std::string* why = nullptr);

}  // namespace attest
