// The packed variable-length layout (docs/design.md#packed-batches): every sequence's tokens one
// after another with cu_seqlens offsets and no padding, as FlashAttention's varlen functions,
// FlashInfer's ragged prefill and cuDNN's THD layout take them.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "attest/model/problem.h"

namespace attest {

// Sequence b has queries cu_seqlens_q[b] .. cu_seqlens_q[b + 1] and keys cu_seqlens_k[b] ..
// cu_seqlens_k[b + 1] (either may be empty). Query i of a sequence sits at position q_offset + i
// (the same q_offset for every sequence), key j at j; the problem's mask terms and score
// modifiers apply within each sequence, and nothing crosses from one sequence to another.
struct PackedCall {
  // The rest of the problem: batch = sequences, heads, widths, scale, q_offset (explicit), causal
  // and the integer terms, RoPE, softcap, ALiBi, sinks; q_len and k_len are the max_seqlens (at
  // least 1). No q, k, v, padding, segments, explicit mask or bias.
  Problem terms;
  std::vector<std::int32_t> cu_seqlens_q, cu_seqlens_k;  // [B + 1], from 0, non-decreasing
  int max_seqlen_q = 0, max_seqlen_k = 0;                // the longest sequence of each
  std::vector<float> q;                                  // [total_q][H][Dk]
  std::vector<float> k;                                  // [total_k][Hkv][Dk]
  std::vector<float> v;                                  // [total_k][Hkv][Dv]

  int sequences() const { return static_cast<int>(cu_seqlens_q.size()) - 1; }
  std::int32_t total_q() const { return cu_seqlens_q.back(); }
  std::int32_t total_k() const { return cu_seqlens_k.back(); }
  std::size_t o_size() const;    // [total_q][H][Dv]
  std::size_t lse_size() const;  // [H][total_q], FlashAttention's order
};

// Whether a padded problem has a packed form: no segments, explicit mask or bias (they are indexed
// by padded positions). Empty when it has, else why not. A packed call is float32: the values of
// a problem stored otherwise are sent as floats.
std::string packed_form_refused(const Problem& padded);

// The packed call of a padded problem: sequence b keeps queries i < q_valid[b] and keys
// j < kv_valid[b] (all of them without padding). Throws ProblemError when it has no packed form.
PackedCall packed_call_of(const Problem& padded);

// Throws ProblemError naming what is wrong: offsets not from 0 or decreasing, max_seqlens that are
// not the longest sequence, buffers of other sizes, terms a packed call does not carry.
void check_packed_call(const PackedCall& call, std::span<const float> o, std::span<const float> lse);

// A packed call's outputs in the padded problem's layout: row i of sequence b from packed row
// cu_seqlens_q[b] + i; a padded query row (i >= q_valid[b]) is an empty row written as `nan_rows`
// says (O NaN, else O = 0 and LSE = -inf). lse is empty when `packed_lse` is.
void unpack_outputs(const Problem& padded, const PackedCall& call, std::span<const float> packed_o,
                    std::span<const float> packed_lse, bool nan_rows, std::vector<float>& o, std::vector<float>& lse);

}  // namespace attest
