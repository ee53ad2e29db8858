// Online softmax over Br x Bc tiles (FlashAttention-2 style): running max and sum per row,
// deferred normalization, no Tq x Tk buffer. Workspace is O(Br*Bc + Br*Dv + Bc*Dk).
#include <vector>

#include "attest/kernels.h"
#include "kernel_support.h"

namespace attest {
namespace {

using namespace kernels;

class TiledKernel final : public Kernel {
 public:
  explicit TiledKernel(TiledConfig config) : cfg_(config) {
    if (cfg_.block_q < 1 || cfg_.block_k < 1)
      throw std::invalid_argument("tiled kernel: block_q and block_k must be >= 1");
  }
  std::string name() const override { return "tiled"; }
  Capabilities capabilities() const override {
    Capabilities c;
    c.key_tile = cfg_.block_k;
    return c;
  }

  void forward(const Problem& p, std::span<float> o, std::span<float> lse) const override {
    const Shape& s = p.shape;
    const Layout at{s};
    const MaskView mask(p);
    const float scale = static_cast<float>(p.effective_scale());
    const int br = cfg_.block_q, bc = cfg_.block_k, dk = s.head_dim, dv = s.value_dim;
    std::vector<float> q_tile(std::size_t(br) * dk);
    std::vector<float> k_tile(std::size_t(bc) * dk);
    std::vector<float> s_tile(std::size_t(br) * bc);
    std::vector<float> acc(std::size_t(br) * dv);
    std::vector<float> row_max(br), row_sum(br);
    std::vector<KeyRange> ranges(br);

    for (int b = 0; b < s.batch; ++b) {
      for (int h = 0; h < s.heads; ++h) {
        const int g = p.kv_head_of(h);
        for (int i0 = 0; i0 < s.q_len; i0 += br) {
          const int rows = std::min(br, s.q_len - i0);
          std::copy_n(&p.q[at.q(b, h, i0)], std::size_t(rows) * dk, q_tile.begin());
          // Keys any row of this tile may see; key tiles outside it are skipped whole.
          int lo = s.k_len, hi = 0;
          for (int r = 0; r < rows; ++r) {
            ranges[r] = mask.range(b, i0 + r);
            if (ranges[r].empty()) continue;
            lo = std::min(lo, ranges[r].lo);
            hi = std::max(hi, ranges[r].hi);
            if (p.rope.enabled) rope_rotate(&q_tile[std::size_t(r) * dk], dk, mask.position(i0 + r), p.rope.base);
          }
          std::fill(row_max.begin(), row_max.end(), kNegInf);
          std::fill(row_sum.begin(), row_sum.end(), 0.0f);
          std::fill(acc.begin(), acc.end(), 0.0f);

          for (int j0 = (lo / bc) * bc; j0 < hi; j0 += bc) {
            const int cols = std::min(bc, s.k_len - j0);
            if (!score_tile(p, mask, b, g, i0, rows, j0, cols, scale, ranges, q_tile, k_tile, s_tile)) continue;
            for (int r = 0; r < rows; ++r) {
              float* srow = &s_tile[std::size_t(r) * bc];
              float tile_max = kNegInf;
              for (int c = 0; c < cols; ++c) tile_max = std::max(tile_max, srow[c]);
              if (tile_max == kNegInf) continue;
              const float new_max = std::max(row_max[r], tile_max);
              const float rescale = std::exp(row_max[r] - new_max);  // exp(-inf) = 0 on the first tile
              float* arow = &acc[std::size_t(r) * dv];
              for (int c = 0; c < dv; ++c) arow[c] *= rescale;
              float tile_sum = 0.0f;
              for (int c = 0; c < cols; ++c) {
                if (srow[c] == kNegInf) continue;  // masked: never touch its value row
                const float pc = std::exp(srow[c] - new_max);
                tile_sum += pc;
                const float* value = &p.v[at.v(b, g, j0 + c)];
                for (int d = 0; d < dv; ++d) arow[d] += pc * value[d];
              }
              row_sum[r] = row_sum[r] * rescale + tile_sum;
              row_max[r] = new_max;
            }
          }

          for (int r = 0; r < rows; ++r) {
            float* out = &o[at.o(b, h, i0 + r)];
            float* out_lse = lse.empty() ? nullptr : &lse[at.lse(b, h, i0 + r)];
            if (row_max[r] == kNegInf) {
              write_empty_row(out, dv, out_lse);
              continue;
            }
            const float* arow = &acc[std::size_t(r) * dv];
            for (int d = 0; d < dv; ++d) out[d] = arow[d] / row_sum[r];
            if (out_lse) *out_lse = row_max[r] + std::log(row_sum[r]);
          }
        }
      }
    }
  }

 private:
  // Fills s_tile with masked, scaled scores; returns false when every entry is masked.
  static bool score_tile(const Problem& p, const MaskView& mask, int b, int g, int i0, int rows, int j0,
                         int cols, float scale, const std::vector<KeyRange>& ranges,
                         const std::vector<float>& q_tile, std::vector<float>& k_tile,
                         std::vector<float>& s_tile) {
    const Shape& s = p.shape;
    const Layout at{s};
    const int dk = s.head_dim, bc = static_cast<int>(s_tile.size() / ranges.size());
    std::copy_n(&p.k[at.k(b, g, j0)], std::size_t(cols) * dk, k_tile.begin());
    if (p.rope.enabled)
      for (int c = 0; c < cols; ++c) rope_rotate(&k_tile[std::size_t(c) * dk], dk, j0 + c, p.rope.base);
    bool any = false;
    for (int r = 0; r < rows; ++r) {
      float* srow = &s_tile[std::size_t(r) * bc];
      for (int c = 0; c < cols; ++c) {
        const int j = j0 + c;
        const bool visible = j >= ranges[r].lo && j < ranges[r].hi &&
                             (!mask.elementwise() || mask.elementwise_visible(b, i0 + r, j));
        srow[c] = visible ? dot(&q_tile[std::size_t(r) * dk], &k_tile[std::size_t(c) * dk], dk) * scale : kNegInf;
        any = any || visible;
      }
    }
    return any;
  }

  TiledConfig cfg_;
};

}  // namespace

std::unique_ptr<Kernel> make_tiled_kernel(TiledConfig config) { return std::make_unique<TiledKernel>(config); }

}  // namespace attest
