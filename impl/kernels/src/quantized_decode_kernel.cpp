// The built-in serving decoder: decode-only, over a paged KV cache in a quantized format (q8: 32
// values per scale, as ggml's q8_0; q4, q8_token, q8_head with the session's static scales, e4m3,
// e5m2). It declares K and V stored in that
// format (attest sends exactly representable values and holds it to exact attention on them), f32
// arithmetic, and the polynomial exp of simd_ops.h.
// Per query row, one page at a time: the page's scores from the codes (a block's scale applied
// to its codes' dot product), an online-softmax fold, and P.V from the codes.
#include <cmath>
#include <vector>

#include "attest/builtin_kernels.h"
#include "kernel_support.h"
#include "quantized_kv_cache.h"
#include "simd_ops.h"

namespace attest {
namespace {

using namespace kernels;

class QuantizedDecodeSession final : public DecodeSession {
 public:
  QuantizedDecodeSession(Scalar format, const DecodeConfig& c, const KernelFaults& faults)
      : c_(c), faults_(faults), modifier_problem_(modifier_problem_of(c)),
        cache_(format, c.batch, c.kv_heads, c.head_dim, c.value_dim, faults), page_scores_(kPageTokens),
        scores_(kPageTokens), weights_(kPageTokens) {}

  void step(int n, std::span<const float> q, std::span<const float> k, std::span<const float> v,
            std::span<float> o, std::span<float> lse) override {
    check_step(c_, n, q, k, v, o, lse);
    const std::size_t dk = c_.head_dim, dv = c_.value_dim;
    const long long start = length_;
    for (int b = 0; b < c_.batch; ++b)
      for (int t = 0; t < n; ++t) {
        const std::size_t base = std::size_t(b) * c_.kv_heads * n + t;
        const bool static_scales = !c_.k_scales.empty();
        cache_.append(b, &k[base * dk], n * dk, &v[base * dv], n * dv,
                      static_scales ? &c_.k_scales[std::size_t(b) * c_.kv_heads] : nullptr,
                      static_scales ? &c_.v_scales[std::size_t(b) * c_.kv_heads] : nullptr);
      }
    length_ += n;

    const int group = c_.heads / c_.kv_heads;
    const ModifierView modifiers(modifier_problem_);
    for (int b = 0; b < c_.batch; ++b)
      for (int h = 0; h < c_.heads; ++h)
        for (int t = 0; t < n; ++t) {
          const std::size_t row = (std::size_t(b) * c_.heads + h) * n + t;
          const long long pos = start + t;
          long long lo = 0, hi = pos + 1;
          narrow_to_integer_terms(c_.mask, pos, lo, hi);
          if (faults_.decode_drops_partial_page && cache_.length(b) % kPageTokens != 0)
            hi = std::min<long long>(hi, cache_.length(b) / kPageTokens * kPageTokens);
          attend(b, h, h / group, &q[row * dk], pos, lo, hi, modifiers, &o[row * dv], lse.empty() ? nullptr : &lse[row]);
        }
  }

  long long length() const override { return length_; }
  std::size_t cache_bytes() const override { return cache_.bytes(); }

 private:
  // Online softmax of one query over keys [lo, hi) of sequence b, kv head g, a page at a time.
  void attend(int b, int h, int g, const float* query, long long pos, long long lo, long long hi,
              const ModifierView& modifiers, float* out, float* out_lse) {
    const int dv = c_.value_dim, page = kPageTokens;
    const float scale = static_cast<float>(c_.scale);
    const bool sink = modifiers.has_sinks();
    float row_max = sink ? modifiers.sink(h) : kNegInf, row_sum = sink ? 1.0f : 0.0f;
    std::fill(out, out + dv, 0.0f);
    for (long long j0 = (std::max(lo, 0LL) / page) * page; j0 < hi; j0 += page) {
      const int first = static_cast<int>(std::max(j0, lo)), last = static_cast<int>(std::min(j0 + page, hi));
      const int count = last - first;
      page_scores(cache_.key_layout(), query, cache_.key_page(b, g, first), page_scores_.data());
      std::copy_n(page_scores_.begin() + (first - j0), count, scores_.begin());
      float page_max = kNegInf;
      for (int c = 0; c < count; ++c) {
        float& x = scores_[c];
        x *= scale;
        if (modifiers.changes_logits()) x = modifiers.logit(x, b, h, 0, first + c, pos);
        page_max = std::max(page_max, x);
      }
      if (page_max == kNegInf) continue;
      const float new_max = std::max(row_max, page_max);
      const float rescale = std::exp(row_max - new_max);
      for (int d = 0; d < dv; ++d) out[d] *= rescale;
      row_sum *= rescale;
      std::copy_n(scores_.begin(), count, weights_.begin());
      row_sum += simd::exp_shift_sum(weights_.data(), count, new_max);  // a masked key weighs 0
      accumulate_values(cache_.value_layout(), out, weights_.data(), scores_.data(), cache_.values(b, g, first), count);
      row_max = new_max;
    }
    if (row_max == kNegInf) return write_empty_row(out, dv, out_lse);
    for (int d = 0; d < dv; ++d) out[d] /= row_sum;
    if (out_lse) *out_lse = row_max + std::log(row_sum);
  }

  DecodeConfig c_;
  KernelFaults faults_;
  Problem modifier_problem_;
  QuantizedKvCache cache_;
  std::vector<float> page_scores_, scores_, weights_;  // a page's scores; the logits and weights of its keys in range
  long long length_ = 0;
};

class QuantizedDecodeKernel final : public Kernel {
 public:
  QuantizedDecodeKernel(Scalar format, KernelFaults faults, std::string name)
      : format_(format), faults_(faults), name_(std::move(name)) {}
  std::string name() const override { return name_; }
  Capabilities capabilities() const override {
    Capabilities c;
    c.features = FeatureSet{Feature::kDecode, Feature::kCausal, Feature::kGqa, Feature::kLse, Feature::kSoftcap,
                            Feature::kAlibi, Feature::kSinks};
    for (const FeatureInfo* term : integer_mask_terms()) c.features.insert(term->feature);
    c.contract.decode_only = true;
    c.contract.key_tile = kPageTokens;
    c.precision.k = c.precision.v = format_;
    c.precision.exp_ulps = 2.0;  // the polynomial exp of simd_ops.h
    return c;
  }
  void forward(const Problem&, std::span<float>, std::span<float>) const override {
    throw std::logic_error(name_ + " is decode-only: forward was called");
  }
  std::unique_ptr<DecodeSession> open_decode(const DecodeConfig& config) const override {
    config.validate();
    if (config.rope.enabled) throw ProblemError("invalid decode config: " + name_ + " does not take RoPE");
    if (format_ == Scalar::kQ8Head && (config.k_scales.empty() || config.v_scales.empty()))
      throw ProblemError("invalid decode config: " + name_ + " needs k_scales and v_scales (q8_head storage)");
    return std::make_unique<QuantizedDecodeSession>(format_, config, faults_);
  }

 private:
  Scalar format_;
  KernelFaults faults_;
  std::string name_;
};

}  // namespace

std::unique_ptr<Kernel> make_quantized_decode_kernel(Scalar format) {
  return std::make_unique<QuantizedDecodeKernel>(format, KernelFaults{}, std::string("decode_") + to_string(format));
}

std::unique_ptr<Kernel> make_faulty_quantized_decode_kernel(Scalar format, const KernelFaults& faults, std::string name) {
  return std::make_unique<QuantizedDecodeKernel>(format, faults, std::move(name));
}

}  // namespace attest
