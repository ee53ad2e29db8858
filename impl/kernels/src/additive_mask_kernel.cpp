// A kernel that masks the way a float mask does (PyTorch's math path, ONNX Runtime's attention
// operators, ggml's tiled path): every key is scored, then a masked key's score gets -inf added,
// and the softmax and P.V run over every key. Exact in float32 where its inputs are what it
// declares: a masked key that is NaN, or whose score overflows, turns its row NaN (NaN + -inf), so
// the honest declaration is InputDomain::kMaskedScored. With `max_before_mask` it has the bug of
// taking the row max over the scores before the -inf lands: a masked key's large score then flushes
// every visible weight to 0.
#include <algorithm>
#include <cmath>
#include <vector>

#include "attest/kernels/builtin_kernels.h"
#include "kernel_support.h"

namespace attest {
namespace {

using namespace kernels;

class AdditiveMaskKernel final : public Kernel {
 public:
  AdditiveMaskKernel(InputDomain inputs, bool max_before_mask) : inputs_(inputs), max_before_mask_(max_before_mask) {}
  std::string name() const override {
    return std::string(max_before_mask_ ? "additive-mask-max-before-mask" : "additive-mask") + "[" +
           to_string(inputs_) + "]";
  }
  Capabilities capabilities() const override {
    Capabilities c;
    c.features = c.features | FeatureSet::of_kind(FeatureKind::kModifier);
    c.inputs = inputs_;
    return c;
  }

  void forward(const Problem& p, std::span<float> o, std::span<float> lse) const override {
    const Shape& s = p.shape;
    const Layout at{s};
    const MaskView mask(p);
    const ModifierView modifiers(p);
    const float scale = static_cast<float>(p.effective_scale());
    std::vector<float> keys(std::size_t(s.k_len) * s.head_dim), query(s.head_dim), logits(s.k_len);
    for (int b = 0; b < s.batch; ++b)
      for (int h = 0; h < s.heads; ++h) {
        const int g = p.kv_head_of(h);
        std::copy_n(&p.k[at.k(b, g, 0)], keys.size(), keys.begin());
        if (p.rope.enabled)
          for (int j = 0; j < s.k_len; ++j) rope_rotate(&keys[std::size_t(j) * s.head_dim], s.head_dim, j, p.rope.base);
        for (int i = 0; i < s.q_len; ++i) {
          std::copy_n(&p.q[at.q(b, h, i)], s.head_dim, query.begin());
          if (p.rope.enabled) rope_rotate(query.data(), s.head_dim, mask.position(i), p.rope.base);
          float max_logit = kNegInf;
          for (int j = 0; j < s.k_len; ++j) {
            const float scored = dot(query.data(), &keys[std::size_t(j) * s.head_dim], s.head_dim) * scale;
            const float logit = modifiers.logit(scored, b, h, i, j, mask.position(i));
            logits[j] = logit + (mask.visible(b, i, j) ? 0.0f : kNegInf);  // the float mask
            max_logit = std::max(max_logit, max_before_mask_ ? logit : logits[j]);
          }
          if (modifiers.has_sinks()) max_logit = std::max(max_logit, modifiers.sink(h));
          float* out = &o[at.o(b, h, i)];
          float* out_lse = lse.empty() ? nullptr : &lse[at.lse(b, h, i)];
          if (max_logit == kNegInf) {
            write_empty_row(out, s.value_dim, out_lse);
            continue;
          }
          float sum = modifiers.has_sinks() ? std::exp(modifiers.sink(h) - max_logit) : 0.0f;
          std::fill(out, out + s.value_dim, 0.0f);
          for (int j = 0; j < s.k_len; ++j) {  // every key: a masked one adds 0 x v
            const float w = std::exp(logits[j] - max_logit);
            sum += w;
            const float* value = &p.v[at.v(b, g, j)];
            for (int r = 0; r < s.value_dim; ++r) out[r] += w * value[r];
          }
          for (int r = 0; r < s.value_dim; ++r) out[r] /= sum;
          if (out_lse) *out_lse = max_logit + std::log(sum);
        }
      }
  }

 private:
  InputDomain inputs_;
  bool max_before_mask_;
};

}  // namespace

std::unique_ptr<Kernel> make_additive_mask_kernel(InputDomain inputs, bool max_before_mask) {
  return std::make_unique<AdditiveMaskKernel>(inputs, max_before_mask);
}

}  // namespace attest
