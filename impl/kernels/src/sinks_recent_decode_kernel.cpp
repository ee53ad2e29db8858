// The built-in evicting decoder (StreamingLLM's "attention sinks + recent tokens", or with no sinks
// a sliding window): decode-only,
// f32 pages of 16 tokens. The first pages hold the sink positions for good; later positions go
// round a ring of pages that holds the `recent` newest and one page more, so a page is reused once
// every position on it has left the window. Each new token is cached before its query attends, so
// a step of n tokens is n tokens in turn: query p sees the sinks and keys p - recent + 1 .. p.
#include <stdexcept>
#include <vector>

#include "attest/kernels/builtin_kernels.h"
#include "attest/kernels/faults.h"
#include "decode_row.h"
#include "kernel_support.h"

namespace attest {
namespace {

using namespace kernels;

// Sink pages and a ring of pages for one batch of sequences, each [Hkv][page][width] for K then V.
class SinksRecentCache {
 public:
  SinksRecentCache(const DecodeConfig& c, const CachePolicy& policy, int page)
      : kv_heads_(c.kv_heads),
        dk_(c.head_dim),
        dv_(c.value_dim),
        page_(page),
        sink_end_((policy.sinks + page - 1) / page * page),
        ring_((policy.recent + page - 1) / page * page + page),
        keys_(std::size_t(c.batch) * c.kv_heads * (sink_end_ + ring_) * dk_),
        values_(std::size_t(c.batch) * c.kv_heads * (sink_end_ + ring_) * dv_) {}

  int page_size() const { return page_; }
  int sink_end() const { return sink_end_; }  // positions below it stay in the sink pages
  int ring() const { return ring_; }          // positions the ring holds
  const float* key(int b, int g, long long j) const { return &keys_[row(b, g, j) * dk_]; }
  const float* value(int b, int g, long long j) const { return &values_[row(b, g, j) * dv_]; }
  float* key_mut(int b, int g, long long j) { return &keys_[row(b, g, j) * dk_]; }
  float* value_mut(int b, int g, long long j) { return &values_[row(b, g, j) * dv_]; }
  std::size_t bytes() const { return (keys_.size() + values_.size()) * sizeof(float); }

 private:
  // Position j's slot: its own in the sink pages, else (j - sink_end) round the ring.
  std::size_t row(int b, int g, long long j) const {
    const long long slot = j < sink_end_ ? j : sink_end_ + (j - sink_end_) % ring_;
    return (std::size_t(b) * kv_heads_ + g) * (sink_end_ + ring_) + static_cast<std::size_t>(slot);
  }

  int kv_heads_, dk_, dv_, page_, sink_end_, ring_;
  std::vector<float> keys_, values_;
};

class SinksRecentSession final : public DecodeSession {
 public:
  SinksRecentSession(const DecodeConfig& c, const CachePolicy& policy, int page, const KernelFaults& faults)
      : c_(c),
        policy_(policy),
        faults_(faults),
        modifier_problem_(modifier_problem_of(c)),
        cache_(c, policy, page),
        page_scores_(page),
        query_(c.head_dim) {}

  void step(int n, std::span<const float> q, std::span<const float> k, std::span<const float> v, std::span<float> o,
            std::span<float> lse) override {
    check_step(c_, n, q, k, v, o, lse);
    last_.assign(std::size_t(c_.batch) * n, {});
    for (int t = 0; t < n; ++t, ++length_) {
      append(t, n, k, v);
      for (int b = 0; b < c_.batch; ++b) attend(b, t, n, q, o, lse);
    }
  }

  long long length() const override { return length_; }
  std::size_t cache_bytes() const override { return cache_.bytes(); }
  std::vector<long long> retained_positions(int b, int t) const override {
    const int n = static_cast<int>(last_.size() / c_.batch);  // the last step's tokens
    if (b < 0 || b >= c_.batch || t < 0 || t >= n) return {};
    return last_[std::size_t(b) * n + t];
  }

 private:
  void append(int t, int n, std::span<const float> k, std::span<const float> v) {
    for (int b = 0; b < c_.batch; ++b)
      for (int g = 0; g < c_.kv_heads; ++g) {
        const std::size_t row = (std::size_t(b) * c_.kv_heads + g) * n + t;
        float* key = cache_.key_mut(b, g, length_);
        std::copy_n(&k[row * c_.head_dim], c_.head_dim, key);
        std::copy_n(&v[row * c_.value_dim], c_.value_dim, cache_.value_mut(b, g, length_));
        if (c_.rope.enabled) rope_rotate(key, c_.head_dim, length_, c_.rope.base);
      }
  }

