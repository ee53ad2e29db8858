#include <stdexcept>

#include "attest/properties.h"
#include "attest/session_forward.h"

namespace attest {

const std::vector<PropertyInfo>& property_catalogue() {
  using F = Feature;
  static const std::vector<PropertyInfo> catalogue = {
      {"matches_reference", "O and LSE within the hard bound", matches_reference, {}, {}},
      {"precision_gate", "error within a calibrated factor of the model kernel's", precision_gate, {}, {}},
      {"rows_sum_to_one", "probe V = 1 outputs 1", rows_sum_to_one, {}, {}},
      {"zero_masked_weight", "probe V = I: masked keys get weight 0", zero_masked_weight, {},
       {.masked = true, .max_keys = 256}},
      {"masked_inputs_have_no_influence", "poisoned masked K, then V, change nothing",
       masked_inputs_have_no_influence, {}, {.masked = true}, true, true},
      {"permutation_equivariance", "permuting rows permutes outputs", permutation_equivariance, {},
       {.position_free = true}},
      {"empty_row_policy", "empty rows follow the declared policy", empty_row_policy, {}, {}},
      {"decode_matches_prefill", "decode in any chunking equals prefill", decode_matches_prefill, {F::kDecode},
       {.unmasks_keys = true}, false},
      {"eviction_matches_retained_set", "an evicting decoder equals exact attention over the positions it keeps",
       eviction_matches_retained_set, {F::kDecode}, {.unmasks_keys = true}, false},
      {"ragged_batch_equals_single", "block tables: a ragged batch equals each sequence alone",
       ragged_batch_equals_single, {F::kDecode}, {.unmasks_keys = true}, false},
      {"page_order_invariance", "block tables: permuting physical pages changes nothing", page_order_invariance,
       {F::kDecode}, {.unmasks_keys = true}, false},
      {"shared_prefix_equals_private", "block tables: shared prefix pages equal private copies, copy on write",
       shared_prefix_equals_private, {F::kDecode}, {.unmasks_keys = true}, false},
      {"output_in_convex_hull", "outputs within [min, max] of visible values", output_in_convex_hull, {}, {}},
      {"gqa_matches_repeated_heads", "GQA equals MHA with repeated K/V heads", gqa_matches_repeated_heads,
       {F::kGqa}, {.gqa = true}},
      {"slices_are_independent", "each (batch, head) alone equals the batched result", slices_are_independent, {},
       {.several_slices = true}},
      {"rope_relative_position", "shifting all positions changes nothing", rope_relative_position,
       {F::kRope, F::kExplicitMask}, {.rope = true, .moves_positions = true, .unmasks_keys = true}},
      {"overflow_safe", "logits up to 1e37 give finite outputs", overflow_safe, {}, {}, true, true},
      {"deterministic_and_in_bounds", "bitwise repeatable, outputs written, guards intact",
       deterministic_and_in_bounds, {}, {}},
      {"bias_minus_inf_equals_mask", "a -inf bias entry equals masking that key", bias_minus_inf_equals_mask,
       {F::kBias, F::kExplicitMask}, {}},
      {"alibi_matches_bias", "ALiBi slopes equal the same terms as an explicit bias", alibi_matches_bias,
       {F::kAlibi, F::kBias}, {}},
      {"softcap_saturates", "capped logits: finite at any Q scale, no weight below the cap's floor",
       softcap_saturates, {F::kSoftcap}, {.max_keys = 256}},
      {"sink_takes_mass", "probe V = 1 with sinks outputs 1 - exp(sigma - LSE)", sink_takes_mass, {F::kSinks}, {}},
      // Backward (docs/design.md#backward).
      {"gradient_matches_reference", "dQ, dK, dV, dsinks within the gradient bound", gradient_matches_reference,
       {F::kBackward}, {}},
      {"gradient_precision_gate", "gradient error within a calibrated factor of the loop backward's",
       gradient_precision_gate, {F::kBackward}, {}},
      {"gradient_masked_keys_zero", "poisoned masked keys get dK = dV = 0 exactly", gradient_masked_keys_zero,
       {F::kBackward}, {.masked = true, .hides_keys = true}},
      {"gradient_dv_is_pt_do", "dO one-hot: dV's columns are rows of P", gradient_dv_is_pt_do, {F::kBackward}, {}},
      {"gradient_ds_rows_sum_to_zero", "equal keys: dQ = 0 (rows of dS sum to 0)", gradient_ds_rows_sum_to_zero,
       {F::kBackward}, {}},
      {"gradient_empty_rows_contribute_nothing", "empty rows: dQ = 0, nothing else changes",
       gradient_empty_rows_contribute_nothing, {F::kBackward}, {}},
      {"gradient_gqa_matches_repeated_heads", "GQA gradients equal repeated heads summed per group",
       gradient_gqa_matches_repeated_heads, {F::kBackward, F::kGqa}, {.gqa = true}},
      {"gradient_permutation_equivariance", "permuting rows permutes the gradients", gradient_permutation_equivariance,
       {F::kBackward}, {.position_free = true}},
      {"gradient_deterministic", "bitwise repeatable gradients when promised", gradient_deterministic,
       {F::kBackward}, {}},
      {"gradient_matches_finite_difference", "sampled gradients equal central differences of the exact forward",
       gradient_matches_finite_difference, {F::kBackward}, {.max_keys = 256}},
      {"gradient_overflow_safe", "logits up to 1e4, values x 1e15: finite gradients within the bound",
       gradient_overflow_safe, {F::kBackward}, {}},
  };
  return catalogue;
}

const PropertyInfo& find_property(const std::string& name) {
  for (const PropertyInfo& p : property_catalogue())
    if (p.name == name) return p;
  throw std::invalid_argument("unknown property '" + name + "'");
}

std::string not_covered_because(const PropertyInfo& property, const Capabilities& caps) {
  const FeatureSet missing = property.required.minus(caps.features);
  if (!missing.empty()) return "the kernel does not declare " + missing.joined(" or ");
  if (property.needs_forward && !caps.forward() && !(property.through_sessions && caps.decode()))
    return "needs a forward call; the kernel is decode-only";
  if (property.needs_forward && !caps.forward() && !exact_sessions(caps))
    return "needs a forward call; the kernel is decode-only and evicts at will (explicit cache policy)";
  if (property.name == "eviction_matches_retained_set" && !caps.cache.evicts())
    return "the kernel declares no cache eviction";
  const bool block_tables = property.name == "ragged_batch_equals_single" ||
                            property.name == "page_order_invariance" || property.name == "shared_prefix_equals_private";
  if (block_tables && caps.page_tokens < 1) return "the kernel declares no block-table cache";
  if (property.name == "shared_prefix_equals_private" &&
      (caps.precision.k == Scalar::kQ8Head || caps.precision.v == Scalar::kQ8Head))
    return "q8_head scales are a sequence's own: its pages are not shared";
  if (property.name == "decode_matches_prefill" && !exact_sessions(caps))
    return "the kernel's cache evicts at will (explicit policy): eviction_matches_retained_set holds its sessions";
  if (property.name == "gradient_deterministic" && !caps.deterministic_backward)
    return "the kernel does not promise deterministic gradients";
  if ((property.name == "empty_row_policy" || property.name == "gradient_empty_rows_contribute_nothing") &&
      !caps.declares(Feature::kQueryPadding) &&
      !caps.declares(Feature::kKeyPadding))
    return "makes rows empty through padding; the kernel declares neither key_padding nor query_padding";
  return cannot_cover(property.needs, caps);
}

}  // namespace attest
