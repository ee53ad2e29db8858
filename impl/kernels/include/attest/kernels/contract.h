// A kernel's contract: the problems it accepts (ABI v2's attest_contract). attest generates
// only problems inside it; UNSUPPORTED on a problem inside it is a failure; a property that
// needs problems outside it is reported as not covered, with the reason.
#pragma once

#include <string>
#include <vector>

#include "attest/model/problem.h"

namespace attest {

// ALiBi slopes a kernel accepts: any, or only the standard geometric set it computes from H (and
// max_bias) itself, as most libraries do.
enum class AlibiSlopes { kArbitrary, kStandard };
// The standard set (the ALiBi paper's, and llama.cpp's with max_bias): n = 2^floor(log2 H),
// slope h = m0^(h+1) for h < n, else m1^(2(h-n)+1), with m0 = 2^(-max_bias/n), m1 = 2^(-max_bias/(2n)).
std::vector<float> standard_alibi_slopes(int heads, double max_bias = 8.0);

// [b][j]: whether some query of batch entry b sees key j in some head (its mask and modifiers: a
// -inf bias or a softcap mask hides a key). Keys nobody sees may hold anything the input domain
// allows; in O(B x (Tq + Tk)) unless the mask is elementwise or there is a bias.
std::vector<std::vector<char>> keys_seen(const Problem& p);

// Inclusive; {0, 0} is no limit.
struct Range {
  long long min = 0, max = 0;
  bool unlimited() const { return min == 0 && max == 0; }
  bool contains(long long x) const { return unlimited() || (x >= min && x <= max); }
  long long clamp(long long x) const { return unlimited() ? x : x < min ? min : x > max ? max : x; }
  bool operator==(const Range&) const = default;
};

// What attest can draw for a contract: a contract whose smallest admitted problem is
// larger than these, or whose tiles are, is refused with one line, because attest would have to
// build problems of gigabytes to test it. q_offset must admit a value within +-kMaxContractOffset
// (2^40: beyond it a correct kernel's positions were no longer exact); draws stay inside that.
inline constexpr long long kMaxContractMinHeadDim = 1024, kMaxContractMinBatch = 64, kMaxContractMinHeads = 256,
                           kMaxContractMinLength = 65536, kMaxContractTile = 4096, kMaxContractOffset = 1LL << 40;
// The loosest exp a descriptor may declare (precision.exp_ulps), in ulps of the score type.
inline constexpr double kMaxExpUlps = 128;

struct Contract {
  std::vector<int> head_dims;  // empty: any width within head_dim
  Range head_dim, batch, heads, q_len, k_len, q_offset;
  bool dk_equals_dv = false;
  // Dv apart from Dk (ABI 2.7): the widths V and O may have. Unlimited and empty: Dk's range
  // (head_dim, not head_dims), as before 2.7; a quantized V needs its own (q4_0: multiples of 32).
  Range value_dim;
  std::vector<int> value_dims;  // empty: any width within value_dim (or head_dim)
  bool default_scale_only = false;
  bool causal_required = false;      // bottom-right causal only
  bool decode_only = false;          // no forward
  bool self_attention_only = false;  // Tq == Tk and q_offset 0 only (a training kernel's shape)
  AlibiSlopes alibi_slopes = AlibiSlopes::kArbitrary;
  // ALiBi and a bias never in one problem (ABI 2.7): ggml's single mask input takes either.
  bool alibi_excludes_bias = false;
  double alibi_max_bias = 8.0;  // with kStandard
  // The largest |V| of a visible key the kernel is built for (0: any): an unnormalised 16-bit P.V
  // sum holds up to keys x |V|. attest draws values within it; masked keys follow `inputs`.
  double max_abs_value = 0.0;
  int query_tile = 0, key_tile = 0;  // the kernel's tiles (0: none)
  bool decode_lse_optional = false;

  // Why p lies outside the contract ("Dk = 48 is not one of 64, 128"), or empty when inside.
  std::string violation(const Problem& p) const;
  // Whether the head width d (as Dk, and as Dv when dk_equals_dv) is accepted.
  bool accepts_head_dim(int d) const;
  // Whether Dv = dv is accepted next to Dk = dk.
  bool accepts_value_dim(int dv, int dk) const;
  // The accepted Dv nearest to `wanted` next to Dk = dk (dk itself with dk_equals_dv; ties go to the
  // smaller, cheaper width), or `wanted` clamped when no width is accepted.
  int fit_value_dim(int wanted, int dk) const;
  // The range Dv is drawn from: value_dim, or head_dim when value_dim is unlimited.
  const Range& value_dim_range() const { return value_dim.unlimited() ? head_dim : value_dim; }
  // A length near t that Tq and Tk may both take (for a self-attention contract): inside both
  // ranges whenever they meet.
  int square_length(int t) const { return static_cast<int>(k_len.clamp(q_len.clamp(t))); }
  // Gives p's ALiBi slopes (if any) the standard set when the contract accepts only that.
  void fit_alibi_slopes(Problem& p) const;
  // With alibi_excludes_bias, a problem holding both keeps the bias (keep_bias) or its ALiBi slopes.
  void fit_alibi_or_bias(Problem& p, bool keep_bias) const;
  // One line for tables and verdicts: "Dk in {64, 128}, Dk == Dv, default scale, causal only".
  std::string summary() const;
  // Whether nothing is restricted (a version-1 kernel's contract).
  bool open() const;
  bool operator==(const Contract&) const = default;
};

}  // namespace attest
