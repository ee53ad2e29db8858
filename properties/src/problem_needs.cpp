#include "attest/properties/problem_needs.h"

#include <fmt/format.h>

#include <algorithm>

namespace attest {

const std::vector<std::pair<int, int>>& head_pairs() {
  static const std::vector<std::pair<int, int>> pairs = {{1, 1}, {2, 2}, {2, 1}, {4, 2},
                                                         {4, 1}, {3, 1}, {4, 4}, {8, 2}};
  return pairs;
}

std::vector<std::pair<int, int>> head_configs(const Capabilities& caps, const ProblemNeeds& needs) {
  std::vector<std::pair<int, int>> out;
  for (auto [h, kv] : head_pairs()) {
    if (kv < h && !caps.declares(Feature::kGqa)) continue;
    if (needs.gqa && kv == h) continue;
    if (!caps.contract.heads.contains(h)) continue;
    out.push_back({h, kv});
  }
  return out;
}

std::string cannot_cover(const ProblemNeeds& needs, const Capabilities& caps) {
  const FeatureSet masks = caps.features & FeatureSet::of_kind(FeatureKind::kMaskTerm);
  if (needs.gqa && !caps.declares(Feature::kGqa)) return "needs GQA (Hkv < H); the kernel does not declare gqa";
  if (head_configs(caps, needs).empty()) return "needs head counts the contract does not allow";
  if (needs.rope && !caps.declares(Feature::kRope)) return "needs RoPE; the kernel does not declare rope";
  if (needs.masked && masks.empty()) return "needs masked keys; the kernel declares no mask term";
  if (needs.hides_keys && caps.contract.causal_required &&
      (caps.features & FeatureSet{Feature::kKeyPadding, Feature::kQueryPadding, Feature::kWindow, Feature::kChunk,
                                  Feature::kSegments, Feature::kExplicitMask, Feature::kBias})
          .empty())
    return "needs keys no row sees; under the contract's bottom-right causal mask the last row sees every key, and "
           "the kernel declares no other term that hides one (padding, window, chunk, segments, explicit mask, bias)";
  if (needs.position_free && caps.contract.causal_required)
    return "needs problems without positions (no causal mask); the contract requires causal attention";
  if (needs.moves_positions && caps.contract.self_attention_only)
    return "moves every position by prepending keys (Tk and q_offset grow); the contract requires self-attention";
  const Range& offsets = caps.contract.q_offset;
  if (needs.moves_positions && !offsets.unlimited() && offsets.min >= std::min(offsets.max, kMaxContractOffset))
    return fmt::format(
        "moves every position by prepending keys (q_offset grows); the contract's q_offset takes {} only", offsets.min);
  const Range& keys = caps.contract.k_len;
  if (needs.moves_positions && !keys.unlimited() && keys.min >= keys.max)
    return fmt::format("moves every position by prepending keys (Tk grows); the contract's Tk takes {} only", keys.min);
  if (needs.several_slices && caps.contract.batch.max == 1 && caps.contract.heads.max == 1)
    return "needs more than one (batch, head); the contract allows B = H = 1 only";
  return {};
}

}  // namespace attest
