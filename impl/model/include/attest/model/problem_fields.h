// Every field of a problem, listed once. The problem-file reader and writer and the oracle's
// fingerprint are visitors over this list, so a new field cannot be missed by any of them.
// Names are dotted paths ("mask.window" is problem.mask.window in a file); ranges are what a
// reader accepts (sizes against the shape are checked by Problem::validate afterwards).
#pragma once

#include <climits>

#include "attest/model/features.h"
#include "attest/model/problem.h"

namespace attest {

inline constexpr long long kMaxDimension = 1LL << 30;
inline constexpr long long kMaxOffset = 1LL << 40;

// A visitor provides, for each kind of field:
//   integer(name, int&, lo, hi)          optional_integer(name, std::optional<int|long long>&, lo, hi)
//   number(name, double&)                optional_number(name, std::optional<double>&)   (finite)
//   boolean(name, bool&)                 precision(name, Scalar&)
//   integers(name, std::vector<int>&, lo, hi)   flags(name, std::vector<std::uint8_t>&)  (0 or 1)
//   floats(name, std::vector<float>&)    (any float, NaN and infinities included)
// `required` marks the fields a problem file must carry.
template <typename Problem_, typename Visitor>
void visit_problem_fields(Problem_& p, Visitor& v) {
  constexpr bool required = true;
  v.integer("shape.batch", p.shape.batch, 1, kMaxDimension, required);
  v.integer("shape.heads", p.shape.heads, 1, kMaxDimension, required);
  v.integer("shape.kv_heads", p.shape.kv_heads, 1, kMaxDimension, required);
  v.integer("shape.q_len", p.shape.q_len, 1, kMaxDimension, required);
  v.integer("shape.k_len", p.shape.k_len, 1, kMaxDimension, required);
  v.integer("shape.head_dim", p.shape.head_dim, 1, kMaxDimension, required);
  v.integer("shape.value_dim", p.shape.value_dim, 1, kMaxDimension, required);
  v.optional_number("scale", p.scale);
  v.optional_integer("q_offset", p.q_offset, -kMaxOffset, kMaxOffset);
  v.boolean("mask.causal", p.mask.causal);
  for (const FeatureInfo* term : integer_mask_terms())
    v.optional_integer(term->field, p.mask.*term->parameter, 1, INT_MAX);
  v.integers("mask.kv_valid", p.mask.kv_valid, 0, INT_MAX);
  v.integers("mask.q_valid", p.mask.q_valid, 0, INT_MAX);
  v.integers("mask.q_segment", p.mask.q_segment, INT_MIN, INT_MAX);
  v.integers("mask.k_segment", p.mask.k_segment, INT_MIN, INT_MAX);
  v.flags("mask.explicit_mask", p.mask.explicit_mask);
  v.boolean("rope.enabled", p.rope.enabled);
  v.number("rope.base", p.rope.base);
  v.optional_number("modifiers.softcap", p.modifiers.softcap);
  v.floats("modifiers.alibi_slopes", p.modifiers.alibi_slopes);
  v.floats("modifiers.bias", p.modifiers.bias);
  v.boolean("modifiers.bias_per_batch", p.modifiers.bias_per_batch);
  v.boolean("modifiers.bias_per_head", p.modifiers.bias_per_head);
  v.floats("modifiers.sinks", p.modifiers.sinks);
  v.precision("storage.q", p.storage.q);
  v.precision("storage.k", p.storage.k);
  v.precision("storage.v", p.storage.v);
  v.precision("storage.bias", p.storage.bias);
  v.floats("q", p.q, required);
  v.floats("k", p.k, required);
  v.floats("v", p.v, required);
}

}  // namespace attest
