#include <stdexcept>

#include "attest/kernels/packed.h"
#include "attest/properties/properties.h"
#include "attest/properties/session_forward.h"

namespace attest {

// NOLINTNEXTLINE(readability-function-size): a table, one row per property
const std::vector<PropertyInfo>& property_catalogue() {
  using F = Feature;
  static const std::vector<PropertyInfo> catalogue = {
      {.name = "matches_reference", .summary = "O and LSE within the hard bound", .check = matches_reference},
      {.name = "precision_gate",
       .summary = "error within a calibrated factor of the model kernel's",
       .check = precision_gate},
      {.name = "rows_sum_to_one", .summary = "probe V = 1 outputs 1", .check = rows_sum_to_one},
      {.name = "zero_masked_weight",
       .summary = "probe V = I: masked keys get weight 0",
       .check = zero_masked_weight,
       .needs = {.masked = true, .max_keys = 256}},
      {.name = "masked_inputs_have_no_influence",
       .summary = "poisoned masked K, then V, change nothing",
       .check = masked_inputs_have_no_influence,
       .needs = {.masked = true},
       .through_sessions = true},
      {.name = "permutation_equivariance",
       .summary = "permuting rows permutes outputs",
       .check = permutation_equivariance,
       .needs = {.position_free = true}},
      {.name = "empty_row_policy",
       .summary = "empty rows follow the declared policy",
       .check = empty_row_policy,
       .declares = {.padding = true}},
      {.name = "decode_matches_prefill",
       .summary = "decode in any chunking equals prefill",
       .check = decode_matches_prefill,
       .required = {F::kDecode},
       .needs = {.unmasks_keys = true},
       .needs_forward = false,
       .declares = {.exact_sessions = true}},
      {.name = "eviction_matches_retained_set",
       .summary = "an evicting decoder equals exact attention over the positions it keeps",
       .check = eviction_matches_retained_set,
       .required = {F::kDecode},
       .needs = {.unmasks_keys = true},
       .needs_forward = false,
       .declares = {.cache_eviction = true}},
      {.name = "ragged_batch_equals_single",
       .summary = "block tables: a ragged batch equals each sequence alone",
       .check = ragged_batch_equals_single,
       .required = {F::kDecode},
       .needs = {.unmasks_keys = true},
       .needs_forward = false,
       .declares = {.block_tables = true}},
      {.name = "page_order_invariance",
       .summary = "block tables: permuting physical pages changes nothing",
       .check = page_order_invariance,
       .required = {F::kDecode},
       .needs = {.unmasks_keys = true},
       .needs_forward = false,
       .declares = {.block_tables = true}},
      {.name = "shared_prefix_equals_private",
       .summary = "block tables: shared prefix pages equal private copies, copy on write",
       .check = shared_prefix_equals_private,
       .required = {F::kDecode},
       .needs = {.unmasks_keys = true},
       .needs_forward = false,
       .declares = {.block_tables = true, .shareable_pages = true}},
      {.name = "output_in_convex_hull",
       .summary = "outputs within [min, max] of visible values",
       .check = output_in_convex_hull},
      {.name = "gqa_matches_repeated_heads",
       .summary = "GQA equals MHA with repeated K/V heads",
       .check = gqa_matches_repeated_heads,
       .required = {F::kGqa},
       .needs = {.gqa = true}},
      {.name = "slices_are_independent",
       .summary = "each (batch, head) alone equals the batched result",
       .check = slices_are_independent,
       .needs = {.several_slices = true}},
      {.name = "rope_relative_position",
       .summary = "shifting all positions changes nothing",
       .check = rope_relative_position,
       .required = {F::kRope, F::kExplicitMask},
       .needs = {.rope = true, .moves_positions = true, .unmasks_keys = true}},
      {.name = "overflow_safe",
       .summary = "logits up to 1e37 give finite outputs",
       .check = overflow_safe,
       .through_sessions = true},
      {.name = "deterministic_and_in_bounds",
       .summary = "bitwise repeatable, outputs written, guards intact",
       .check = deterministic_and_in_bounds},
      {.name = "bias_minus_inf_equals_mask",
       .summary = "a -inf bias entry equals masking that key",
       .check = bias_minus_inf_equals_mask,
       .required = {F::kBias, F::kExplicitMask}},
      {.name = "alibi_matches_bias",
       .summary = "ALiBi slopes equal the same terms as an explicit bias",
       .check = alibi_matches_bias,
       .required = {F::kAlibi, F::kBias}},
      {.name = "softcap_saturates",
       .summary = "capped logits: finite at any Q scale, no weight below the cap's floor",
       .check = softcap_saturates,
       .required = {F::kSoftcap},
       .needs = {.max_keys = 256}},
      {.name = "sink_takes_mass",
       .summary = "probe V = 1 with sinks outputs 1 - exp(sigma - LSE)",
       .check = sink_takes_mass,
       .required = {F::kSinks}},
      // Backward (docs/design.md#backward).
      {.name = "gradient_matches_reference",
       .summary = "dQ, dK, dV, dsinks within the gradient bound",
       .check = gradient_matches_reference,
       .required = {F::kBackward}},
      {.name = "gradient_precision_gate",
       .summary = "gradient error within a calibrated factor of the loop backward's",
       .check = gradient_precision_gate,
       .required = {F::kBackward}},
      {.name = "gradient_masked_keys_zero",
       .summary = "poisoned masked keys get dK = dV = 0 exactly",
       .check = gradient_masked_keys_zero,
       .required = {F::kBackward},
       .needs = {.masked = true, .hides_keys = true}},
      {.name = "gradient_dv_is_pt_do",
       .summary = "dO one-hot: dV's columns are rows of P",
       .check = gradient_dv_is_pt_do,
       .required = {F::kBackward}},
      {.name = "gradient_ds_rows_sum_to_zero",
       .summary = "equal keys: dQ = 0 (rows of dS sum to 0)",
       .check = gradient_ds_rows_sum_to_zero,
       .required = {F::kBackward}},
      {.name = "gradient_empty_rows_contribute_nothing",
       .summary = "empty rows: dQ = 0, nothing else changes",
       .check = gradient_empty_rows_contribute_nothing,
       .required = {F::kBackward},
       .declares = {.padding = true}},
      {.name = "gradient_gqa_matches_repeated_heads",
       .summary = "GQA gradients equal repeated heads summed per group",
       .check = gradient_gqa_matches_repeated_heads,
       .required = {F::kBackward, F::kGqa},
       .needs = {.gqa = true}},
      {.name = "gradient_permutation_equivariance",
       .summary = "permuting rows permutes the gradients",
       .check = gradient_permutation_equivariance,
       .required = {F::kBackward},
       .needs = {.position_free = true}},
      {.name = "gradient_deterministic",
       .summary = "bitwise repeatable gradients when promised",
       .check = gradient_deterministic,
       .required = {F::kBackward},
       .declares = {.deterministic_backward = true}},
      {.name = "gradient_matches_finite_difference",
       .summary = "sampled gradients equal central differences of the exact forward",
       .check = gradient_matches_finite_difference,
       .required = {F::kBackward},
       .needs = {.max_keys = 256}},
      {.name = "gradient_overflow_safe",
       .summary = "logits up to 1e4, values x 1e15: finite gradients within the bound",
       .check = gradient_overflow_safe,
       .required = {F::kBackward}},
      // Merging partial states (Kernel::merge).
      {.name = "merge_equals_whole",
       .summary = "exact states of a drawn key partition merge to the exact whole",
       .check = merge_equals_whole,
       .forward_paths = false,
       .declares = {.merge = true}},
      {.name = "split_invariance",
       .summary = "forwards over drawn key splits, merged by the kernel, equal the whole",
       .check = split_invariance,
       .required = {F::kExplicitMask, F::kLse},
       .declares = {.merge = true}},
      // The packed varlen layout (Kernel::forward_packed).
      {.name = "packed_equals_padded",
       .summary = "packed varlen calls equal the padded batch's exact reference, per sequence",
       .check = packed_equals_padded,
       .needs = {.unmasks_keys = true},  // drops segments, explicit masks and biases; redraws padding
       .forward_paths = false,
       .declares = {.packed = true}},
      {.name = "sequences_do_not_interact",
       .summary = "editing one packed sequence changes no other sequence's outputs",
       .check = sequences_do_not_interact,
       .needs = {.unmasks_keys = true},
       .forward_paths = false,
       .declares = {.packed = true}},
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
  const DeclarationNeeds& declares = property.declares;
  if (declares.cache_eviction && !caps.cache.evicts()) return "the kernel declares no cache eviction";
  if (declares.merge && !caps.merge) return "the kernel declares no merge";
  if (declares.packed && !caps.packed) return "the kernel declares no packed layout";
  if (declares.packed && !packed_storage(caps))
    return "a packed call is float32; the kernel stores Q, K, V or O otherwise";
  if (declares.block_tables && caps.page_tokens < 1) return "the kernel declares no block-table cache";
  if (declares.shareable_pages && (caps.precision.k == Scalar::kQ8Head || caps.precision.v == Scalar::kQ8Head))
    return "q8_head scales are a sequence's own: its pages are not shared";
  if (declares.exact_sessions && !exact_sessions(caps))
    return "the kernel's cache evicts at will (explicit policy): eviction_matches_retained_set holds its sessions";
  if (declares.deterministic_backward && !caps.deterministic_backward)
    return "the kernel does not promise deterministic gradients";
  if (declares.padding && !caps.declares(Feature::kQueryPadding) && !caps.declares(Feature::kKeyPadding))
    return "makes rows empty through padding; the kernel declares neither key_padding nor query_padding";
  return cannot_cover(property.needs, caps);
}

}  // namespace attest
