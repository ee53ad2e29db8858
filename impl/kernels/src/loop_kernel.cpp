// The textbook kernel: for each query row, all scores, a stable softmax, the weighted sum.
// With a precision to emulate it is the precision gate's model kernel: it rounds exactly where
// that precision says (inputs on entry, scores, P, the weight sum, the P.V accumulator, O's
// storage) and nowhere else, and, with flushed subnormals declared, with FTZ and DAZ set.
#include <limits>
#include <span>
#include <vector>

#include "attest/kernels/builtin_kernels.h"
#include "attest/model/quantized.h"
#include "backward_kernels.h"
#include "flush_subnormals.h"
#include "kernel_support.h"

namespace attest {
namespace {

using namespace kernels;

// round_to, with f32 (where it changes nothing) decided inline: the model kernel rounds up to three
// times per multiply-add, and selfcheck's declarations mostly round in f32.
inline float rounded(float x, Scalar s) { return s == Scalar::kF32 ? x : round_to(x, s); }

class LoopKernel final : public Kernel {
 public:
  explicit LoopKernel(Precision emulated = {}, int key_tile = 0)
      : p_(emulated), rounds_(!emulated.all_f32()), key_tile_(key_tile) {}
  std::string name() const override { return rounds_ ? "loop-model[" + p_.summary() + "]" : "loop"; }
  Capabilities capabilities() const override {
    Capabilities c;
    c.features = c.features | FeatureSet::of_kind(FeatureKind::kModifier);
    c.precision = p_;
    if (!rounds_) c.features.insert(Feature::kBackward), c.deterministic_backward = true;
    c.packed = !rounds_;  // its packed forward is float32 arithmetic: the model kernel's rounding is not in it
    return c;
  }

  void forward(const Problem& p, std::span<float> o, std::span<float> lse) const override { compute(p, o, lse, {}); }
  void backward(const Problem& p, const BackwardInputs& in, const GradientSpans& out) const override {
    loop_backward(p, in, out);
  }
  void forward_packed(const PackedCall& call, std::span<float> o, std::span<float> lse) const override {
    packed_forward(call, o, lse);
  }

