// A decode-only kernel has no forward call, yet a session reproduces a causal prefill: the
// properties that need a forward (overflow_safe, masked_inputs_have_no_influence) reach it through
// this stand-in, which answers a bottom-right causal problem by decoding it.
#pragma once

#include <memory>

#include "attest/kernels/kernel.h"
#include "attest/properties/properties.h"

namespace attest {

// What a decode session can be given: causal, the integer mask terms, softcap, ALiBi, sinks, GQA,
// RoPE and LSE (padding, segments, an explicit mask and a bias are prefill features).
FeatureSet session_features();

// The session that decodes `prefill` (a causal Tq = Tk problem): its shape, scale, integer mask
// terms, modifiers but the bias, RoPE, and for q8_head storage each sequence's kv heads' scales.
DecodeConfig session_config_of(const Problem& prefill);

// Whether some sessions of the kernel are exact causal attention: a cache that keeps every position,
// or one that evicts by a declared rule (exact up to its first eviction); not one that evicts at will.
bool exact_sessions(const Capabilities& caps);
// Whether a session of `tokens` tokens is exact causal attention: nothing evicted by then.
bool exact_session(const Capabilities& caps, long long tokens);

// A decode-only kernel (which must outlive it) as a causal forward that decodes each problem.
std::unique_ptr<Kernel> session_forward(const Kernel& decoder);
// The stand-in when `property` runs through sessions and `kernel` is decode-only; else null.
std::unique_ptr<Kernel> session_stand_in(const PropertyInfo& property, const Kernel& kernel);

}  // namespace attest
