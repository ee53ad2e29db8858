// The built-in bf16 tiled kernel: tiled's online softmax over Br x Bc tiles in 4-row panels, with
// Q, K, V and O stored in bf16, scores accumulated in f32, P rounded to bf16 before P.V and P.V
// accumulated in f32 (the FlashAttention-2 arrangement). Q, K and V tiles are packed into bf16
// pairs (simd_bf16.h) and both products run on the AVX-512 BF16 dot product where the CPU has it;
// elsewhere (path "portable") the f32 micro-kernels of simd_ops run on the bf16 values. Inputs
// stored in bf16 arrive as exact f32 values, so the portable path reads K and V in place, as tiled
// does: it costs tiled's passes over memory plus the rounding of P, never a copy of each tile
// (ATTEST_BF16_DOT=off picks it on a CPU that has the dot product, to measure it).
//
// The dot product flushes subnormals; a tile whose values could reach them (tiny inputs or
// weights, a tiny rescaled accumulator, non-finite V where a masked key must not leak) goes
// through the f32 micro-kernels with the same roundings. RoPE rotates in f32, and the rotated Q and
// K stay f32 (rounding them would be a rounding the declaration does not have): their scores use
// the f32 micro-kernel, P.V still the dot product. Score modifiers are tiled's: softcap, ALiBi and
// bias on the f32 scores in the shared mask step, and a sink as the first term of each row's max
// and sum.
#include <limits>
#include <vector>

#include "attest/kernels/builtin_kernels.h"
#include "kernel_support.h"
#include "simd_bf16.h"
#include "simd_ops.h"

namespace attest {
namespace {

using namespace kernels;

constexpr int kPanel = 4;  // query rows per micro-kernel call, as in tiled

int round_up(int n, int m) { return (n + m - 1) / m * m; }

class TiledBf16Kernel final : public Kernel {
 public:
  TiledBf16Kernel(TiledConfig config, Bf16Path path)
      : cfg_(config), dot_(path == Bf16Path::kAuto && bf16::has_dot_products()) {
    if (cfg_.block_q < 1 || cfg_.block_k < 1)
      throw std::invalid_argument("tiled_bf16 kernel: block_q and block_k must be >= 1");
  }
  std::string name() const override { return "tiled_bf16"; }
  Capabilities capabilities() const override {
    Capabilities c;
    c.features = c.features | FeatureSet::of_kind(FeatureKind::kModifier);
    c.contract.query_tile = cfg_.block_q;
    c.contract.key_tile = cfg_.block_k;
    Precision& p = c.precision;
    p.q = p.k = p.v = p.o = Scalar::kBF16;
    p.scores = Scalar::kF32;
    p.p = Scalar::kBF16;
    p.accumulator = Scalar::kF32;
    p.exp_ulps = 2.0;  // the polynomial exp of simd_ops
    return c;
  }
  std::string last_path() const override { return dot_ ? "avx512bf16" : "portable"; }

  void forward(const Problem& p, std::span<float> o, std::span<float> lse) const override;

