// attest's C++ kernel interface as the C ABI and the wire format carry it, both directions, so
// that a capability, a contract field or a problem field is mapped in one place.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "attest/abi/process_protocol.hpp"
#include "attest/attest_abi.h"
#include "attest/kernels/kernel.h"

namespace attest {

// The problem as the C ABI and the protocol carry it: scale and q_offset made explicit, q/k/v as
// the bytes of the kernel's storage formats (the values must be representable there).
protocol::WireProblem to_wire(const Problem& p, const Precision& precision);
protocol::WireDecodeConfig to_wire(const DecodeConfig& c);
protocol::WireBackward to_wire(const Problem& p, const BackwardInputs& in, const Precision& precision);
// Gradients as they come back (dq, dk, dv as bytes in the storage types of q, k and v) into the
// caller's spans. Returns false, writing nothing, when a size does not match the problem.
bool gradients_from_storage(const std::vector<std::uint8_t>& dq, const std::vector<std::uint8_t>& dk,
                            const std::vector<std::uint8_t>& dv, const std::vector<float>& dsinks,
                            const Precision& precision, const GradientSpans& out);
// Partial states to merge (ABI 2.6) as the protocol carries them: o as bytes of its storage.
protocol::WireMerge to_wire(const MergeInputs& in);
// Partial states from the C view: their o converted to floats into `o` (which the result views).
// Throws ProblemError naming what is wrong (NULL buffers, a storage other than f32 or bf16, counts).
MergeInputs merge_inputs_of(const attest_merge_inputs& in, std::vector<float>& o);

// A packed varlen call (ABI 2.8) as the C struct: pointers into `call`'s buffers, the offsets
// from where the caller keeps them (attest places each before a guard page).
attest_packed_problem packed_problem_view(const PackedCall& call, const std::int32_t* cu_seqlens_q,
                                          const std::int32_t* cu_seqlens_k);
// ... and back, copied (throws ProblemError for NULL buffers or broken offsets; check_packed_call
// judges the rest). The offsets from the int32 pointers, or when those are NULL from the int64 ones
// (ABI 2.10).
PackedCall packed_call_of(const attest_packed_problem& problem);
// Back from the C view; validates nothing (Problem::validate does).
Problem from_wire(const attest_problem_v2& h, const Precision& precision);
// A decode configuration as attest's model has it (q8_head scales from reserved[0] and [1]).
DecodeConfig decode_config_of(const attest_decode_config_v2& c);

// A descriptor as attest understands it. Throws std::invalid_argument naming the field when it
// declares what this attest cannot certify yet, or is inconsistent (min > max, a zero tile...).
Capabilities capabilities_from_descriptor(const protocol::Descriptor& d);
protocol::Descriptor descriptor_from_capabilities(const Capabilities& c, const std::string& name);

}  // namespace attest
