// The built-in serving decoder: decode-only, over a paged KV cache in a quantized format (q8: 32
// values per scale, as ggml's q8_0; q4, q8_token, q8_head with the session's static scales, e4m3,
// e5m2). It declares K and V stored in that
// format (attest sends exactly representable values and holds it to exact attention on them), f32
// arithmetic, and the polynomial exp of simd_ops.h.
// Per query row, one page at a time: the page's scores from the codes (a block's scale applied
// to its codes' dot product), an online-softmax fold, and P.V from the codes.
#include <cmath>
#include <vector>

#include "attest/kernels/builtin_kernels.h"
#include "kernel_support.h"
#include "quantized_kv_cache.h"
#include "simd_ops.h"

namespace attest {
namespace {

using namespace kernels;

// Scratch for one query row: a page's scores, the logits and weights of its keys in range.
struct RowScratch {
  std::vector<float> page_scores = std::vector<float>(kPageTokens), scores = page_scores, weights = page_scores;
};

// Online softmax of one query at `pos` over keys [lo, hi) of one sequence and kv head g, a page at
// a time; page_of(j) is the page holding key j.
template <typename PageOf>
void attend(const PageFormat& format, PageOf page_of, const DecodeConfig& c, const ModifierView& modifiers, int b,
            int h, int g, const float* query, long long pos, long long lo, long long hi, float* out, float* out_lse,
            RowScratch& s) {
  const int dv = c.value_dim, page = kPageTokens;
  const float scale = static_cast<float>(c.scale);
  const bool sink = modifiers.has_sinks();
  float row_max = sink ? modifiers.sink(h) : kNegInf, row_sum = sink ? 1.0f : 0.0f;
  std::fill(out, out + dv, 0.0f);
  for (long long j0 = (std::max(lo, 0LL) / page) * page; j0 < hi; j0 += page) {
    const int first = static_cast<int>(std::max(j0, lo)), last = static_cast<int>(std::min(j0 + page, hi));
    const int count = last - first;
    const std::uint8_t* keys_and_values = page_of(first);
    page_scores(format.keys(), query, format.key_page(keys_and_values, g), s.page_scores.data());
    std::copy_n(s.page_scores.begin() + (first - j0), count, s.scores.begin());
    float page_max = kNegInf;
    for (int i = 0; i < count; ++i) {
      float& x = s.scores[i];
      x *= scale;
      if (modifiers.changes_logits()) x = modifiers.logit(x, b, h, 0, first + i, pos);
      page_max = std::max(page_max, x);
    }
    if (page_max == kNegInf) continue;
    const float new_max = std::max(row_max, page_max);
    const float rescale = std::exp(row_max - new_max);
    for (int d = 0; d < dv; ++d) out[d] *= rescale;
    row_sum *= rescale;
    std::copy_n(s.scores.begin(), count, s.weights.begin());
    row_sum += simd::exp_shift_sum(s.weights.data(), count, new_max);  // a masked key weighs 0
    accumulate_values(format.values(), out, s.weights.data(), s.scores.data(),
                      format.value_rows(keys_and_values, g, first % page), count);
    row_max = new_max;
  }
  if (row_max == kNegInf) return write_empty_row(out, dv, out_lse);
  for (int d = 0; d < dv; ++d) out[d] /= row_sum;
  if (out_lse) *out_lse = row_max + std::log(row_sum);
}

// The keys a new query at `pos` reads in a sequence of `length` tokens: its integer mask terms'
// range; the partial-page mutant skips the last page while it is not full.
void key_range_of(const DecodeConfig& c, const KernelFaults& faults, long long pos, long long length, long long& lo,
                  long long& hi) {
  lo = 0, hi = pos + 1;
  narrow_to_integer_terms(c.mask, pos, lo, hi);
  if (faults.decode_drops_partial_page && length % kPageTokens != 0)
    hi = std::min<long long>(hi, length / kPageTokens * kPageTokens);
}

class QuantizedDecodeSession final : public DecodeSession {
 public:
  QuantizedDecodeSession(Scalar format, const DecodeConfig& c, const KernelFaults& faults)
      : c_(c),
        faults_(faults),
        modifier_problem_(modifier_problem_of(c)),
        cache_(format, c.batch, c.kv_heads, c.head_dim, c.value_dim, faults) {}

