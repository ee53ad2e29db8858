// Blocks of Br queries against all keys: one block's Br x Tk scores materialized, then a
// two-pass softmax (row max, then exponentials and sum) and the weighted values. The score
// block is built 64 keys at a time with the vectorized loops of simd_ops.h.
#include <vector>

#include "attest/kernels/builtin_kernels.h"
#include "kernel_support.h"
#include "simd_ops.h"

namespace attest {
namespace {

using namespace kernels;

constexpr int kChunk = 64;  // keys per vectorized score chunk

class BlockedKernel final : public Kernel {
 public:
  explicit BlockedKernel(int block_q) : block_q_(block_q) {
    if (block_q < 1) throw std::invalid_argument("blocked kernel: block_q must be >= 1");
  }
  std::string name() const override { return "blocked"; }
  Capabilities capabilities() const override {
    Capabilities c;
    c.features = c.features | FeatureSet::of_kind(FeatureKind::kModifier);
    c.contract.query_tile = block_q_;
    c.precision.exp_ulps = 2.0;  // the polynomial exp of simd_ops
    return c;
  }

  void forward(const Problem& p, std::span<float> o, std::span<float> lse) const override {
    const Shape& s = p.shape;
    const Layout at{s};
    const MaskView mask(p);
    const ModifierView modifiers(p);
    const float scale = static_cast<float>(p.effective_scale());
    const int tk = s.k_len, dk = s.head_dim, dv = s.value_dim, br = block_q_;
    const int chunks = (tk + kChunk - 1) / kChunk, ld = chunks * kChunk;
    std::vector<float> kt(std::size_t(chunks) * dk * kChunk);  // keys transposed, chunk by chunk
    std::vector<float> queries(std::size_t(br) * dk), chunk_scores(std::size_t(br) * kChunk);
    std::vector<float> scores(std::size_t(br) * ld);  // the block's score matrix
    std::vector<float> ones(br, 1.0f), key(dk), out_rows(std::size_t(br) * dv);

    for (int b = 0; b < s.batch; ++b)
      for (int h = 0; h < s.heads; ++h) {
        const int g = p.kv_head_of(h);
        for (int j = 0; j < ld; ++j) {
          if (j < tk) {
            std::copy_n(&p.k[at.k(b, g, j)], dk, key.begin());
            if (p.rope.enabled) rope_rotate(key.data(), dk, j, p.rope.base);
          } else {
            std::fill(key.begin(), key.end(), 0.0f);
          }
          float* chunk = &kt[std::size_t(j / kChunk) * dk * kChunk];
          for (int k = 0; k < dk; ++k) chunk[k * kChunk + j % kChunk] = key[k];
        }
        for (int i0 = 0; i0 < s.q_len; i0 += br) {
          const int rows = std::min(br, s.q_len - i0);
          std::copy_n(&p.q[at.q(b, h, i0)], std::size_t(rows) * dk, queries.begin());
          if (p.rope.enabled)
            for (int r = 0; r < rows; ++r)
              rope_rotate(&queries[std::size_t(r) * dk], dk, mask.position(i0 + r), p.rope.base);
          // Pass 0: the block's scores, chunk by chunk, then the mask.
          for (int c = 0; c < chunks; ++c) {
            // Columns past the real keys (rounded to 16) are left unset: the mask below sets them to -inf.
            const int width = std::min(kChunk, (tk - c * kChunk + 15) / 16 * 16);
            simd::scores(queries.data(), rows, dk, &kt[std::size_t(c) * dk * kChunk], kChunk, width, scale,
                         chunk_scores.data());
            for (int r = 0; r < rows; ++r)
              std::copy_n(&chunk_scores[std::size_t(r) * kChunk], kChunk, &scores[std::size_t(r) * ld + c * kChunk]);
          }
          for (int r = 0; r < rows; ++r) {
            float* row = &scores[std::size_t(r) * ld];
            const KeyRange range = mask.range(b, i0 + r);
            const int first = range.empty() ? 0 : range.lo, last = range.empty() ? 0 : range.hi;
            std::fill(row, row + first, kNegInf);
            std::fill(row + last, row + ld, kNegInf);
            if (mask.elementwise())
              for (int j = first; j < last; ++j)
                if (!mask.elementwise_visible(b, i0 + r, j)) row[j] = kNegInf;
            if (modifiers.changes_logits())
              for (int j = first; j < last; ++j)
                if (row[j] != kNegInf) row[j] = modifiers.logit(row[j], b, h, i0 + r, j, mask.position(i0 + r));
          }
          // Pass 1: row maxima. Pass 2: exponentials and sums, then the weighted values.
          std::fill_n(out_rows.begin(), std::size_t(rows) * dv, 0.0f);
          for (int r = 0; r < rows; ++r) {
            float* row = &scores[std::size_t(r) * ld];
            float* out_lse = lse.empty() ? nullptr : &lse[at.lse(b, h, i0 + r)];
            // A sink is one more term of the denominator (and of the max, for stability).
            const bool sink = modifiers.has_sinks();
            const float max_score = sink ? std::max(simd::max_of(row, ld), modifiers.sink(h)) : simd::max_of(row, ld);
            if (max_score == kNegInf) {
              std::fill(row, row + ld, 0.0f);
              if (out_lse) *out_lse = kNegInf;
              continue;
            }
            const float sum =
                simd::exp_shift_sum(row, ld, max_score) + (sink ? std::exp(modifiers.sink(h) - max_score) : 0.0f);
            simd::scale(row, ld, 1.0f / sum);
            if (out_lse) *out_lse = max_score + std::log(sum);
          }
          // Empty rows have all-zero weights, so they come out as the zero policy's O = 0.
          simd::rescale_accumulate_rows(out_rows.data(), rows, dv, ones.data(), scores.data(), ld, tk,
                                        &p.v[at.v(b, g, 0)]);
          std::copy_n(out_rows.begin(), std::size_t(rows) * dv, &o[at.o(b, h, i0)]);
        }
      }
  }

 private:
  int block_q_;
};

}  // namespace

std::unique_ptr<Kernel> make_blocked_kernel(int block_q) { return std::make_unique<BlockedKernel>(block_q); }

}  // namespace attest
