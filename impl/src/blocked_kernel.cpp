// Blocks of Br queries against all keys: one block's scores materialized, two-pass softmax.
#include <vector>

#include "attest/kernels.h"
#include "kernel_support.h"

namespace attest {
namespace {

using namespace kernels;

class BlockedKernel final : public Kernel {
 public:
  explicit BlockedKernel(int block_q) : block_q_(block_q) {
    if (block_q < 1) throw std::invalid_argument("blocked kernel: block_q must be >= 1");
  }
  std::string name() const override { return "blocked"; }
  Capabilities capabilities() const override { return {}; }

  void forward(const Problem& p, std::span<float> o, std::span<float> lse) const override {
    const Shape& s = p.shape;
    const Layout at{s};
    const MaskView mask(p);
    const float scale = static_cast<float>(p.effective_scale());
    const std::size_t tk = s.k_len, dk = s.head_dim;
    std::vector<float> keys(tk * dk);
    std::vector<float> queries(std::size_t(block_q_) * dk);
    std::vector<float> scores(std::size_t(block_q_) * tk);  // the block's score matrix

    for (int b = 0; b < s.batch; ++b) {
      for (int h = 0; h < s.heads; ++h) {
        const int g = p.kv_head_of(h);
        std::copy_n(&p.k[at.k(b, g, 0)], keys.size(), keys.begin());
        if (p.rope.enabled)
          for (std::size_t j = 0; j < tk; ++j) rope_rotate(&keys[j * dk], s.head_dim, j, p.rope.base);

        for (int i0 = 0; i0 < s.q_len; i0 += block_q_) {
          const int rows = std::min(block_q_, s.q_len - i0);
          std::copy_n(&p.q[at.q(b, h, i0)], rows * dk, queries.begin());
          // Pass 0: scores of the whole block.
          for (int r = 0; r < rows; ++r) {
            float* row = &scores[r * tk];
            const KeyRange range = mask.range(b, i0 + r);
            std::fill(row, row + tk, kNegInf);
            if (range.empty()) continue;
            float* q = &queries[r * dk];
            if (p.rope.enabled) rope_rotate(q, s.head_dim, mask.position(i0 + r), p.rope.base);
            for (int j = range.lo; j < range.hi; ++j)
              if (!mask.elementwise() || mask.elementwise_visible(b, i0 + r, j))
                row[j] = dot(q, &keys[j * dk], s.head_dim) * scale;
          }
          // Pass 1: row maxima. Pass 2: exponentials and sums, then the weighted values.
          for (int r = 0; r < rows; ++r) {
            float* row = &scores[r * tk];
            float* out = &o[at.o(b, h, i0 + r)];
            float* out_lse = lse.empty() ? nullptr : &lse[at.lse(b, h, i0 + r)];
            float max_score = kNegInf;
            for (std::size_t j = 0; j < tk; ++j) max_score = std::max(max_score, row[j]);
            if (max_score == kNegInf) {
              write_empty_row(out, s.value_dim, out_lse);
              continue;
            }
            float sum = 0.0f;
            for (std::size_t j = 0; j < tk; ++j) {
              row[j] = row[j] == kNegInf ? 0.0f : std::exp(row[j] - max_score);
              sum += row[j];
            }
            std::fill(out, out + s.value_dim, 0.0f);
            const float inv_sum = 1.0f / sum;
            for (std::size_t j = 0; j < tk; ++j) {
              if (row[j] == 0.0f) continue;
              const float pj = row[j] * inv_sum;
              const float* value = &p.v[at.v(b, g, j)];
              for (int c = 0; c < s.value_dim; ++c) out[c] += pj * value[c];
            }
            if (out_lse) *out_lse = max_score + std::log(sum);
          }
        }
      }
    }
  }

 private:
  int block_q_;
};

}  // namespace

std::unique_ptr<Kernel> make_blocked_kernel(int block_q) { return std::make_unique<BlockedKernel>(block_q); }

}  // namespace attest
