#include "attest/model/features.h"

#include <stdexcept>

namespace attest {
namespace {

bool uses_causal(const Problem& p) { return p.mask.causal; }
bool uses_key_padding(const Problem& p) { return !p.mask.kv_valid.empty(); }
bool uses_query_padding(const Problem& p) { return !p.mask.q_valid.empty(); }
bool uses_segments(const Problem& p) { return !p.mask.q_segment.empty(); }
bool uses_explicit_mask(const Problem& p) { return !p.mask.explicit_mask.empty(); }
bool uses_softcap(const Problem& p) { return p.modifiers.softcap.has_value(); }
bool uses_alibi(const Problem& p) { return !p.modifiers.alibi_slopes.empty(); }
bool uses_bias(const Problem& p) { return !p.modifiers.bias.empty(); }
bool uses_sinks(const Problem& p) { return !p.modifiers.sinks.empty(); }
bool uses_gqa(const Problem& p) { return p.shape.kv_heads < p.shape.heads; }
bool uses_rope(const Problem& p) { return p.rope.enabled; }

void remove_causal(Problem& p) { p.mask.causal = false; }
void remove_key_padding(Problem& p) { p.mask.kv_valid.clear(); }
void remove_query_padding(Problem& p) { p.mask.q_valid.clear(); }
void remove_segments(Problem& p) { p.mask.q_segment.clear(), p.mask.k_segment.clear(); }
void remove_explicit_mask(Problem& p) { p.mask.explicit_mask.clear(); }
void remove_softcap(Problem& p) { p.modifiers.softcap.reset(); }
void remove_alibi(Problem& p) { p.modifiers.alibi_slopes.clear(); }
void remove_bias(Problem& p) { p.modifiers.bias.clear(); }
void remove_sinks(Problem& p) { p.modifiers.sinks.clear(); }
void remove_gqa(Problem& p) { p.shape.kv_heads = p.shape.heads; }
void remove_rope(Problem& p) { p.rope.enabled = false; }
void remove_nothing(Problem&) {}

}  // namespace

const std::array<FeatureInfo, kFeatureCount>& feature_table() {
  using K = FeatureKind;
  static const std::array<FeatureInfo, kFeatureCount> table = {{
      {Feature::kCausal, "causal", K::kMaskTerm, 1u << 0, true, uses_causal, remove_causal,
       "key j visible iff j <= qpos(i)"},
      {Feature::kWindow, "window", K::kMaskTerm, 1u << 1, true, nullptr, nullptr, "sliding window: qpos(i) - j < w",
       &MaskSpec::window, "mask.window"},
      {Feature::kChunk, "chunk", K::kMaskTerm, 1u << 10, true, nullptr, nullptr,
       "chunked local attention: floor(qpos(i) / c) == floor(j / c)", &MaskSpec::chunk, "mask.chunk", true},
      {Feature::kLookahead, "lookahead", K::kMaskTerm, 1u << 15, true, nullptr, nullptr,
       "keys ahead of the query: j - qpos(i) < a (FlashAttention's right window)", &MaskSpec::lookahead,
       "mask.lookahead"},
      {Feature::kKeyPadding, "key_padding", K::kMaskTerm, 1u << 2, true, uses_key_padding, remove_key_padding,
       "j < kv_valid[b]"},
      {Feature::kQueryPadding, "query_padding", K::kMaskTerm, 1u << 3, true, uses_query_padding, remove_query_padding,
       "query i sees nothing unless i < q_valid[b]"},
      {Feature::kSegments, "segments", K::kMaskTerm, 1u << 4, false, uses_segments, remove_segments,
       "packed sequences: q_segment[b][i] == k_segment[b][j]"},
      {Feature::kExplicitMask, "explicit_mask", K::kMaskTerm, 1u << 5, false, uses_explicit_mask, remove_explicit_mask,
       "a boolean [B][Tq][Tk] mask, broadcast over heads"},
      {Feature::kSoftcap, "softcap", K::kModifier, 1u << 11, false, uses_softcap, remove_softcap,
       "logit softcap c tanh(x / c)"},
      {Feature::kAlibi, "alibi", K::kModifier, 1u << 12, true, uses_alibi, remove_alibi,
       "ALiBi: slope[h] * (j - qpos(i)) added to the logit"},
      {Feature::kBias, "bias", K::kModifier, 1u << 13, false, uses_bias, remove_bias,
       "an additive float bias [B|1][H|1][Tq][Tk]; -inf masks a key"},
      {Feature::kSinks, "sinks", K::kModifier, 1u << 14, false, uses_sinks, remove_sinks,
       "attention sinks: one logit per query head in the denominator only"},
      {Feature::kGqa, "gqa", K::kStructure, 1u << 6, false, uses_gqa, remove_gqa,
       "Hkv < H: query head h reads kv head h / (H / Hkv)"},
      {Feature::kRope, "rope", K::kStructure, 1u << 8, true, uses_rope, remove_rope,
       "rotary position embedding inside the kernel"},
      {Feature::kLse, "lse", K::kStructure, 1u << 7, false, nullptr, remove_nothing,
       "writes the log-sum-exp of every row"},
      {Feature::kDecode, "decode", K::kStructure, 1u << 9, false, nullptr, remove_nothing,
       "incremental decode over a KV cache"},
      {Feature::kBackward, "backward", K::kStructure, 1u << 16, false, nullptr, remove_nothing,
       "gradients dQ, dK, dV (and dsinks) from dO (docs/design.md#backward)"},
  }};
  return table;
}

const std::vector<const FeatureInfo*>& integer_mask_terms() {
  static const std::vector<const FeatureInfo*> terms = [] {
    std::vector<const FeatureInfo*> out;
    for (const FeatureInfo& i : feature_table())
      if (i.parameter) out.push_back(&i);
    return out;
  }();
  return terms;
}

MaskSpec integer_mask_terms_of(const MaskSpec& m) {
  MaskSpec out;
  for (const FeatureInfo* term : integer_mask_terms()) out.*term->parameter = m.*term->parameter;
  return out;
}

bool uses_feature(const FeatureInfo& i, const Problem& p) {
  if (i.parameter) return (p.mask.*i.parameter).has_value();
  return i.used_by && i.used_by(p);
}

void remove_feature(const FeatureInfo& i, Problem& p) {
  if (i.parameter) return (p.mask.*i.parameter).reset();
  i.remove(p);
}

const FeatureInfo& info(Feature f) { return feature_table()[static_cast<std::size_t>(f)]; }

std::optional<Feature> feature_named(std::string_view name) {
  for (const FeatureInfo& i : feature_table())
    if (name == i.name) return i.feature;
  return std::nullopt;
}

FeatureSet FeatureSet::all() {
  FeatureSet s;
  for (const FeatureInfo& i : feature_table()) s.insert(i.feature);
  return s;
}

FeatureSet FeatureSet::of_kind(FeatureKind kind) {
  FeatureSet s;
  for (const FeatureInfo& i : feature_table())
    if (i.kind == kind) s.insert(i.feature);
  return s;
}

std::vector<Feature> FeatureSet::members() const {
  std::vector<Feature> out;
  for (const FeatureInfo& i : feature_table())
    if (contains(i.feature)) out.push_back(i.feature);
  return out;
}

std::vector<std::string> FeatureSet::names() const {
  std::vector<std::string> out;
  for (Feature f : members()) out.push_back(info(f).name);
  return out;
}

std::string FeatureSet::joined(const char* separator) const {
  std::string out;
  for (const std::string& n : names()) out += (out.empty() ? "" : separator) + n;
  return out;
}

std::uint32_t FeatureSet::abi_bits() const {
  std::uint32_t bits = 0;
  for (Feature f : members()) bits |= info(f).abi_bit;
  return bits;
}

FeatureSet FeatureSet::from_abi_bits(std::uint32_t bits) {
  FeatureSet s;
  for (const FeatureInfo& i : feature_table())
    if (bits & i.abi_bit) s.insert(i.feature);
  return s;
}

FeatureSet features_used_by(const Problem& p) {
  FeatureSet s;
  for (const FeatureInfo& i : feature_table())
    if (uses_feature(i, p)) s.insert(i.feature);
  return s;
}

}  // namespace attest
