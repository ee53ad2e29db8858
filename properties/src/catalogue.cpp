#include <stdexcept>

#include "attest/properties.h"

namespace attest {

const std::vector<PropertyInfo>& property_catalogue() {
  auto always = [](const Capabilities&) { return true; };
  static const std::vector<PropertyInfo> catalogue = {
      {"matches_reference", "O and LSE within the hard bound", matches_reference, always, {}},
      {"precision_gate", "error within a calibrated factor of the loop kernel's", precision_gate,
       [](const Capabilities& c) { return c.precision == ComputePrecision::kF32; }, {}},
      {"rows_sum_to_one", "probe V = 1 outputs 1", rows_sum_to_one, always, {}},
      {"zero_masked_weight", "probe V = I: masked keys get weight 0", zero_masked_weight, always, {.max_keys = 256}},
      {"masked_inputs_have_no_influence", "poisoned masked K/V change nothing", masked_inputs_have_no_influence,
       always, {}},
      {"permutation_equivariance", "permuting rows permutes outputs", permutation_equivariance, always,
       {.position_free = true}},
      {"empty_row_policy", "empty rows follow the declared policy", empty_row_policy,
       [](const Capabilities& c) { return c.query_padding || c.key_padding; }, {}},
      {"decode_matches_prefill", "decode in any chunking equals prefill", decode_matches_prefill,
       [](const Capabilities& c) { return c.decode; }, {}},
      {"output_in_convex_hull", "outputs within [min, max] of visible values", output_in_convex_hull, always, {}},
      {"gqa_matches_repeated_heads", "GQA equals MHA with repeated K/V heads", gqa_matches_repeated_heads,
       [](const Capabilities& c) { return c.gqa; }, {.gqa = true}},
      {"slices_are_independent", "each (batch, head) alone equals the batched result", slices_are_independent,
       always, {}},
      {"rope_relative_position", "shifting all positions changes nothing", rope_relative_position,
       [](const Capabilities& c) { return c.rope && c.explicit_mask; }, {.rope = true}},
      {"overflow_safe", "logits up to 1e37 give finite outputs", overflow_safe, always, {}},
      {"deterministic_and_in_bounds", "bitwise repeatable, outputs written, guards intact",
       deterministic_and_in_bounds, always, {}},
  };
  return catalogue;
}

const PropertyInfo& find_property(const std::string& name) {
  for (const PropertyInfo& p : property_catalogue())
    if (p.name == name) return p;
  throw std::invalid_argument("unknown property '" + name + "'");
}

}  // namespace attest