  void step(int n, std::span<const float> q, std::span<const float> k, std::span<const float> v, std::span<float> o,
            std::span<float> lse) override {
    check_step(c_, n, q, k, v, o, lse);
    const std::size_t dk = c_.head_dim, dv = c_.value_dim;
    const long long start = length_;
    const bool static_scales = !c_.k_scales.empty();
    for (int b = 0; b < c_.batch; ++b)
      for (int t = 0; t < n; ++t) {
        const std::size_t base = std::size_t(b) * c_.kv_heads * n + t;
        cache_.append(b, &k[base * dk], n * dk, &v[base * dv], n * dv,
                      static_scales ? &c_.k_scales[std::size_t(b) * c_.kv_heads] : nullptr,
                      static_scales ? &c_.v_scales[std::size_t(b) * c_.kv_heads] : nullptr);
      }
    length_ += n;

    const int group = c_.heads / c_.kv_heads;
    const ModifierView modifiers(modifier_problem_);
    for (int b = 0; b < c_.batch; ++b) {
      auto page_of = [&](long long j) { return cache_.page_of(b, static_cast<int>(j)); };
      for (int h = 0; h < c_.heads; ++h)
        for (int t = 0; t < n; ++t) {
          const std::size_t row = (std::size_t(b) * c_.heads + h) * n + t;
          long long lo, hi;
          key_range_of(c_, faults_, start + t, cache_.length(b), lo, hi);
          attend(cache_.format(), page_of, c_, modifiers, b, h, h / group, &q[row * dk], start + t, lo, hi,
                 &o[row * dv], lse.empty() ? nullptr : &lse[row], scratch_);
        }
    }
  }

  long long length() const override { return length_; }
  std::size_t cache_bytes() const override { return cache_.bytes(); }

 private:
  DecodeConfig c_;
  KernelFaults faults_;
  Problem modifier_problem_;
  QuantizedKvCache cache_;
  RowScratch scratch_;
  long long length_ = 0;
};

class QuantizedDecodeKernel final : public Kernel {
 public:
  QuantizedDecodeKernel(Scalar format, KernelFaults faults, std::string name)
      : format_(format), faults_(faults), name_(std::move(name)) {}
  std::string name() const override { return name_; }
  Capabilities capabilities() const override {
    Capabilities c;
    c.features = FeatureSet{Feature::kDecode,  Feature::kCausal, Feature::kGqa,  Feature::kLse,
                            Feature::kSoftcap, Feature::kAlibi,  Feature::kSinks};
    for (const FeatureInfo* term : integer_mask_terms()) c.features.insert(term->feature);
    c.contract.decode_only = true;
    c.contract.key_tile = kPageTokens;
    c.precision.k = c.precision.v = format_;
    c.precision.exp_ulps = 2.0;  // the polynomial exp of simd_ops.h
    c.page_tokens = kPageTokens;
    return c;
  }
  void forward(const Problem&, std::span<float>, std::span<float>) const override {
    throw std::logic_error(name_ + " is decode-only: forward was called");
  }
  std::unique_ptr<DecodeSession> open_decode(const DecodeConfig& config) const override {
    check_config(config);
    return std::make_unique<QuantizedDecodeSession>(format_, config, faults_);
  }
  std::size_t page_bytes(const DecodeConfig& c) const override {
    return PageFormat(format_, c.kv_heads, c.head_dim, c.value_dim, faults_).bytes();
  }
  void decode_paged(const DecodeConfig& c, const PagedStep& step) const override;

 private:
  void check_config(const DecodeConfig& config) const {
    config.validate();
    if (config.rope.enabled) throw ProblemError("invalid decode config: " + name_ + " does not take RoPE");
    if (format_ == Scalar::kQ8Head && (config.k_scales.empty() || config.v_scales.empty()))
      throw ProblemError("invalid decode config: " + name_ + " needs k_scales and v_scales (q8_head storage)");
  }

