// Incremental decode over a paged KV cache. forward() is chunked prefill: it appends all
// keys to the cache, then attends every query through the same page-wise online softmax.
#include <vector>

#include "attest/kernels/builtin_kernels.h"
#include "attest/kernels/faults.h"
#include "decode_row.h"
#include "kernel_support.h"
#include "paged_kv_cache.h"

namespace attest {
namespace {

using namespace kernels;

class PagedDecodeSession final : public DecodeSession {
 public:
  PagedDecodeSession(const DecodeConfig& c, int page_size, const KernelFaults& faults)
      : c_(c),
        faults_(faults),
        modifier_problem_(modifier_problem_of(c)),
        cache_(c.batch, c.kv_heads, c.head_dim, c.value_dim, page_size),
        page_scores_(page_size),
        query_(c.head_dim) {}

  void step(int n, std::span<const float> q, std::span<const float> k, std::span<const float> v, std::span<float> o,
            std::span<float> lse) override {
    check_step(c_, n, q, k, v, o, lse);
    const std::size_t dk = c_.head_dim, dv = c_.value_dim;

    const long long start = length_;
    for (int b = 0; b < c_.batch; ++b) {
      for (int t = 0; t < n; ++t) {
        const std::size_t base = std::size_t(b) * c_.kv_heads * n + t;
        cache_.append(b, &k[base * dk], n * dk, &v[base * dv], n * dv);
        if (c_.rope.enabled)
          for (int g = 0; g < c_.kv_heads; ++g)
            rope_rotate(cache_.key_mut(b, g, cache_.length(b) - 1), c_.head_dim, start + t, c_.rope.base);
      }
    }
    length_ += n;

    const float scale = static_cast<float>(c_.scale);
    const int group = c_.heads / c_.kv_heads;
    for (int b = 0; b < c_.batch; ++b) {
      for (int h = 0; h < c_.heads; ++h) {
        for (int t = 0; t < n; ++t) {
          const std::size_t row = (std::size_t(b) * c_.heads + h) * n + t;
          const long long pos = start + t;
          std::copy_n(&q[row * dk], dk, query_.begin());
          if (c_.rope.enabled)
            rope_rotate(query_.data(), c_.head_dim, faults_.rope_query_at_zero ? t : pos, c_.rope.base);
          long long lo = 0, hi = pos + (faults_.decode_skips_self ? 0 : 1);
          narrow_to_integer_terms(c_.mask, pos, lo, hi);
          const int page = cache_.page_size();
          if (faults_.decode_window_evicts_page && c_.mask.window) lo = (lo + page - 1) / page * page;
          const KeyRange range = key_range(lo, hi);
          const ModifierView modifiers(modifier_problem_);
          attend_row(
              cache_, b, faults_.gqa_modulo ? h % c_.kv_heads : h / group, query_.data(), c_.head_dim, c_.value_dim,
              scale, {range}, [](int) { return true; },
              [&](int j, float x) { return modifiers.changes_logits() ? modifiers.logit(x, b, h, 0, j, pos) : x; },
              modifiers.has_sinks() ? modifiers.sink(h) : kNegInf, page_scores_, &o[row * dv],
              lse.empty() ? nullptr : &lse[row], faults_);
        }
      }
    }
  }

  long long length() const override { return length_; }
  std::size_t cache_bytes() const override { return cache_.bytes(); }

 private:
  DecodeConfig c_;
  KernelFaults faults_;
  Problem modifier_problem_;
  PagedKvCache cache_;
  std::vector<float> page_scores_;
  std::vector<float> query_;
  long long length_ = 0;
};

class DecodeKernel final : public Kernel {
 public:
  DecodeKernel(int page_size, KernelFaults faults, std::string name)
      : page_size_(page_size), faults_(faults), name_(std::move(name)) {
    if (page_size < 1) throw std::invalid_argument("decode kernel: page_size must be >= 1");
  }
  std::string name() const override { return name_; }
  Capabilities capabilities() const override {
    Capabilities c;
    c.features.insert(Feature::kDecode);
    c.features = c.features | FeatureSet::of_kind(FeatureKind::kModifier);
    c.contract.key_tile = page_size_;
    return c;
  }

