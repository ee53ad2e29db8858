#include "attest/properties/session_forward.h"

#include <algorithm>
#include <cmath>

#include "attest/model/quantized.h"
#include "problem_edits.h"

namespace attest {

FeatureSet session_features() {
  FeatureSet s{Feature::kCausal, Feature::kSoftcap, Feature::kAlibi, Feature::kSinks,
               Feature::kGqa,    Feature::kRope,    Feature::kLse};
  for (const FeatureInfo* term : integer_mask_terms()) s.insert(term->feature);
  return s;
}

namespace {

class SessionForward final : public Kernel {
 public:
  explicit SessionForward(const Kernel& decoder) : decoder_(decoder) {}
  std::string name() const override { return decoder_.name(); }
  Capabilities capabilities() const override {
    Capabilities c = decoder_.capabilities();
    c.features = (c.features | FeatureSet{Feature::kCausal}) & session_features();
    c.contract.decode_only = false;
    c.contract.causal_required = true;  // a session is bottom-right causal, from position 0:
    if (c.contract.q_offset.unlimited()) c.contract.q_offset = {0, kMaxContractOffset};  // Tq <= Tk
    // An evicting cache is exact attention up to its first eviction: the stand-in takes no more keys.
    if (const long long keep = c.cache.exact_up_to(); c.cache.evicts() && keep > 0)
      c.contract.k_len = {c.contract.k_len.unlimited() ? 1 : c.contract.k_len.min,
                          c.contract.k_len.unlimited() ? keep : std::min(c.contract.k_len.max, keep)};
    return c;
  }
  // Positions 0 .. Tk - Tq - 1 are decoded first with stand-in queries (their outputs are not
  // the problem's), then the problem's Tq rows one token per step, as a decoder serves them.
  void forward(const Problem& p, std::span<float> o, std::span<float> lse) const override {
    const Shape& s = p.shape;
    const int prefix = s.k_len - s.q_len;
    Problem prefill = p;
    prefill.shape.q_len = s.k_len;
    prefill.q_offset.reset();
    prefill.q.clear();
    for (int bh = 0; bh < s.batch * s.heads; ++bh)
      for (int t = 0; t < s.k_len; ++t) {
        const auto row = p.q.begin() + (std::size_t(bh) * s.q_len + std::max(0, t - prefix)) * s.head_dim;
        prefill.q.insert(prefill.q.end(), row, row + s.head_dim);
      }
    std::vector<int> chunks;
    if (prefix > 0) chunks.push_back(prefix);
    chunks.insert(chunks.end(), s.q_len, 1);
    const Outputs decoded = run_decode(decoder_, prefill, chunks, !lse.empty());
    for (int bh = 0; bh < s.batch * s.heads; ++bh)
      for (int i = 0; i < s.q_len; ++i) {
        const std::size_t from = std::size_t(bh) * s.k_len + prefix + i, to = std::size_t(bh) * s.q_len + i;
        std::copy_n(&decoded.o[from * s.value_dim], s.value_dim, &o[to * s.value_dim]);
        if (!lse.empty()) lse[to] = decoded.lse[from];
      }
  }
  std::string last_path() const override { return decoder_.last_path(); }
  void set_cutoff(std::optional<std::chrono::steady_clock::time_point> cutoff) const override {
    decoder_.set_cutoff(cutoff);
  }

 private:
  const Kernel& decoder_;
};

}  // namespace

namespace {

// The static scale of each [T x width] block (a sequence's kv head) of a q8_head buffer; empty for
// any other storage.
std::vector<float> head_scales(const std::vector<float>& values, Scalar storage, int block) {
  std::vector<float> scales;
  if (storage != Scalar::kQ8Head) return scales;
  for (std::size_t at = 0; at < values.size(); at += block)
    scales.push_back(canonical_scale(std::span(values).subspan(at, block), storage));
  return scales;
}

}  // namespace

DecodeConfig session_config_of(const Problem& prefill) {
  const Shape& s = prefill.shape;
  return {.batch = s.batch,
          .heads = s.heads,
          .kv_heads = s.kv_heads,
          .head_dim = s.head_dim,
          .value_dim = s.value_dim,
          .scale = prefill.effective_scale(),
          .mask = integer_mask_terms_of(prefill.mask),
          .softcap = prefill.modifiers.softcap,
          .alibi_slopes = prefill.modifiers.alibi_slopes,
          .sinks = prefill.modifiers.sinks,
          .rope = prefill.rope,
          .k_scales = head_scales(prefill.k, prefill.storage.k, s.k_len * s.head_dim),
          .v_scales = head_scales(prefill.v, prefill.storage.v, s.k_len * s.value_dim)};
}

bool exact_sessions(const Capabilities& caps) { return !caps.cache.evicts() || caps.cache.exact_up_to() > 0; }

bool exact_session(const Capabilities& caps, long long tokens) {
  return !caps.cache.evicts() || (caps.cache.exact_up_to() > 0 && tokens <= caps.cache.exact_up_to());
}

std::unique_ptr<Kernel> session_forward(const Kernel& decoder) { return std::make_unique<SessionForward>(decoder); }

std::unique_ptr<Kernel> session_stand_in(const PropertyInfo& property, const Kernel& kernel) {
  const Capabilities caps = kernel.capabilities();
  if (!property.through_sessions || caps.forward() || !caps.decode() || !exact_sessions(caps)) return nullptr;
  return session_forward(kernel);
}

}  // namespace attest
