#include "model_decode.h"

#include <algorithm>
#include <span>
#include <vector>

namespace attest {
namespace {

class ModelDecodeSession final : public DecodeSession {
 public:
  ModelDecodeSession(const Kernel& forward, const DecodeConfig& config, Problem::Storage storage)
      : forward_(forward),
        c_(config),
        storage_(storage),
        k_(std::size_t(config.batch) * config.kv_heads),
        v_(k_.size()) {
    c_.validate();
  }

  void step(int n, std::span<const float> q, std::span<const float> k, std::span<const float> v, std::span<float> o,
            std::span<float> lse) override {
    const std::size_t dk = c_.head_dim, dv = c_.value_dim, rows = std::size_t(c_.batch) * std::max(n, 0);
    if (n < 1 || q.size() != rows * c_.heads * dk || k.size() != rows * c_.kv_heads * dk ||
        v.size() != rows * c_.kv_heads * dv || o.size() != rows * c_.heads * dv ||
        (!lse.empty() && lse.size() != rows * c_.heads))
      throw ProblemError("invalid decode step: n or the q/k/v/o/lse sizes do not match the configuration");
    // k [B][Hkv][n][Dk]: each (sequence, kv head) cache grows by its n tokens.
    for (std::size_t head = 0; head < k_.size(); ++head) {
      k_[head].insert(k_[head].end(), k.begin() + head * n * dk, k.begin() + (head + 1) * n * dk);
      v_[head].insert(v_[head].end(), v.begin() + head * n * dv, v.begin() + (head + 1) * n * dv);
    }
    length_ += n;
    const Problem p = problem_of(n, q);
    std::vector<float> own_lse(p.lse_size());
    forward_.forward(p, o, own_lse);
    if (!lse.empty()) std::copy(own_lse.begin(), own_lse.end(), lse.begin());
  }

  long long length() const override { return length_; }
  std::size_t cache_bytes() const override {
    std::size_t floats = 0;
    for (std::size_t head = 0; head < k_.size(); ++head) floats += k_[head].size() + v_[head].size();
    return floats * sizeof(float);
  }

 private:
  // The step as a forward problem: its queries against every cached key, bottom-right causal.
  Problem problem_of(int n, std::span<const float> q) const {
    Problem p;
    p.shape = {c_.batch, c_.heads, c_.kv_heads, n, static_cast<int>(length_), c_.head_dim, c_.value_dim};
    p.scale = c_.scale;
    p.q_offset = length_ - n;
    p.mask = c_.mask;
    p.mask.causal = true;
    p.rope = c_.rope;
    p.modifiers.softcap = c_.softcap;
    p.modifiers.alibi_slopes = c_.alibi_slopes;
    p.modifiers.sinks = c_.sinks;
    p.storage = storage_;
    p.q.assign(q.begin(), q.end());
    for (const auto& head : k_) p.k.insert(p.k.end(), head.begin(), head.end());
    for (const auto& head : v_) p.v.insert(p.v.end(), head.begin(), head.end());
    return p;
  }

  const Kernel& forward_;
  DecodeConfig c_;
  Problem::Storage storage_;
  std::vector<std::vector<float>> k_, v_;  // [B * Hkv][tokens][D]
  long long length_ = 0;
};

}  // namespace

std::unique_ptr<DecodeSession> open_model_decode(const Kernel& forward, const DecodeConfig& config,
                                                 Problem::Storage storage) {
  return std::make_unique<ModelDecodeSession>(forward, config, storage);
}

}  // namespace attest
