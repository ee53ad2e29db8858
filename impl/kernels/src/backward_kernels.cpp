// The built-in backward passes. With x = scale q.k (q and k rotated when RoPE is on), the logit
// s = softcap(x) + alibi + bias and P = exp(s - LSE):
//   dV_j = sum_i P_ij dO_i,  dP_ij = dO_i . v_j,  D_i = dO_i . O_i,  dS_ij = P_ij (dP_ij - D_i),
//   dX_ij = dS_ij (1 - tanh^2(x_ij / c)),  dQ_i = scale sum_j dX_ij k_j,  dK_j = scale sum_i dX_ij q_i,
//   dsink_h = -sum_i exp(sink_h - LSE_i) D_i;
// dQ and dK are rotated back by each row's position. A row whose LSE is -inf saw no key: it
// contributes nothing, and its dQ is 0.
#include "backward_kernels.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <vector>

#include "attest/model/precision.h"
#include "kernel_support.h"

namespace attest::kernels {
// Named, not anonymous: in a unity build this file shares a translation unit with kernels that
// bring attest::kernels into scope.
namespace grad {

// A visible key's logit and its derivative with respect to x (softcap's 1 - tanh^2, else 1).
struct Logit {
  float s;
  float slope;
};

Logit modified_logit(const ModifierView& m, float x, int b, int h, int i, int j, long long pos,
                     bool slope_wanted = true) {
  float slope = 1.0f;
  if (m.has_softcap()) {
    const float t = std::tanh(x / m.softcap());
    x = m.softcap() * t;
    if (slope_wanted) slope = 1.0f - t * t;
  }
  if (m.has_slopes()) x += m.slope(h) * static_cast<float>(j - pos);
  if (m.has_bias()) x += m.bias(b, h, i, j);
  return {x, slope};
}

// The rows of x ([rows][dim], row r at position first_pos + r) rotated by sign * their position.
void rotate_rows(float* x, int rows, int dim, long long first_pos, int sign, const Rope& rope) {
  if (!rope.enabled) return;
  for (int r = 0; r < rows; ++r) rope_rotate(x + std::size_t(r) * dim, dim, sign * (first_pos + r), rope.base);
}

void axpy(float* y, float a, const float* x, int n) {
  for (int k = 0; k < n; ++k) y[k] += a * x[k];
}

void zero_outputs(const GradientSpans& out) {
  for (std::span<float> s : {out.dq, out.dk, out.dv, out.dsinks}) std::fill(s.begin(), s.end(), 0.0f);
}

// The rotated-space dQ of every row, rotated back by its position.
void rotate_back_dq(const Problem& p, std::span<float> dq) {
  const Shape& s = p.shape;
  for (int b = 0; b < s.batch; ++b)
    for (int h = 0; h < s.heads; ++h)
      rotate_rows(&dq[Layout{s}.q(b, h, 0)], s.q_len, s.head_dim, p.effective_q_offset(), -1, p.rope);
}

bool key_visible(const MaskView& mask, const ModifierView& mod, int b, int h, int i, int j) {
  return mask.elementwise_visible(b, i, j) && !mod.masks(b, h, i, j);
}

}  // namespace grad

void loop_backward(const Problem& p, const BackwardInputs& in, const GradientSpans& out) {
  const Shape& s = p.shape;
  const Layout at{s};
  const MaskView mask(p);
  const ModifierView mod(p);
  const float scale = static_cast<float>(p.effective_scale());
  const int dk = s.head_dim, dv = s.value_dim, group = s.heads / s.kv_heads;
  grad::zero_outputs(out);
  std::vector<float> keys(std::size_t(s.k_len) * dk), dkeys(keys.size()), query(dk);
  for (int b = 0; b < s.batch; ++b) {
    for (int g = 0; g < s.kv_heads; ++g) {
      std::copy_n(&p.k[at.k(b, g, 0)], keys.size(), keys.begin());
      grad::rotate_rows(keys.data(), s.k_len, dk, 0, 1, p.rope);
      std::fill(dkeys.begin(), dkeys.end(), 0.0f);
      for (int h = g * group; h < (g + 1) * group; ++h) {
        for (int i = 0; i < s.q_len; ++i) {
          const float lse = in.lse[at.lse(b, h, i)];
          if (!(lse > kNegInf)) continue;  // an empty row
          std::copy_n(&p.q[at.q(b, h, i)], dk, query.begin());
          grad::rotate_rows(query.data(), 1, dk, mask.position(i), 1, p.rope);
          const float* d_o = &in.d_o[at.o(b, h, i)];
          const float d = dot(d_o, &in.o[at.o(b, h, i)], dv);
          float* dq = &out.dq[at.q(b, h, i)];
          const KeyRange seen = mask.range(b, i);
          for (int j = seen.lo; j < seen.hi; ++j) {
            if (!grad::key_visible(mask, mod, b, h, i, j)) continue;
            const float* key = &keys[std::size_t(j) * dk];
            const grad::Logit l =
                grad::modified_logit(mod, dot(query.data(), key, dk) * scale, b, h, i, j, mask.position(i));
            const float weight = std::exp(l.s - lse);
            const float ds = weight * (dot(d_o, &p.v[at.v(b, g, j)], dv) - d) * l.slope;
            grad::axpy(&out.dv[at.v(b, g, j)], weight, d_o, dv);
            grad::axpy(dq, scale * ds, key, dk);
            grad::axpy(&dkeys[std::size_t(j) * dk], scale * ds, query.data(), dk);
          }
          if (mod.has_sinks()) out.dsinks[h] -= std::exp(mod.sink(h) - lse) * d;
        }
      }
      grad::rotate_rows(dkeys.data(), s.k_len, dk, 0, -1, p.rope);
      std::copy(dkeys.begin(), dkeys.end(), &out.dk[at.k(b, g, 0)]);
    }
  }
  grad::rotate_back_dq(p, out.dq);
}

void tiled_backward(const Problem& p, const BackwardInputs& in, const GradientSpans& out, int block_q, int block_k,
                    const KernelFaults& f) {
  const Shape& s = p.shape;
  const Layout at{s};
  const MaskView mask(p);
  const ModifierView mod(p);
  const float scale = static_cast<float>(p.effective_scale());
  const int dk = s.head_dim, dv = s.value_dim, group = s.heads / s.kv_heads, br = block_q, bc = block_k;
  grad::zero_outputs(out);
  if (f.backward_skipped_rows_unwritten)  // dQ set up only where a row will accumulate into it
    for (std::size_t row = 0; row < in.lse.size(); ++row)
      if (!(in.lse[row] > kNegInf)) std::fill_n(&out.dq[row * dk], dk, std::numeric_limits<float>::quiet_NaN());
  // D = rowsum(dO * O) once per row, before any tile.
  std::vector<float> d(p.lse_size(), 0.0f);
  for (std::size_t row = 0; row < d.size(); ++row) {
    const float* o = &in.o[row * dv];
    const float* d_o = &in.d_o[row * dv];
    for (int r = 0; r < dv; ++r) d[row] += d_o[r] * (f.backward_d_from_bf16_o ? round_to(o[r], Scalar::kBF16) : o[r]);
    if (f.backward_drops_d) d[row] = 0.0f;
  }
  // The bug of atomics: every other call visits the key tiles in reverse, so dQ's sums change order.
  static std::atomic<unsigned> calls{0};
  const bool reversed = f.backward_dq_nondeterministic && (calls++ % 2 == 1);
  // The split-K bug: each of `threads` workers sums dQ over its run of key tiles and the runs are
  // added at the end; the order of dQ's sums follows the thread count (each count is repeatable).
  const int key_tiles = (s.k_len + bc - 1) / bc;
  const bool split = f.backward_dq_split_by_threads || (f.backward_dq_split_from_four_threads && in.threads >= 4);
  const int workers = split ? std::clamp(in.threads, 1, key_tiles) : 1;
  std::vector<std::vector<float>> dq_shares(workers > 1 ? workers : 0, std::vector<float>(out.dq.size(), 0.0f));
  std::vector<float> queries(std::size_t(s.q_len) * dk), k_tile(std::size_t(bc) * dk), dk_tile(k_tile.size()),
      dv_tile(std::size_t(bc) * dv), row_max(br);
  std::vector<KeyRange> ranges(br);
  for (int b = 0; b < s.batch; ++b) {
    for (int g = 0; g < s.kv_heads; ++g) {
      for (int t = 0; t < key_tiles; ++t) {
        const int j0 = (reversed ? key_tiles - 1 - t : t) * bc, cols = std::min(bc, s.k_len - j0);
        std::copy_n(&p.k[at.k(b, g, j0)], std::size_t(cols) * dk, k_tile.begin());
        grad::rotate_rows(k_tile.data(), cols, dk, j0, 1, p.rope);
        std::fill(dk_tile.begin(), dk_tile.end(), 0.0f);
        std::fill(dv_tile.begin(), dv_tile.end(), 0.0f);
        for (int h = g * group; h < (g + 1) * group; ++h) {
          if (f.backward_gqa_last_head_wins) {
            std::fill(dk_tile.begin(), dk_tile.end(), 0.0f);
            std::fill(dv_tile.begin(), dv_tile.end(), 0.0f);
          }
          std::copy_n(&p.q[at.q(b, h, 0)], queries.size(), queries.begin());
          grad::rotate_rows(queries.data(), s.q_len, dk, p.effective_q_offset(), 1, p.rope);
          for (int i0 = 0; i0 < s.q_len; i0 += br) {
            const int rows = std::min(br, s.q_len - i0);
            for (int r = 0; r < rows; ++r) ranges[r] = mask.range(b, i0 + r);
            if (!panel_overlaps(ranges.data(), rows, j0, j0 + cols)) continue;  // the tile sees none of these rows
            if (f.backward_dv_unnormalised)  // each row's largest logit within the tile
              for (int r = 0; r < rows; ++r) {
                row_max[r] = kNegInf;
                for (int c = std::max(0, ranges[r].lo - j0); c < std::min(cols, ranges[r].hi - j0); ++c)
                  if (grad::key_visible(mask, mod, b, h, i0 + r, j0 + c))
                    row_max[r] = std::max(
                        row_max[r],
                        grad::modified_logit(
                            mod, dot(&queries[std::size_t(i0 + r) * dk], &k_tile[std::size_t(c) * dk], dk) * scale, b,
                            h, i0 + r, j0 + c, mask.position(i0 + r))
                            .s);
              }
            for (int r = 0; r < rows; ++r) {
              const int i = i0 + r;
              const int lse_row = f.backward_lse_wrong_row ? std::min(r + 1, rows - 1) + i0 : i;
              const float lse = in.lse[at.lse(b, h, lse_row)];
              if (!(in.lse[at.lse(b, h, i)] > kNegInf) || !(lse > kNegInf)) continue;  // an empty row adds nothing
              const float* q = &queries[std::size_t(i) * dk];
              const float* d_o = &in.d_o[at.o(b, h, i)];
              float* dq = workers > 1 ? &dq_shares[std::size_t(t) * workers / key_tiles][at.q(b, h, i)]
                                      : &out.dq[at.q(b, h, i)];
              const float di = d[at.lse(b, h, i)];
              // Visible keys of the tile; with the masked-dS bug, also the masked keys inside the tile.
              const int lo = f.backward_masked_ds_kept ? 0 : std::clamp(ranges[r].lo - j0, 0, cols);
              const int hi = f.backward_masked_ds_kept ? cols : std::clamp(ranges[r].hi - j0, lo, cols);
              for (int c = lo; c < hi; ++c) {
                const int j = j0 + c;
                const bool visible = j >= ranges[r].lo && j < ranges[r].hi && grad::key_visible(mask, mod, b, h, i, j);
                if (!visible && !f.backward_masked_ds_kept) continue;
                if (!visible && mod.masks(b, h, i, j)) continue;
                const float* key = &k_tile[std::size_t(c) * dk];
                const grad::Logit l = grad::modified_logit(mod, dot(q, key, dk) * scale, b, h, i, j, mask.position(i),
                                                           !f.backward_softcap_no_derivative);
                const float weight = std::exp(l.s - lse);
                const float ds = weight * (dot(d_o, &p.v[at.v(b, g, j)], dv) - di) * l.slope;
                if (visible)
                  grad::axpy(&dv_tile[std::size_t(c) * dv],
                             f.backward_dv_unnormalised ? std::exp(l.s - row_max[r]) : weight, d_o, dv);
                grad::axpy(dq, scale * ds, key, dk);
                grad::axpy(&dk_tile[std::size_t(c) * dk], f.backward_dk_unscaled ? ds : scale * ds, q, dk);
              }
            }
          }
        }
        grad::rotate_rows(dk_tile.data(), cols, dk, j0, -1, p.rope);
        std::copy_n(dk_tile.begin(), std::size_t(cols) * dk, &out.dk[at.k(b, g, j0)]);
        std::copy_n(dv_tile.begin(), std::size_t(cols) * dv, &out.dv[at.v(b, g, j0)]);
      }
    }
  }
  for (const std::vector<float>& share : dq_shares)
    for (std::size_t e = 0; e < share.size(); ++e) out.dq[e] += share[e];
  if ((f.backward_dq_wrong_when_threaded && in.threads != 0) || (f.backward_dq_wrong_past_512 && s.k_len > 512) ||
      (f.backward_dq_wrong_past_2048 && s.k_len > 2048))
    for (float& x : out.dq) x *= 1.01f;
  if (f.backward_dk_wrong_rect_past_2048 && s.q_len != s.k_len && s.k_len > 2048)
    for (float& x : out.dk) x *= 1.01f;
  if (f.backward_dv_wrong_padded_past_2048 && s.k_len > 2048)
    for (int b = 0; b < s.batch && b < static_cast<int>(p.mask.kv_valid.size()); ++b)
      if (p.mask.kv_valid[b] < s.k_len)
        for (int g = 0; g < s.kv_heads; ++g)
          for (std::size_t e = 0; e < std::size_t(s.k_len) * dv; ++e) out.dv[at.v(b, g, 0) + e] *= 1.01f;
  grad::rotate_back_dq(p, out.dq);
  if (mod.has_sinks())
    for (int b = 0; b < s.batch; ++b)
      for (int h = 0; h < s.heads; ++h)
        for (int i = 0; i < s.q_len; ++i) {
          const float lse = in.lse[at.lse(b, h, i)];
          if (!(lse > kNegInf)) continue;
          const float term = std::exp(mod.sink(h) - lse) * d[at.lse(b, h, i)];
          out.dsinks[h] += f.backward_sink_gradient_sign ? term : -term;
        }
}

}  // namespace attest::kernels