  void forward(const Problem& p, std::span<float> o, std::span<float> lse) const override {
    const Shape& s = p.shape;
    const Layout at{s};
    const MaskView mask(p);
    const ModifierView modifiers(p);
    const float scale = static_cast<float>(p.effective_scale());
    PagedKvCache cache(s.batch, s.kv_heads, s.head_dim, s.value_dim, page_size_);
    const std::size_t k_head_stride = std::size_t(s.k_len) * s.head_dim;
    const std::size_t v_head_stride = std::size_t(s.k_len) * s.value_dim;
    for (int b = 0; b < s.batch; ++b)
      for (int j = 0; j < s.k_len; ++j) {
        cache.append(b, &p.k[at.k(b, 0, j)], k_head_stride, &p.v[at.v(b, 0, j)], v_head_stride);
        if (p.rope.enabled)
          for (int g = 0; g < s.kv_heads; ++g) rope_rotate(cache.key_mut(b, g, j), s.head_dim, j, p.rope.base);
      }

    std::vector<float> page_scores(page_size_), query(s.head_dim);
    for (int b = 0; b < s.batch; ++b)
      for (int h = 0; h < s.heads; ++h)
        for (int i = 0; i < s.q_len; ++i) {
          std::copy_n(&p.q[at.q(b, h, i)], s.head_dim, query.begin());
          if (p.rope.enabled) rope_rotate(query.data(), s.head_dim, mask.position(i), p.rope.base);
          auto visible = [&](int j) { return !mask.elementwise() || mask.elementwise_visible(b, i, j); };
          attend_row(
              cache, b, faults_.gqa_modulo ? h % s.kv_heads : p.kv_head_of(h), query.data(), s.head_dim, s.value_dim,
              scale, {mask.range(b, i)}, visible,
              [&](int j, float x) {
                return modifiers.changes_logits() ? modifiers.logit(x, b, h, i, j, mask.position(i)) : x;
              },
              modifiers.has_sinks() ? modifiers.sink(h) : kNegInf, page_scores, &o[at.o(b, h, i)],
              lse.empty() ? nullptr : &lse[at.lse(b, h, i)], faults_);
        }
  }

  std::unique_ptr<DecodeSession> open_decode(const DecodeConfig& config) const override {
    config.validate();
    return std::make_unique<PagedDecodeSession>(config, page_size_, faults_);
  }

 private:
  int page_size_;
  KernelFaults faults_;
  std::string name_;
};

}  // namespace

std::unique_ptr<Kernel> make_decode_kernel(int page_size) {
  return std::make_unique<DecodeKernel>(page_size, KernelFaults{}, "decode");
}

std::unique_ptr<Kernel> make_faulty_decode_kernel(int page_size, const KernelFaults& faults, std::string name) {
  return std::make_unique<DecodeKernel>(page_size, faults, std::move(name));
}

namespace {

class DecodeOnly final : public Kernel {
 public:
  explicit DecodeOnly(std::unique_ptr<Kernel> decoder) : decoder_(std::move(decoder)) {}
  std::string name() const override { return decoder_->name(); }
  Capabilities capabilities() const override {
    Capabilities c = decoder_->capabilities();
    c.contract.decode_only = true;
    return c;
  }
  void forward(const Problem&, std::span<float>, std::span<float>) const override {
    throw std::logic_error(name() + " is decode-only: forward was called");
  }
  std::unique_ptr<DecodeSession> open_decode(const DecodeConfig& config) const override {
    return decoder_->open_decode(config);
  }
  std::string last_path() const override { return decoder_->last_path(); }

 private:
  std::unique_ptr<Kernel> decoder_;
};

}  // namespace

std::unique_ptr<Kernel> make_decode_only(std::unique_ptr<Kernel> decoder) {
  return std::make_unique<DecodeOnly>(std::move(decoder));
}

}  // namespace attest
