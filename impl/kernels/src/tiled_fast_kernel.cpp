// The built-in tiled kernel: online softmax over Br x Bc tiles (FlashAttention-2 style) with
// vectorized inner loops (simd_ops.h). Per query tile: each key tile is loaded transposed once,
// then for each panel of 4 rows a 4 x Bc score block is computed, masked and folded into the
// rows' running max, sum and accumulator; normalization is deferred to the end. Workspace
// O(Br*Dk + Br*Dv + Bc*Dk), never O(Tq*Tk).
// tiled_kernel.cpp is the same algorithm in plain scalar code, with the mutation switches.
#include <limits>
#include <vector>

#include "attest/kernels/builtin_kernels.h"
#include "attest/kernels/packed.h"
#include "backward_kernels.h"
#include "builtin_tiled.h"
#include "kernel_support.h"
#include "simd_ops.h"

namespace attest {
namespace {

using namespace kernels;

class FastTiledKernel final : public Kernel {
 public:
  FastTiledKernel(TiledConfig config, bool packed) : cfg_(config), packed_(packed) {
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
    c.packed = packed_;  // forward_packed reads the packed buffers in place (declared by the built-in)
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
    Workspace w(cfg_, s.head_dim, s.value_dim);
    for (int b = 0; b < s.batch; ++b)
      for (int h = 0; h < s.heads; ++h) {
        const int g = p.kv_head_of(h);
        const HeadRows x{.q = &p.q[at.q(b, h, 0)],
                         .k = &p.k[at.k(b, g, 0)],
                         .v = &p.v[at.v(b, g, 0)],
                         .o = &o[at.o(b, h, 0)],
                         .lse = lse.empty() ? nullptr : &lse[at.lse(b, h, 0)],
                         .q_step = std::size_t(s.head_dim),
                         .k_step = std::size_t(s.head_dim),
                         .v_step = std::size_t(s.value_dim),
                         .o_step = std::size_t(s.value_dim),
                         .q_rows = s.q_len,
                         .k_rows = s.k_len};
        const auto keys_of = [&](int i) { return mask.range(b, i); };
        attend(p, mask, b, h, x, keys_of, w);
      }
  }

  // The packed varlen layout read in place: each sequence's rows by their offsets and strides
  // (token-major, heads interleaved), tiles gathered from them as from the padded layout's.
  void forward_packed(const PackedCall& c, std::span<float> o, std::span<float> lse) const override {
    const Problem& t = c.terms;  // no padding: a sequence's keys end at its own length
    const Shape& s = t.shape;
    const MaskView mask(t);
    Workspace w(cfg_, s.head_dim, s.value_dim);
    const std::size_t heads = s.heads, kv_heads = s.kv_heads, dk = s.head_dim, dv = s.value_dim;
    for (int b = 0; b < c.sequences(); ++b) {
      const std::size_t q0 = c.cu_seqlens_q[b], k0 = c.cu_seqlens_k[b];
      const int nk = c.cu_seqlens_k[b + 1] - c.cu_seqlens_k[b];
      for (int h = 0; h < s.heads; ++h) {
        const std::size_t g = t.kv_head_of(h);
        const HeadRows x{.q = c.q.data() + (q0 * heads + h) * dk,
                         .k = c.k.data() + (k0 * kv_heads + g) * dk,
                         .v = c.v.data() + (k0 * kv_heads + g) * dv,
                         .o = o.data() + (q0 * heads + h) * dv,
                         .lse = lse.empty() ? nullptr : lse.data() + std::size_t(h) * c.total_q() + q0,
                         .q_step = heads * dk,
                         .k_step = kv_heads * dk,
                         .v_step = kv_heads * dv,
                         .o_step = heads * dv,
                         .q_rows = c.cu_seqlens_q[b + 1] - c.cu_seqlens_q[b],
                         .k_rows = nk};
        const auto keys_of = [&](int i) {  // the terms' range, cut at the sequence's last key
          const KeyRange r = mask.range(b, i);
          return r.hi <= nk ? r : nk > r.lo ? KeyRange{r.lo, nk} : KeyRange{0, 0};
        };
        attend(t, mask, b, h, x, keys_of, w);
      }
    }
  }

 private:
  // One query head of one sequence: where its rows start in each buffer and how far apart they
  // are (the padded layout's rows are contiguous, the packed layout's interleave the heads).
  struct HeadRows {
    const float *q, *k, *v;
    float *o, *lse;  // lse: consecutive rows in both layouts; NULL when not wanted
    std::size_t q_step, k_step, v_step, o_step;
    int q_rows, k_rows;
  };
  struct Workspace {
    Workspace(const TiledConfig& cfg, int dk, int dv)
        : q_tile(std::size_t(cfg.block_q) * dk),
          keys(std::size_t(cfg.block_k) * dk),
          values(std::size_t(cfg.block_k) * dv),
          kt(std::size_t(dk) * cfg.block_k),
          s_panel(std::size_t(kPanel) * cfg.block_k),
          acc(std::size_t(cfg.block_q) * dv),
          row_max(cfg.block_q),
          row_sum(cfg.block_q),
          rescale(cfg.block_q),
          ranges(cfg.block_q) {}
    std::vector<float> q_tile, keys, values;
    std::vector<float> kt;  // the key tile, transposed
    std::vector<float> s_panel, acc, row_max, row_sum, rescale;
    std::vector<KeyRange> ranges;
  };

