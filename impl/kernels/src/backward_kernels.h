// The built-in backward passes (docs/design.md#backward): the loop kernel's row by row, the tiled kernels'
// FlashAttention-2 style. Both recompute P from the forward's LSE, take D = rowsum(dO * O), and
// support every mask term, GQA, RoPE and the score modifiers (softcap's 1 - tanh^2, ALiBi, bias,
// sinks' dsinks).
#pragma once

#include "attest/kernels/faults.h"
#include "attest/kernels/kernel.h"

namespace attest::kernels {

// Row by row: each query row's P, dP and dS, added into dQ, dK and dV as it goes.
void loop_backward(const Problem& p, const BackwardInputs& in, const GradientSpans& out);

// Per kv head and key tile of block_k keys, dK and dV accumulated over every query tile (block_q
// rows) of the group's heads; dQ accumulated over key tiles, in key-tile order (deterministic).
// `faults` switches on the backward mutants' bugs (faults.h).
void tiled_backward(const Problem& p, const BackwardInputs& in, const GradientSpans& out, int block_q, int block_k,
                    const KernelFaults& faults = {});

// The same algorithm on simd_ops' micro-kernels (backward_fast.cpp): the built-in tiled kernel's.
void tiled_backward_fast(const Problem& p, const BackwardInputs& in, const GradientSpans& out, int block_q,
                         int block_k);

}  // namespace attest::kernels