  // Query t of the step (at position length_) against the sinks and the recent keys.
  void attend(int b, int t, int n, std::span<const float> q, std::span<float> o, std::span<float> lse) {
    const long long pos = length_;
    long long lo = 0, hi = pos + 1;
    narrow_to_integer_terms(c_.mask, pos, lo, hi);
    const bool full = pos >= static_cast<long long>(policy_.sinks) + policy_.recent;
    const bool dropped = (faults_.sinks_evicted && full) || (faults_.sinks_evicted_from_150 && pos >= 150) ||
                         (faults_.sinks_evicted_from_5000 && pos >= 5000);
    const long long sinks = dropped ? 0 : policy_.sinks;
    long long recent_lo = pos - policy_.recent + (faults_.eviction_fencepost ? 0 : 1);
    if (faults_.ring_wrap_current_lap && pos - cache_.sink_end() >= cache_.ring())  // from the first wrap on
      recent_lo = std::max(recent_lo, cache_.sink_end() + (pos - cache_.sink_end()) / cache_.ring() * cache_.ring());
    const KeyRange sink_range = key_range(lo, std::min(hi, sinks));
    const KeyRange recent_range = key_range(std::max(lo, std::max(recent_lo, sinks)), hi);
    std::vector<long long>& kept = last_[std::size_t(b) * n + t];
    for (const KeyRange& r : {sink_range, recent_range})
      for (int j = r.lo; j < r.hi; ++j) kept.push_back(j);
    const ModifierView modifiers(modifier_problem_);
    const int group = c_.heads / c_.kv_heads;
    for (int h = 0; h < c_.heads; ++h) {
      const std::size_t row = (std::size_t(b) * c_.heads + h) * n + t;
      std::copy_n(&q[row * c_.head_dim], c_.head_dim, query_.begin());
      if (c_.rope.enabled) rope_rotate(query_.data(), c_.head_dim, pos, c_.rope.base);
      attend_row(
          cache_, b, h / group, query_.data(), c_.head_dim, c_.value_dim, static_cast<float>(c_.scale),
          {sink_range, recent_range}, [](int) { return true; },
          [&](int j, float x) { return modifiers.changes_logits() ? modifiers.logit(x, b, h, 0, j, pos) : x; },
          modifiers.has_sinks() ? modifiers.sink(h) : kNegInf, page_scores_, &o[row * c_.value_dim],
          lse.empty() ? nullptr : &lse[row], faults_);
    }
  }

  DecodeConfig c_;
  CachePolicy policy_;
  KernelFaults faults_;
  Problem modifier_problem_;
  SinksRecentCache cache_;
  std::vector<float> page_scores_;
  std::vector<float> query_;
  std::vector<std::vector<long long>> last_;  // [B][n] positions each query of the last step attended
  long long length_ = 0;
};

class SinksRecentDecodeKernel final : public Kernel {
 public:
  SinksRecentDecodeKernel(CachePolicy policy, bool report, KernelFaults faults, std::string name)
      : policy_(policy), report_(report), faults_(faults), name_(std::move(name)) {
    policy_.validate();
    if (policy_.kind != CachePolicy::Kind::kSinksRecent && policy_.kind != CachePolicy::Kind::kWindow)
      throw std::invalid_argument("sinks + recent decoder: the policy must be sinks_recent or window");
  }
  std::string name() const override { return name_; }
  Capabilities capabilities() const override {
    Capabilities c;  // what a session can be given: no padding, segments, explicit mask or bias
    c.features = FeatureSet{Feature::kDecode,  Feature::kCausal, Feature::kGqa,   Feature::kLse,
                            Feature::kSoftcap, Feature::kAlibi,  Feature::kSinks, Feature::kRope};
    for (const FeatureInfo* term : integer_mask_terms()) c.features.insert(term->feature);
    c.contract.decode_only = true;
    c.contract.key_tile = kPage;
    // Reporting its retained positions, the same cache declares them instead of the rule.
    c.cache = report_ ? CachePolicy{CachePolicy::Kind::kExplicit} : policy_;
    return c;
  }
  void forward(const Problem&, std::span<float>, std::span<float>) const override {
    throw std::logic_error(name_ + " is decode-only: forward was called");
  }
  std::unique_ptr<DecodeSession> open_decode(const DecodeConfig& config) const override {
    config.validate();
    return std::make_unique<SinksRecentSession>(config, policy_, kPage, faults_);
  }

 private:
  static constexpr int kPage = 16;
  CachePolicy policy_;
  bool report_;
  KernelFaults faults_;
  std::string name_;
};

}  // namespace

std::unique_ptr<Kernel> make_sinks_recent_decode_kernel(int sinks, int recent, bool report_positions) {
  const std::string name = sinks == 0 ? "decode_window_cache" : "decode_sinks_recent";
  return make_faulty_sinks_recent_decode_kernel(sinks, recent, report_positions, {},
                                                report_positions ? name + "_explicit" : name);
}

std::unique_ptr<Kernel> make_faulty_sinks_recent_decode_kernel(int sinks, int recent, bool report_positions,
                                                               const KernelFaults& faults, std::string name) {
  const CachePolicy policy = sinks == 0 ? CachePolicy{CachePolicy::Kind::kWindow, 0, recent}
                                        : CachePolicy{CachePolicy::Kind::kSinksRecent, sinks, recent};
  return std::make_unique<SinksRecentDecodeKernel>(policy, report_positions, faults, std::move(name));
}

}  // namespace attest