  Scalar format_;
  KernelFaults faults_;
  std::string name_;
};

// Writes every sequence's new tokens into their slots, then attends each new query over its
// sequence's pages as the tables name them.
void QuantizedDecodeKernel::decode_paged(const DecodeConfig& c, const PagedStep& step) const {
  check_config(c);
  const PageFormat format(format_, c.kv_heads, c.head_dim, c.value_dim, faults_);
  check_paged_step(c, kPageTokens, format.bytes(), step);
  auto* pool = reinterpret_cast<std::uint8_t*>(step.pool.data());
  const std::size_t width = step.table_width, dk = c.head_dim, dv = c.value_dim;
  auto entries = [&](std::size_t b) {
    return std::size_t((step.lengths[b] + step.counts[b] + kPageTokens - 1) / kPageTokens);
  };
  const bool static_scales = !c.k_scales.empty();
  std::size_t token0 = 0;  // the sequence's first new token among all the call's
  for (std::size_t b = 0; b < std::size_t(c.batch); ++b) {
    const std::size_t n = step.counts[b];
    for (std::size_t t = 0; t < n; ++t) {
      const long long pos = step.lengths[b] + static_cast<long long>(t);
      const std::size_t logical = pos / kPageTokens;
      // Mutant: the slot resolved through sequence 0's table wherever that table reaches.
      const std::size_t writer = faults_.paged_writes_through_first_table && logical < entries(0) ? 0 : b;
      std::uint8_t* page = pool + std::size_t(step.tables[writer * width + logical]) * format.bytes();
      const std::size_t k_at = (token0 * c.kv_heads + t) * dk, v_at = (token0 * c.kv_heads + t) * dv;
      format.write(page, static_cast<int>(pos % kPageTokens), &step.k[k_at], n * dk, &step.v[v_at], n * dv,
                   static_scales ? &c.k_scales[b * c.kv_heads] : nullptr,
                   static_scales ? &c.v_scales[b * c.kv_heads] : nullptr);
    }
    token0 += n;
  }

  const Problem modifier_problem = modifier_problem_of(c);
  const ModifierView modifiers(modifier_problem);
  const int group = c.heads / c.kv_heads;
  RowScratch scratch;
  // Mutant: a call in which every sequence adds one token read as if each were the longest.
  long long longest = 0;
  bool one_token_step = faults_.paged_one_token_steps_at_longest && c.batch > 1;
  for (std::size_t b = 0; b < std::size_t(c.batch); ++b) {
    one_token_step = one_token_step && step.counts[b] == 1;
    longest = std::max(longest, step.lengths[b] + static_cast<long long>(step.counts[b]));
  }
  token0 = 0;
  for (std::size_t b = 0; b < std::size_t(c.batch); ++b) {
    const std::size_t n = step.counts[b], used = entries(b);
    const long long length = one_token_step ? longest : step.lengths[b] + static_cast<long long>(n);
    const std::int32_t* table = step.tables.data() + b * width;
    const std::size_t pages = step.pool.size() / format.bytes();
    // Mutants: a copy of the table holding 8 or 256 entries.
    const std::size_t copied = one_token_step                 ? used
                               : faults_.paged_table_of_eight ? std::min<std::size_t>(used, 8)
                               : faults_.paged_table_of_256   ? std::min<std::size_t>(used, 256)
                                                              : used;
    auto page_of = [&](long long j) {
      // Mutant: the sequence's pages taken as consecutive from its first (kept inside the pool).
      const std::size_t page = faults_.paged_pages_contiguous
                                   ? std::min<std::size_t>(table[0] + j / kPageTokens, pages - 1)
                                   : physical_page(table, copied, j / kPageTokens, faults_);
      return pool + page * format.bytes();
    };
    // Mutant: the new tokens placed at sequence 0's length, as in a batch of equal lengths.
    const long long start = one_token_step                              ? longest - 1
                            : faults_.paged_positions_of_first_sequence ? step.lengths[0]
                                                                        : step.lengths[b];
    for (int h = 0; h < c.heads; ++h)
      for (std::size_t t = 0; t < n; ++t) {
        const std::size_t row = token0 * c.heads + h * n + t;
        const long long pos = start + static_cast<long long>(t);
        long long lo, hi;
        key_range_of(c, faults_, pos, length, lo, hi);
        hi = std::min(hi, length);
        attend(format, page_of, c, modifiers, static_cast<int>(b), h, h / group, &step.q[row * dk], pos, lo, hi,
               &step.o[row * dv], step.lse.empty() ? nullptr : &step.lse[row], scratch);
      }
    token0 += n;
  }
}

}  // namespace

std::unique_ptr<Kernel> make_quantized_decode_kernel(Scalar format) {
  return std::make_unique<QuantizedDecodeKernel>(format, KernelFaults{}, std::string("decode_") + to_string(format));
}

std::unique_ptr<Kernel> make_faulty_quantized_decode_kernel(Scalar format, const KernelFaults& faults,
                                                            std::string name) {
  return std::make_unique<QuantizedDecodeKernel>(format, faults, std::move(name));
}

}  // namespace attest