 private:
  TiledConfig cfg_;
  bool dot_;  // the AVX-512 BF16 dot products (picked once, at construction)
};

// The tiles of one call. f32 tiles hold bf16 values (rounded on load); pair tiles are what the
// dot product reads. A pair tile's check says whether the dot product may take it.
struct Workspace {
  Workspace(int br, int bc, int dk, int dv)
      : ld(round_up(bc, 16)),
        dk2((dk + 1) / 2),
        ld2(round_up(bc, 2) / 2),
        q(std::size_t(br) * dk),
        k(std::size_t(bc) * dk),
        kt(std::size_t(dk) * ld),
        v(std::size_t(bc) * dv),
        s(std::size_t(kPanel) * ld),
        acc(std::size_t(br) * dv),
        row_max(br),
        row_sum(br),
        rescale(br),
        ranges(br),
        q2(std::size_t(br) * dk2),
        kt2(std::size_t(dk2) * ld),
        v2(std::size_t(ld2) * dv),
        p2(std::size_t(kPanel) * ld2) {}
  int ld, dk2, ld2;                   // score stride (16s), Q/K pairs per row, P pairs per row
  std::vector<float> q, k, kt, v, s;  // Q tile, K tile (and transposed), V tile, a panel's scores
  std::vector<float> acc, row_max, row_sum, rescale;
  std::vector<KeyRange> ranges;
  std::vector<std::uint32_t> q2, kt2, v2, p2;  // the same tiles as bf16 pairs, and a panel's P
};

void TiledBf16Kernel::forward(const Problem& p, std::span<float> o, std::span<float> lse) const {
  const Shape& s = p.shape;
  const Layout at{s};
  const MaskView mask(p);
  const ModifierView modifiers(p);  // softcap, ALiBi and bias in the shared mask step, as tiled's
  const float scale = static_cast<float>(p.effective_scale());
  const int br = cfg_.block_q, bc = cfg_.block_k, dk = s.head_dim, dv = s.value_dim;
  const bool rope = p.rope.enabled;
  // Stored in bf16, the values are bf16 already (Problem::validate): no rounding copy is needed.
  const bool k_exact = p.storage.k == Scalar::kBF16, v_exact = p.storage.v == Scalar::kBF16;
  Workspace w(br, bc, dk, dv);

  for (int b = 0; b < s.batch; ++b)
    for (int h = 0; h < s.heads; ++h) {
      const int g = p.kv_head_of(h);
      for (int i0 = 0; i0 < s.q_len; i0 += br) {
        const int rows = std::min(br, s.q_len - i0);
        std::copy_n(&p.q[at.q(b, h, i0)], std::size_t(rows) * dk, w.q.begin());
        bf16::round(w.q.data(), rows * dk);
        KeyRange tile_range{s.k_len, 0};
        for (int r = 0; r < rows; ++r) {
          w.ranges[r] = mask.range(b, i0 + r);
          if (w.ranges[r].empty()) continue;
          tile_range = {std::min(tile_range.lo, w.ranges[r].lo), std::max(tile_range.hi, w.ranges[r].hi)};
          if (rope) rope_rotate(&w.q[std::size_t(r) * dk], dk, mask.position(i0 + r), p.rope.base);
        }
        // Rotated queries stay f32; unrotated ones are packed (a tiny value keeps them f32).
        // A query tile shorter than a panel (decode: one row) packs each key and value tile for
        // too few products to pay for it: it takes the f32 micro-kernels on K and V in place.
        const bool dot = dot_ && rows >= kPanel;
        const bool q_dot =
            dot && !rope && bf16::pack_rows(w.q.data(), rows, dk, dk, w.q2.data(), w.dk2, bf16::kTinyInput).dot_safe();
        // A sink starts each row's state: it is the first term of the max and of the sum.
        const bool sink = modifiers.has_sinks();
        // NOLINTNEXTLINE(bugprone-narrowing-conversions): clang-tidy 14 calls the float infinity a narrowed constant
        std::fill_n(w.row_max.begin(), rows, sink ? modifiers.sink(h) : kNegInf);
        std::fill_n(w.row_sum.begin(), rows, sink ? 1.0f : 0.0f);
        std::fill_n(w.acc.begin(), std::size_t(rows) * dv, 0.0f);

        for (int j0 = (tile_range.lo / bc) * bc; j0 < tile_range.hi; j0 += bc) {
          const int cols = std::min(bc, s.k_len - j0), cols2 = (cols + 1) / 2;
          const int width = round_up(cols, 16);  // scores past it are never read
          // K^T as pairs for the dot product, packed from the input; in f32 (rounded, rotated) when
          // the scores of this tile need the f32 micro-kernel.
          const bool k_dot =
              q_dot && bf16::pack_transposed(&p.k[at.k(b, g, j0)], cols, dk, dk, w.kt2.data(), w.ld, bf16::kTinyInput)
                           .dot_safe();
          if (!k_dot) {
            const float* keys = &p.k[at.k(b, g, j0)];
            if (rope || !k_exact) {
              std::copy_n(keys, std::size_t(cols) * dk, w.k.begin());
              if (!k_exact) bf16::round(w.k.data(), cols * dk);
              if (rope)
                for (int c = 0; c < cols; ++c) rope_rotate(&w.k[std::size_t(c) * dk], dk, j0 + c, p.rope.base);
              keys = w.k.data();
            }
            simd::transpose(keys, cols, dk, w.kt.data(), w.ld);
          }
          // V as pairs of keys; an f32 tile is made only when a panel needs it and V is not bf16 already.
          const float* v_tile = &p.v[at.v(b, g, j0)];
          const bool v_dot =
              dot && bf16::pack_row_pairs(v_tile, cols, dv, dv, w.v2.data(), dv, bf16::kTinyInput).dot_safe();
          const float* v_f32 = v_exact ? v_tile : nullptr;

          for (int r0 = 0; r0 < rows; r0 += kPanel) {
            const int panel_rows = std::min(kPanel, rows - r0);
            if (!panel_overlaps(&w.ranges[r0], panel_rows, j0, j0 + cols)) continue;
            if (k_dot)
              bf16::scores(&w.q2[std::size_t(r0) * w.dk2], panel_rows, w.dk2, w.kt2.data(), w.ld, width, scale,
                           w.s.data());
            else
              simd::scores(&w.q[std::size_t(r0) * dk], panel_rows, dk, w.kt.data(), w.ld, width, scale, w.s.data());
            for (int r = r0; r < r0 + panel_rows; ++r)
              apply_mask(mask, modifiers, b, h, i0 + r, w.ranges[r], j0, cols, &w.s[std::size_t(r - r0) * w.ld]);
            float* acc = &w.acc[std::size_t(r0) * dv];
            bf16::softmax_fold_rows(w.s.data(), panel_rows, w.ld, cols, &w.row_max[r0], &w.row_sum[r0], &w.rescale[r0]);
            // P to bf16 after the row sums took the f32 weights (FlashAttention-2 sums before it rounds).
            if (v_dot &&
                bf16::pack_rows(w.s.data(), panel_rows, cols, w.ld, w.p2.data(), w.ld2, bf16::kTinyWeight).dot_safe() &&
                bf16::accumulate(acc, panel_rows, dv, &w.rescale[r0], w.p2.data(), w.ld2, cols2, w.v2.data()))
              continue;
            if (!v_f32) {
              std::copy_n(v_tile, std::size_t(cols) * dv, w.v.begin());
              bf16::round(w.v.data(), cols * dv);
              v_f32 = w.v.data();
            }
            for (int r = 0; r < panel_rows; ++r) bf16::round(&w.s[std::size_t(r) * w.ld], cols);
            simd::rescale_accumulate_rows(acc, panel_rows, dv, &w.rescale[r0], w.s.data(), w.ld, cols, v_f32);
          }
        }

        for (int r = 0; r < rows; ++r) {
          float* out = &o[at.o(b, h, i0 + r)];
          float* out_lse = lse.empty() ? nullptr : &lse[at.lse(b, h, i0 + r)];
          if (w.row_max[r] == kNegInf) {
            write_empty_row(out, dv, out_lse);
            continue;
          }
          std::copy_n(&w.acc[std::size_t(r) * dv], dv, out);
          simd::scale(out, dv, 1.0f / w.row_sum[r]);
          bf16::round(out, dv);  // O's storage
          if (out_lse) *out_lse = w.row_max[r] + std::log(w.row_sum[r]);
        }
      }
    }
}

}  // namespace

std::unique_ptr<Kernel> make_tiled_bf16_kernel(TiledConfig config, Bf16Path path) {
  return std::make_unique<TiledBf16Kernel>(config, path);
}

}  // namespace attest