  // Online softmax over the rows of `x`, query tile by query tile; range_of(i) is the keys row i sees.
  template <typename RangeOf>
  void attend(const Problem& p, const MaskView& mask, int b, int h, const HeadRows& x, RangeOf range_of,
              Workspace& w) const {
    const ModifierView modifiers(p);
    const float scale = static_cast<float>(p.effective_scale());
    const int br = cfg_.block_q, bc = cfg_.block_k, dk = p.shape.head_dim, dv = p.shape.value_dim;
    for (int i0 = 0; i0 < x.q_rows; i0 += br) {
      const int rows = std::min(br, x.q_rows - i0);
      for (int r = 0; r < rows; ++r) std::copy_n(x.q + (i0 + r) * x.q_step, dk, &w.q_tile[std::size_t(r) * dk]);
      KeyRange tile_range{x.k_rows, 0};
      for (int r = 0; r < rows; ++r) {
        w.ranges[r] = range_of(i0 + r);
        if (w.ranges[r].empty()) continue;
        tile_range = {std::min(tile_range.lo, w.ranges[r].lo), std::max(tile_range.hi, w.ranges[r].hi)};
        if (p.rope.enabled) rope_rotate(&w.q_tile[std::size_t(r) * dk], dk, mask.position(i0 + r), p.rope.base);
      }
      // A sink starts each row's state: it is the first term of the max and of the sum.
      const bool sink = modifiers.has_sinks();
      // NOLINTNEXTLINE(bugprone-narrowing-conversions): clang-tidy 14 calls the float infinity a narrowed constant
      std::fill_n(w.row_max.begin(), rows, sink ? modifiers.sink(h) : kNegInf);
      std::fill_n(w.row_sum.begin(), rows, sink ? 1.0f : 0.0f);
      std::fill_n(w.acc.begin(), std::size_t(rows) * dv, 0.0f);

      // The transposed key tile is shared by every panel of the query tile; tiles outside the
      // query tile's [lo, hi) are skipped, and so are tiles outside a panel's own range.
      for (int j0 = (tile_range.lo / bc) * bc; j0 < tile_range.hi; j0 += bc) {
        const int cols = std::min(bc, x.k_rows - j0);
        const int width = std::min(bc, (cols + 15) / 16 * 16);  // scores past it are never read
        load_transposed(p, x, j0, cols, w);
        const float* values = x.v + j0 * x.v_step;
        if (x.v_step != std::size_t(dv)) {  // strided rows gathered into one tile
          for (int c = 0; c < cols; ++c) std::copy_n(values + c * x.v_step, dv, &w.values[std::size_t(c) * dv]);
          values = w.values.data();
        }
        for (int r0 = 0; r0 < rows; r0 += kPanel) {
          const int panel_rows = std::min(kPanel, rows - r0);
          if (!panel_overlaps(&w.ranges[r0], panel_rows, j0, j0 + cols)) continue;
          simd::scores(&w.q_tile[std::size_t(r0) * dk], panel_rows, dk, w.kt.data(), bc, width, scale,
                       w.s_panel.data());
          for (int r = r0; r < r0 + panel_rows; ++r)
            apply_mask(mask, modifiers, b, h, i0 + r, w.ranges[r], j0, cols, &w.s_panel[std::size_t(r - r0) * bc]);
          simd::softmax_fold_rows(w.s_panel.data(), panel_rows, bc, cols, &w.row_max[r0], &w.row_sum[r0],
                                  &w.rescale[r0]);
          simd::rescale_accumulate_rows(&w.acc[std::size_t(r0) * dv], panel_rows, dv, &w.rescale[r0], w.s_panel.data(),
                                        bc, cols, values);
        }
      }

      for (int r = 0; r < rows; ++r) {
        float* out = x.o + (i0 + r) * x.o_step;
        float* out_lse = x.lse ? x.lse + i0 + r : nullptr;
        if (w.row_max[r] == kNegInf) {
          write_empty_row(out, dv, out_lse);
          continue;
        }
        std::copy_n(&w.acc[std::size_t(r) * dv], dv, out);
        simd::scale(out, dv, 1.0f / w.row_sum[r]);
        if (out_lse) *out_lse = w.row_max[r] + std::log(w.row_sum[r]);
      }
    }
  }

  // kt[k][c] = K[j0 + c][k] (rotated when RoPE is on), zero for c >= cols.
  void load_transposed(const Problem& p, const HeadRows& x, int j0, int cols, Workspace& w) const {
    const int dk = p.shape.head_dim;
    const float* keys = x.k + j0 * x.k_step;
    if (p.rope.enabled || x.k_step != std::size_t(dk)) {  // rotated, or strided rows gathered
      for (int c = 0; c < cols; ++c) std::copy_n(keys + c * x.k_step, dk, &w.keys[std::size_t(c) * dk]);
      if (p.rope.enabled)
        for (int c = 0; c < cols; ++c) rope_rotate(&w.keys[std::size_t(c) * dk], dk, j0 + c, p.rope.base);
      keys = w.keys.data();
    }
    simd::transpose(keys, cols, dk, w.kt.data(), cfg_.block_k);
  }

  static constexpr int kPanel = 4;  // query rows per micro-kernel call (simd_ops blocks by four)

  TiledConfig cfg_;
  bool packed_;
};

}  // namespace

std::unique_ptr<Kernel> make_tiled_kernel(TiledConfig config) {
  return std::make_unique<FastTiledKernel>(config, false);
}
std::unique_ptr<Kernel> make_builtin_tiled_kernel() {
  return std::make_unique<FastTiledKernel>(TiledConfig{128, 64}, true);
}

}  // namespace attest
