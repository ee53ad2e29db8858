// The property catalogue (docs/design.md#property-catalogue). Each property is a plain function; RapidCheck
// suites, fuzz targets and `attest certify` are thin drivers over the same functions.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "attest/kernels/kernel.h"
#include "attest/properties/oracle.h"
#include "attest/properties/problem_needs.h"
#include "attest/properties/verdict.h"

namespace attest {

using PropertyCheck = std::function<Verdict(const Problem&, const Kernel&, Oracle&)>;

// O and LSE within the hard bound; empty rows exactly per the declared policy.
Verdict matches_reference(const Problem& p, const Kernel& kernel, Oracle& oracle);
// Gate 2: error no worse than a calibrated factor times the loop kernel's on the same inputs.
Verdict precision_gate(const Problem& p, const Kernel& kernel, Oracle& oracle);
// Probe V = 1: every non-empty row outputs 1.
Verdict rows_sum_to_one(const Problem& p, const Kernel& kernel, Oracle& oracle);
// Probe V = one-hot per key: the output row is the weight row; masked keys exactly 0.
Verdict zero_masked_weight(const Problem& p, const Kernel& kernel, Oracle& oracle);
// Masked K/V rows poisoned with NaN, +-inf, +-1e30: non-empty rows unchanged.
Verdict masked_inputs_have_no_influence(const Problem& p, const Kernel& kernel, Oracle& oracle);
// Without positions: permuting queries permutes outputs; permuting keys with values changes nothing.
Verdict permutation_equivariance(const Problem& p, const Kernel& kernel, Oracle& oracle);
// Rows made empty follow the declared policy and change no other row.
Verdict empty_row_policy(const Problem& p, const Kernel& kernel, Oracle& oracle);
// Token-by-token and random-chunk decode equal one-shot prefill.
Verdict decode_matches_prefill(const Problem& p, const Kernel& kernel, Oracle& oracle);
// A decoder declaring a cache policy, on a sequence past its first eviction, token by token and in
// random chunks: each query equals exact attention over the positions the policy keeps for it (or,
// declared explicit, those the session reports), each at its original position.
Verdict eviction_matches_retained_set(const Problem& p, const Kernel& kernel, Oracle& oracle);
// A decoder reading its cache through attest's block tables (Capabilities::page_tokens), decoding
// the problem's sequences in calls of ragged batches (each sequence its own length and count):
// equals exact attention, and each sequence decoded alone in the same chunks.
Verdict ragged_batch_equals_single(const Problem& p, const Kernel& kernel, Oracle& oracle);
// The same with the physical pages handed out in a drawn order and all moved before a drawn call
// (the tables renamed): equals exact attention and the run with pages in order.
Verdict page_order_invariance(const Problem& p, const Kernel& kernel, Oracle& oracle);
// Sequences sharing sequence 0's prefix pages (a drawn prefix, copy on write when one appends to
// a shared page): no call writes a page that holds none of its new tokens, and the outputs equal
// exact attention and private copies.
Verdict shared_prefix_equals_private(const Problem& p, const Kernel& kernel, Oracle& oracle);
// Each output lies within [min, max] of the visible values.
Verdict output_in_convex_hull(const Problem& p, const Kernel& kernel, Oracle& oracle);
// GQA equals MHA with K/V heads repeated.
Verdict gqa_matches_repeated_heads(const Problem& p, const Kernel& kernel, Oracle& oracle);
// Each (batch, head) computed alone equals the batched result.
Verdict slices_are_independent(const Problem& p, const Kernel& kernel, Oracle& oracle);
// With RoPE, shifting every position by a constant changes nothing.
Verdict rope_relative_position(const Problem& p, const Kernel& kernel, Oracle& oracle);
// Logits swept up to 1e37: finite outputs wherever the reference is finite.
Verdict overflow_safe(const Problem& p, const Kernel& kernel, Oracle& oracle);
// Two runs agree bitwise; outputs fully written; nothing outside them touched.
Verdict deterministic_and_in_bounds(const Problem& p, const Kernel& kernel, Oracle& oracle);
// A -inf bias entry gives the same result as masking that key with the explicit mask.
Verdict bias_minus_inf_equals_mask(const Problem& p, const Kernel& kernel, Oracle& oracle);
// ALiBi slopes give the same result as the equivalent explicit bias slope[h] * (j - qpos(i)).
Verdict alibi_matches_bias(const Problem& p, const Kernel& kernel, Oracle& oracle);
// With a cap c, Q scaled up to huge keeps outputs finite and within the bound, and no visible
// key's weight falls below e^(a_j - c) / (e^sigma + e^(a_j - c) + sum_{k != j} e^(a_k + c)).
Verdict softcap_saturates(const Problem& p, const Kernel& kernel, Oracle& oracle);
// Probe V = 1 with sinks: every row outputs 1 - exp(sigma_h - LSE); a row with no visible key
// outputs 0 and LSE = sigma_h.
Verdict sink_takes_mass(const Problem& p, const Kernel& kernel, Oracle& oracle);

// A kernel declaring merge: the exact states of a drawn partition of the keys (empty parts, single
// keys, one part holding every key; partial O in f32 or bf16) merge to the exact whole.
Verdict merge_equals_whole(const Problem& p, const Kernel& kernel, Oracle& oracle);

// A kernel declaring the packed varlen layout (packed.h), on the case with drawn sequence lengths
// (empty sequences, a single one, many short ones, one long beside short ones, totals at a tile's
// edge): its packed call equals the exact reference of the padded batch, sequence by sequence.
Verdict packed_equals_padded(const Problem& p, const Kernel& kernel, Oracle& oracle);
// ... and editing one sequence's Q, K and V changes no other sequence's outputs.
Verdict sequences_do_not_interact(const Problem& p, const Kernel& kernel, Oracle& oracle);
// A kernel declaring merge and LSE: its forward over 2 to 8 contiguous key ranges (an explicit mask
// hiding the rest) merged by its merge equals its forward over every key, within the bound.
Verdict split_invariance(const Problem& p, const Kernel& kernel, Oracle& oracle);

// Backward (docs/design.md#backward), each on the exact forward's O and LSE and a dO drawn from the problem:
// dQ, dK, dV and dsinks within the gradient bound of the exact gradient (gate 1).
Verdict gradient_matches_reference(const Problem& p, const Kernel& kernel, Oracle& oracle);
// Gate 2 for the backward: error no worse than a calibrated factor times the loop backward's.
Verdict gradient_precision_gate(const Problem& p, const Kernel& kernel, Oracle& oracle);
// Keys no row sees (and keys hidden by a -inf bias), K or V poisoned: their dK = dV = 0 exactly.
Verdict gradient_masked_keys_zero(const Problem& p, const Kernel& kernel, Oracle& oracle);
// dO one-hot per row: dV's columns are rows of the reference's P (dV = P^T dO).
Verdict gradient_dv_is_pt_do(const Problem& p, const Kernel& kernel, Oracle& oracle);
// Every key of a head equal: dQ = scale k sum_j dS_ij = 0 (the softmax Jacobian's rows sum to 0).
Verdict gradient_ds_rows_sum_to_zero(const Problem& p, const Kernel& kernel, Oracle& oracle);
// Rows made empty, their dO huge: their dQ exactly 0, every other gradient unchanged.
Verdict gradient_empty_rows_contribute_nothing(const Problem& p, const Kernel& kernel, Oracle& oracle);
// GQA's dK and dV equal the repeated heads' summed over each group; dQ equal.
Verdict gradient_gqa_matches_repeated_heads(const Problem& p, const Kernel& kernel, Oracle& oracle);
// Without positions: permuting queries and keys permutes dQ, dK and dV.
Verdict gradient_permutation_equivariance(const Problem& p, const Kernel& kernel, Oracle& oracle);
// A kernel promising deterministic gradients returns the same bits on every call, with 1, 2 or 3
// workers (BackwardInputs::threads) as with its own choice.
Verdict gradient_deterministic(const Problem& p, const Kernel& kernel, Oracle& oracle);
// Sampled elements equal central differences of the exact forward (independent of the gradient
// formula: it guards the reference too).
Verdict gradient_matches_finite_difference(const Problem& p, const Kernel& kernel, Oracle& oracle);
// Logits up to 1e4 and values up to 1e15 times their own: gradients finite and within the bound.
Verdict gradient_overflow_safe(const Problem& p, const Kernel& kernel, Oracle& oracle);

// Whether a float32 kernel can hold every intermediate: sum_k |q_k k_k| (and times the scale)
// and Tk x max|v| below FLT_MAX / 4. Outside it, inf is not a kernel bug.
bool within_float_range(const Problem& p);

// Decode in each of the given chunkings (chunk sizes summing to Tk) against one-shot prefill.
Verdict decode_matches_prefill_in_chunks(const Problem& p, const Kernel& kernel, Oracle& oracle,
                                         const std::vector<std::vector<int>>& chunkings);

// What a property needs of a kernel's declaration beyond its features: without one, the property
// has nothing to check and not_covered_because says why.
struct DeclarationNeeds {
  bool cache_eviction = false;   // a cache policy that evicts
  bool block_tables = false;     // a block-table cache (page_tokens >= 1)
  bool shareable_pages = false;  // pages two sequences may share (no q8_head K or V: its scales are per sequence)
  bool merge = false;            // Kernel::merge (Capabilities::merge)
  bool packed = false;           // Kernel::forward_packed (Capabilities::packed)
  bool exact_sessions = false;   // decode sessions that keep every key (no explicit eviction policy)
  bool deterministic_backward = false;  // the promise of bitwise repeatable gradients
  bool padding = false;                 // key or query padding (the property makes rows empty with it)
};

// One row of the catalogue: everything about a property, each field named where the row is written.
struct PropertyInfo {
  std::string name;
  std::string summary;
  PropertyCheck check;
  FeatureSet required;            // features the kernel must declare for the property to mean anything
  ProblemNeeds needs;             // what its problems must have (the generators aim at it)
  bool needs_forward = true;      // false: runs through decode only
  bool through_sessions = false;  // a decode-only kernel runs it through decode sessions (session_forward.h)
  // false: its cases call no forward (merge_equals_whole judges the merge alone), so they are the
  // merge's ("merge", the path the C ABI reports for a merge), or for a packed property the packed
  // forward's ("packed"), and no (padded) forward path needs evidence in them.
  bool forward_paths = true;
  DeclarationNeeds declares;  // what else the declaration must have
};

const std::vector<PropertyInfo>& property_catalogue();
const PropertyInfo& find_property(const std::string& name);  // throws std::invalid_argument

// Why a kernel's declaration leaves the property nothing to check ("the kernel does not declare
// decode", "needs problems without positions; the contract requires causal attention"), or empty.
std::string not_covered_because(const PropertyInfo& property, const Capabilities& caps);

}  // namespace attest
