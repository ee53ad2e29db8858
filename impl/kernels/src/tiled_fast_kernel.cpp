// The built-in tiled kernel: online softmax over Br x Bc tiles (FlashAttention-2 style) with
// vectorized inner loops (simd_ops.h). Per query tile: each key tile is loaded transposed once,
// then for each panel of 4 rows a 4 x Bc score block is computed, masked and folded into the
// rows' running max, sum and accumulator; normalization is deferred to the end. Workspace
// O(Br*Dk + Br*Dv + Bc*Dk), never O(Tq*Tk).
// tiled_kernel.cpp is the same algorithm in plain scalar code, with the mutation switches.
#include <limits>
#include <vector>

#include "attest/builtin_kernels.h"
#include "backward_kernels.h"
#include "kernel_support.h"
#include "simd_ops.h"

namespace attest {
namespace {

using namespace kernels;

class FastTiledKernel final : public Kernel {
 public:
  explicit FastTiledKernel(TiledConfig config) : cfg_(config) {
    if (cfg_.block_q < 1 || cfg_.block_k < 1)
      throw std::invalid_argument("tiled kernel: block_q and block_k must be >= 1");
  }
  std::string name() const override { return "tiled"; }
  Capabilities capabilities() const override {
    Capabilities c;
    c.features = c.features | FeatureSet::of_kind(FeatureKind::kModifier);
    c.contract.query_tile = cfg_.block_q;
    c.contract.key_tile = cfg_.block_k;
    c.precision.exp_ulps = 2.0;  // the polynomial exp of simd_ops
    c.features.insert(Feature::kBackward);
    c.deterministic_backward = true;
    c.merge = true;
    return c;
  }
  void merge(const MergeInputs& in, std::span<float> o, std::span<float> lse) const override {
    merge_states(in, o, lse);
  }
  void backward(const Problem& p, const BackwardInputs& in, const GradientSpans& out) const override {
    tiled_backward_fast(p, in, out, cfg_.block_q, cfg_.block_k);
  }

  void forward(const Problem& p, std::span<float> o, std::span<float> lse) const override {
    const Shape& s = p.shape;
    const Layout at{s};
    const MaskView mask(p);
    const ModifierView modifiers(p);
    const float scale = static_cast<float>(p.effective_scale());
    const int br = cfg_.block_q, bc = cfg_.block_k, dk = s.head_dim, dv = s.value_dim;
    std::vector<float> q_tile(std::size_t(br) * dk), rotated_keys(std::size_t(bc) * dk);
    std::vector<float> kt(std::size_t(dk) * bc);  // the key tile, transposed
    std::vector<float> s_panel(std::size_t(kPanel) * bc);
    std::vector<float> acc(std::size_t(br) * dv), row_max(br), row_sum(br), rescale(br);
    std::vector<KeyRange> ranges(br);

    for (int b = 0; b < s.batch; ++b)
      for (int h = 0; h < s.heads; ++h) {
        const int g = p.kv_head_of(h);
        for (int i0 = 0; i0 < s.q_len; i0 += br) {
          const int rows = std::min(br, s.q_len - i0);
          std::copy_n(&p.q[at.q(b, h, i0)], std::size_t(rows) * dk, q_tile.begin());
          KeyRange tile_range{s.k_len, 0};
          for (int r = 0; r < rows; ++r) {
            ranges[r] = mask.range(b, i0 + r);
            if (ranges[r].empty()) continue;
            tile_range = {std::min(tile_range.lo, ranges[r].lo), std::max(tile_range.hi, ranges[r].hi)};
            if (p.rope.enabled) rope_rotate(&q_tile[std::size_t(r) * dk], dk, mask.position(i0 + r), p.rope.base);
          }
          // A sink starts each row's state: it is the first term of the max and of the sum.
          const bool sink = modifiers.has_sinks();
          std::fill_n(row_max.begin(), rows, sink ? modifiers.sink(h) : kNegInf);
          std::fill_n(row_sum.begin(), rows, sink ? 1.0f : 0.0f);
          std::fill_n(acc.begin(), std::size_t(rows) * dv, 0.0f);

          // The transposed key tile is shared by every panel of the query tile; tiles outside the
          // query tile's [lo, hi) are skipped, and so are tiles outside a panel's own range.
          for (int j0 = (tile_range.lo / bc) * bc; j0 < tile_range.hi; j0 += bc) {
            const int cols = std::min(bc, s.k_len - j0);
            const int width = std::min(bc, (cols + 15) / 16 * 16);  // scores past it are never read
            load_transposed(p, b, g, j0, cols, rotated_keys, kt);
            for (int r0 = 0; r0 < rows; r0 += kPanel) {
              const int panel_rows = std::min(kPanel, rows - r0);
              if (!panel_overlaps(&ranges[r0], panel_rows, j0, j0 + cols)) continue;
              simd::scores(&q_tile[std::size_t(r0) * dk], panel_rows, dk, kt.data(), bc, width, scale, s_panel.data());
              for (int r = r0; r < r0 + panel_rows; ++r)
                apply_mask(mask, modifiers, b, h, i0 + r, ranges[r], j0, cols, &s_panel[std::size_t(r - r0) * bc]);
              simd::softmax_fold_rows(s_panel.data(), panel_rows, bc, cols, &row_max[r0], &row_sum[r0], &rescale[r0]);
              simd::rescale_accumulate_rows(&acc[std::size_t(r0) * dv], panel_rows, dv, &rescale[r0], s_panel.data(),
                                            bc, cols, &p.v[at.v(b, g, j0)]);
            }
          }

          for (int r = 0; r < rows; ++r) {
            float* out = &o[at.o(b, h, i0 + r)];
            float* out_lse = lse.empty() ? nullptr : &lse[at.lse(b, h, i0 + r)];
            if (row_max[r] == kNegInf) {
              write_empty_row(out, dv, out_lse);
              continue;
            }
            std::copy_n(&acc[std::size_t(r) * dv], dv, out);
            simd::scale(out, dv, 1.0f / row_sum[r]);
            if (out_lse) *out_lse = row_max[r] + std::log(row_sum[r]);
          }
        }
      }
  }

 private:
  // kt[k][c] = K[j0 + c][k] (rotated when RoPE is on), zero for c >= cols.
  void load_transposed(const Problem& p, int b, int g, int j0, int cols, std::vector<float>& rotated_keys,
                       std::vector<float>& kt) const {
    const Layout at{p.shape};
    const int dk = p.shape.head_dim;
    const float* keys = &p.k[at.k(b, g, j0)];
    if (p.rope.enabled) {
      std::copy_n(keys, std::size_t(cols) * dk, rotated_keys.begin());
      for (int c = 0; c < cols; ++c) rope_rotate(&rotated_keys[std::size_t(c) * dk], dk, j0 + c, p.rope.base);
      keys = rotated_keys.data();
    }
    simd::transpose(keys, cols, dk, kt.data(), cfg_.block_k);
  }

  static constexpr int kPanel = 4;  // query rows per micro-kernel call (simd_ops blocks by four)

  TiledConfig cfg_;
};

}  // namespace

std::unique_ptr<Kernel> make_tiled_kernel(TiledConfig config) { return std::make_unique<FastTiledKernel>(config); }

}  // namespace attest
