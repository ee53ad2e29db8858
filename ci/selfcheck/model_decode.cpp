#include "model_decode.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

namespace attest {
namespace {

// Whether the query at position `p` attends key position `j <= p` under `cache`.
bool kept(const CachePolicy& cache, long long j, long long p) {
  if (cache.kind == CachePolicy::Kind::kExplicit) return model_explicit_retention().retains(j, p);
  return cache.retains(j, p);
}

// n queries of every (sequence, head) at positions length - n .. length - 1 against the `length`
// cached keys [B][Hkv][length][D], bottom-right causal, attended by `forward`. An evicting cache's
// dropped positions are masked per query: exact attention over the retained set, each key at its
// original position.
void attend(const Kernel& forward, const DecodeConfig& c, Problem::Storage storage, const CachePolicy& cache, int n,
            long long length, std::span<const float> q, std::vector<float> k, std::vector<float> v, std::span<float> o,
            std::span<float> lse) {
  Problem p;
  p.shape = {c.batch, c.heads, c.kv_heads, n, static_cast<int>(length), c.head_dim, c.value_dim};
  p.scale = c.scale;
  p.q_offset = length - n;
  p.mask = c.mask;
  p.mask.causal = true;
  if (cache.evicts()) {
    p.mask.explicit_mask.assign(std::size_t(c.batch) * n * length, 0);
    for (int b = 0; b < c.batch; ++b)
      for (int i = 0; i < n; ++i)
        for (long long j = 0; j < length; ++j)
          p.mask.explicit_mask[(std::size_t(b) * n + i) * length + j] = kept(cache, j, length - n + i) ? 1 : 0;
  }
  p.rope = c.rope;
  p.modifiers.softcap = c.softcap;
  p.modifiers.alibi_slopes = c.alibi_slopes;
  p.modifiers.sinks = c.sinks;
  p.storage = storage;
  p.q.assign(q.begin(), q.end());
  p.k = std::move(k);
  p.v = std::move(v);
  std::vector<float> own_lse(p.lse_size());
  forward.forward(p, o, own_lse);
  if (!lse.empty()) std::copy(own_lse.begin(), own_lse.end(), lse.begin());
}

class ModelDecodeSession final : public DecodeSession {
 public:
  ModelDecodeSession(const Kernel& forward, const DecodeConfig& config, Problem::Storage storage,
                     const CachePolicy& cache)
      : forward_(forward),
        c_(config),
        storage_(storage),
        cache_(cache),
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
    last_n_ = n;
    std::vector<float> all_k, all_v;
    for (const auto& head : k_) all_k.insert(all_k.end(), head.begin(), head.end());
    for (const auto& head : v_) all_v.insert(all_v.end(), head.begin(), head.end());
    attend(forward_, c_, storage_, cache_, n, length_, q, std::move(all_k), std::move(all_v), o, lse);
  }

  long long length() const override { return length_; }
  std::size_t cache_bytes() const override {
    std::size_t floats = 0;
    for (std::size_t head = 0; head < k_.size(); ++head) floats += k_[head].size() + v_[head].size();
    return floats * sizeof(float);
  }
  // Every sequence keeps the same positions: those its policy keeps for the query.
  std::vector<long long> retained_positions(int b, int t) const override {
    (void)b;
    const long long p = length_ - last_n_ + t;
    std::vector<long long> out;
    for (long long j = 0; j <= p; ++j)
      if (kept(cache_, j, p)) out.push_back(j);
    return out;
  }

 private:
  const Kernel& forward_;
  DecodeConfig c_;
  Problem::Storage storage_;
  CachePolicy cache_;
  std::vector<std::vector<float>> k_, v_;  // [B * Hkv][tokens][D]
  long long length_ = 0;
  int last_n_ = 0;
};

}  // namespace

CachePolicy model_explicit_retention() { return {CachePolicy::Kind::kSinksRecent, 2, 24}; }

std::unique_ptr<DecodeSession> open_model_decode(const Kernel& forward, const DecodeConfig& config,
                                                 Problem::Storage storage, const CachePolicy& cache) {
  return std::make_unique<ModelDecodeSession>(forward, config, storage, cache);
}

std::size_t model_page_bytes(const DecodeConfig& config, int page_tokens) {
  return std::size_t(page_tokens) * config.kv_heads * (config.head_dim + config.value_dim) * sizeof(float);
}

// A page: [Hkv][page_tokens] K rows, then [Hkv][page_tokens] V rows. Each sequence's new tokens
// go to their slots first; then its queries attend its whole sequence, read through its table.
void model_decode_paged(const Kernel& forward, const DecodeConfig& config, Problem::Storage storage,
                        const CachePolicy& cache, int page_tokens, const PagedStep& step) {
  config.validate();
  const std::size_t page_bytes = model_page_bytes(config, page_tokens);
  check_paged_step(config, page_tokens, page_bytes, step);
  const std::size_t hkv = config.kv_heads, h = config.heads, dk = config.head_dim, dv = config.value_dim;
  const std::size_t pt = page_tokens;
  auto slot = [&](std::size_t b, long long pos, std::size_t g, bool value) {
    const std::size_t page = step.tables[b * step.table_width + std::size_t(pos / page_tokens)];
    float* base = reinterpret_cast<float*>(step.pool.data() + page * page_bytes);
    const std::size_t t = std::size_t(pos % page_tokens);
    return value ? base + hkv * pt * dk + (g * pt + t) * dv : base + (g * pt + t) * dk;
  };
  DecodeConfig one = config;
  one.batch = 1;
  std::size_t token0 = 0;  // the sequence's first new token among all the call's
  for (std::size_t b = 0; b < std::size_t(config.batch); ++b) {
    const std::size_t n = step.counts[b];
    const long long length = step.lengths[b] + static_cast<long long>(n);
    for (std::size_t g = 0; g < hkv; ++g)
      for (std::size_t t = 0; t < n; ++t) {
        std::memcpy(slot(b, step.lengths[b] + t, g, false), &step.k[((token0 * hkv) + g * n + t) * dk],
                    dk * sizeof(float));
        std::memcpy(slot(b, step.lengths[b] + t, g, true), &step.v[((token0 * hkv) + g * n + t) * dv],
                    dv * sizeof(float));
      }
    if (n > 0) {
      std::vector<float> k, v;
      for (std::size_t g = 0; g < hkv; ++g)
        for (long long pos = 0; pos < length; ++pos) {
          const float* kr = slot(b, pos, g, false);
          const float* vr = slot(b, pos, g, true);
          k.insert(k.end(), kr, kr + dk);
          v.insert(v.end(), vr, vr + dv);
        }
      attend(forward, one, storage, cache, static_cast<int>(n), length, step.q.subspan(token0 * h * dk, n * h * dk),
             std::move(k), std::move(v), step.o.subspan(token0 * h * dv, n * h * dv),
             step.lse.empty() ? std::span<float>() : step.lse.subspan(token0 * h, n * h));
    }
    token0 += n;
  }
}

}  // namespace attest