  // Only query rows `rows` of every batch entry and head (empty: all); the others are left as they
  // are. Each row is computed exactly as forward computes it.
  void compute(const Problem& p, std::span<float> o, std::span<float> lse, const std::vector<int>& rows) const {
    const FlushSubnormals flush(p_.flush_subnormals);  // declared: the model flushes as hardware may
    const Shape& s = p.shape;
    const Layout at{s};
    const MaskView mask(p);
    const ModifierView modifiers(p);
    const float scale = static_cast<float>(p.effective_scale());
    std::vector<float> keys(static_cast<std::size_t>(s.k_len) * s.head_dim);
    std::vector<float> values(static_cast<std::size_t>(s.k_len) * s.value_dim);
    std::vector<float> query(s.head_dim);
    std::vector<float> scores(s.k_len);
    std::vector<float> weights(s.k_len);
    std::vector<float> tile_out(s.value_dim);  // one key tile's share of the P.V sum

    for (int b = 0; b < s.batch; ++b) {
      for (int h = 0; h < s.heads; ++h) {
        const int g = p.kv_head_of(h);
        std::copy_n(&p.k[at.k(b, g, 0)], keys.size(), keys.begin());
        for (float& x : keys) x = rounded(x, p_.k_entry);
        // V rounded on entry once per head, not once per query row that reads it.
        std::copy_n(&p.v[at.v(b, g, 0)], values.size(), values.begin());
        for (float& x : values) x = rounded(x, p_.v_entry);
        if (p.rope.enabled)
          for (int j = 0; j < s.k_len; ++j) rope_rotate(&keys[std::size_t(j) * s.head_dim], s.head_dim, j, p.rope.base);

        for (int n = 0; n < (rows.empty() ? s.q_len : static_cast<int>(rows.size())); ++n) {
          const int i = rows.empty() ? n : rows[n];
          float* out = &o[at.o(b, h, i)];
          float* out_lse = lse.empty() ? nullptr : &lse[at.lse(b, h, i)];
          std::copy_n(&p.q[at.q(b, h, i)], s.head_dim, query.begin());
          round_on_entry(query, p_.q_entry);
          if (p.rope.enabled) rope_rotate(query.data(), s.head_dim, mask.position(i), p.rope.base);

          // Keys outside the row's range (causal, window, chunk, padding) are never visited; the
          // per-key terms are checked inside it.
          const KeyRange seen = mask.range(b, i);
          float max_score = kNegInf;
          for (int j = seen.lo; j < seen.hi; ++j) {
            if (!mask.elementwise_visible(b, i, j)) {
              scores[j] = kNegInf;
              continue;
            }
            scores[j] = rounds_ ? score_rounded(query.data(), &keys[std::size_t(j) * s.head_dim], s.head_dim, scale)
                                : dot(query.data(), &keys[std::size_t(j) * s.head_dim], s.head_dim) * scale;
            if (modifiers.changes_logits()) scores[j] = modifiers.logit(scores[j], b, h, i, j, mask.position(i));
            max_score = std::max(max_score, scores[j]);
          }
          // A sink is one more term of the denominator (and of the max, for stability).
          if (modifiers.has_sinks()) max_score = std::max(max_score, modifiers.sink(h));
          if (max_score == kNegInf) {
            write_empty_row(out, s.value_dim, out_lse);
            continue;
          }
          float sum = modifiers.has_sinks() ? std::exp(modifiers.sink(h) - max_score) : 0.0f;
          for (const KeyRange t : tiles(seen)) {
            float tile_sum = t.lo == seen.lo ? sum : 0.0f;  // the first tile starts from the sink
            for (int j = t.lo; j < t.hi; ++j) {
              weights[j] = scores[j] == kNegInf ? 0.0f : std::exp(scores[j] - max_score);
              tile_sum = rounded(tile_sum + weights[j], p_.sum_precision());
            }
            sum = t.lo == seen.lo ? tile_sum : rounded(sum + tile_sum, p_.sum_precision());
          }
          // Normalised: P = w / sum enters the accumulator. Unnormalised: w itself does, and the
          // sum divides at the end, so the accumulator holds up to (keys x |v|) and may overflow.
          std::fill(out, out + s.value_dim, 0.0f);
          for (const KeyRange t : tiles(seen)) {
            std::fill(tile_out.begin(), tile_out.end(), 0.0f);
            for (int j = t.lo; j < t.hi; ++j) {
              if (weights[j] == 0.0f) continue;  // masked keys must not touch the output
              const float pj = rounded(p_.pv_unnormalised ? weights[j] : weights[j] / sum, p_.p);
              const float* value = &values[std::size_t(j) * s.value_dim];
              for (int r = 0; r < s.value_dim; ++r)
                tile_out[r] = acc(tile_out[r] + pj * value[r]);  // one rounding per add
            }
            for (int r = 0; r < s.value_dim; ++r) out[r] = t.lo == seen.lo ? tile_out[r] : acc(out[r] + tile_out[r]);
          }
          if (p_.pv_unnormalised)
            for (int r = 0; r < s.value_dim; ++r) out[r] = acc(out[r] / sum);
          for (int r = 0; r < s.value_dim; ++r) out[r] = rounded(out[r], p_.o);
          if (out_lse) *out_lse = max_score + std::log(sum);
        }
      }
    }
  }

 private:
  float acc(float x) const { return rounded(x, p_.accumulator); }
  // The row's keys in the declared key tiles (aligned to key 0, as the bound counts them), each
  // summed apart and then added: without a tile, one pass over all keys.
  std::vector<KeyRange> tiles(KeyRange seen) const {
    if (key_tile_ <= 0 || seen.hi <= seen.lo) return {seen};
    std::vector<KeyRange> out;
    for (int lo = seen.lo; lo < seen.hi; lo = (lo / key_tile_ + 1) * key_tile_)
      out.push_back({lo, std::min(seen.hi, (lo / key_tile_ + 1) * key_tile_)});
    return out;
  }
  // q.k accumulated in the score format, then scaled there.
  float score_rounded(const float* q, const float* k, int n, float scale) const {
    float sum = 0.0f;
    for (int i = 0; i < n; ++i) sum = rounded(sum + rounded(q[i] * k[i], p_.scores), p_.scores);
    return rounded(sum * scale, p_.scores);
  }

  Precision p_;
  bool rounds_;
  int key_tile_;
};

}  // namespace

std::unique_ptr<Kernel> make_loop_kernel() { return std::make_unique<LoopKernel>(); }
std::unique_ptr<Kernel> make_model_kernel(const Precision& emulated, int key_tile) {
  return std::make_unique<LoopKernel>(emulated, key_tile);
}

Outputs run_model_rows(const Precision& emulated, const Problem& p, const std::vector<int>& query_rows) {
  p.validate();
  Outputs out;
  out.o.assign(p.o_size(), std::numeric_limits<float>::quiet_NaN());
  out.lse.assign(p.lse_size(), std::numeric_limits<float>::quiet_NaN());
  LoopKernel(emulated).compute(p, out.o, out.lse, query_rows);
  return out;
}

}  // namespace attest
