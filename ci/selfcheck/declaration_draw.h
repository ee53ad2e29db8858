// Random declarations for `attest selfcheck`: features, the empty-row policy, every precision field
// the model kernel rounds exactly (storage, entry rounding, scores, P, weight sum, accumulator,
// unnormalised P.V, exp), contracts (head widths, Dk = Dv, lengths, offsets, value range, scale,
// causality, self-attention only, ALiBi slopes, tiles), the input domain, decode (decode-only too)
// with its cache policy and block table, backward (float32 throughout), declared paths with
// predicates and fp8 K/V storage. Each is a declaration a correct kernel could honestly make; the
// model kernel (declared_model.h) then makes it exactly.
#pragma once

#include <cstdint>

#include "attest/kernels/kernel.h"

namespace attest {

// The declaration numbered `index` of the run seeded `seed`: the same pair, the same declaration.
Capabilities draw_declaration(std::uint64_t seed, int index);

}  // namespace attest
