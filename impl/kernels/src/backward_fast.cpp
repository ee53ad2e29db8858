// The built-in tiled kernel's backward: backward_kernels.cpp's FlashAttention-2 algorithm with its
// five products on simd_ops' micro-kernels. Per kv head and key tile (transposed K and V loaded
// once), per query tile of each head of the group: S = scale Q K^T, P = exp(S - LSE),
// dP = dO V^T, dS = P (dP - D) (times softcap's slope), then dQ += scale dS K (over key tiles,
// in key-tile order: deterministic), dV += P^T dO and dK += scale dS^T Q. Workers (in.threads)
// take whole (batch, kv head) units: each writes its own rows of dQ, dK and dV, so the bits do not
// depend on how many there are.
#include <algorithm>
#include <cmath>
#include <exception>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

#include "backward_kernels.h"
#include "kernel_support.h"
#include "simd_ops.h"

namespace attest::kernels {
namespace grad_fast {

int round_up16(int n) { return (n + 15) / 16 * 16; }

// Rows [rows][dim] rotated by sign * (first_pos + r).
void rotate(float* x, int rows, int dim, long long first_pos, int sign, const Rope& rope) {
  if (!rope.enabled) return;
  for (int r = 0; r < rows; ++r) rope_rotate(x + std::size_t(r) * dim, dim, sign * (first_pos + r), rope.base);
}

}  // namespace grad_fast

void tiled_backward_fast(const Problem& p, const BackwardInputs& in, const GradientSpans& out, int block_q,
                         int block_k) {
  const Shape& s = p.shape;
  const Layout at{s};
  const MaskView mask(p);
  const ModifierView mod(p);
  const float scale = static_cast<float>(p.effective_scale());
  const int dk = s.head_dim, dv = s.value_dim, group = s.heads / s.kv_heads, br = block_q, bc = block_k;
  const int ld = grad_fast::round_up16(bc), ldt = grad_fast::round_up16(br);
  for (std::span<float> x : {out.dq, out.dk, out.dv, out.dsinks}) std::fill(x.begin(), x.end(), 0.0f);

  std::vector<float> d(p.lse_size(), 0.0f);  // D = rowsum(dO * O)
  for (std::size_t row = 0; row < d.size(); ++row) d[row] = dot(&in.d_o[row * dv], &in.o[row * dv], dv);

  // One (batch, kv head) unit: its heads' dQ rows, its dK and dV rows.
  auto unit = [&](int b, int g) {
    std::vector<float> queries(std::size_t(group) * s.q_len * dk), keys(std::size_t(bc) * dk);
    std::vector<float> kt(std::size_t(dk) * ld), vt(std::size_t(dv) * ld);
    std::vector<float> weights(std::size_t(br) * ld), ds(std::size_t(br) * ld), slope(std::size_t(br) * ld, 1.0f);
    std::vector<float> weights_t(std::size_t(ld) * ldt), ds_t(std::size_t(ld) * ldt);
    std::vector<float> dk_tile(std::size_t(bc) * dk), dv_tile(std::size_t(bc) * dv), ones(std::max(ld, ldt), 1.0f);
    std::vector<KeyRange> ranges(br);
    const int h0 = g * group;
    std::copy_n(&p.q[at.q(b, h0, 0)], queries.size(), queries.begin());
    for (int hh = 0; hh < group; ++hh)
      grad_fast::rotate(&queries[std::size_t(hh) * s.q_len * dk], s.q_len, dk, p.effective_q_offset(), 1, p.rope);
    for (int j0 = 0; j0 < s.k_len; j0 += bc) {
      const int cols = std::min(bc, s.k_len - j0), width = std::min(ld, grad_fast::round_up16(cols));
      std::copy_n(&p.k[at.k(b, g, j0)], std::size_t(cols) * dk, keys.begin());
      grad_fast::rotate(keys.data(), cols, dk, j0, 1, p.rope);
      simd::transpose(keys.data(), cols, dk, kt.data(), ld);
      simd::transpose(&p.v[at.v(b, g, j0)], cols, dv, vt.data(), ld);
      std::fill(dk_tile.begin(), dk_tile.end(), 0.0f);
      std::fill(dv_tile.begin(), dv_tile.end(), 0.0f);
      for (int h = h0; h < h0 + group; ++h) {
        const float* head_queries = &queries[std::size_t(h - h0) * s.q_len * dk];
        for (int i0 = 0; i0 < s.q_len; i0 += br) {
          const int rows = std::min(br, s.q_len - i0);
          for (int r = 0; r < rows; ++r) ranges[r] = mask.range(b, i0 + r);
          if (!panel_overlaps(ranges.data(), rows, j0, j0 + cols)) continue;
          const float* q = head_queries + std::size_t(i0) * dk;
          simd::scores(q, rows, dk, kt.data(), ld, width, scale, weights.data());
          simd::scores(&in.d_o[at.o(b, h, i0)], rows, dv, vt.data(), ld, width, 1.0f, ds.data());
          for (int r = 0; r < rows; ++r) {
            const int i = i0 + r;
            float* w = &weights[std::size_t(r) * ld];
            float* dsr = &ds[std::size_t(r) * ld];
            float* sl = &slope[std::size_t(r) * ld];
            const float lse = in.lse[at.lse(b, h, i)];
            // Masked keys, the score modifiers (softcap's slope kept), then P = exp(s - LSE).
            for (int c = 0; c < cols; ++c) {
              const int j = j0 + c;
              if (lse == kNegInf || j < ranges[r].lo || j >= ranges[r].hi ||
                  (mask.elementwise() && !mask.elementwise_visible(b, i, j)) || mod.masks(b, h, i, j)) {
                w[c] = kNegInf;
                continue;
              }
              float x = w[c];
              if (mod.has_softcap()) {
                const float t = std::tanh(x / mod.softcap());
                x = mod.softcap() * t, sl[c] = 1.0f - t * t;
              }
              if (mod.has_slopes()) x += mod.slope(h) * static_cast<float>(j - mask.position(i));
              if (mod.has_bias()) x += mod.bias(b, h, i, j);
              w[c] = x;
            }
            std::fill(w + cols, w + ld, kNegInf);
            if (lse == kNegInf)
              std::fill(w, w + ld, 0.0f);
            else
              simd::exp_shift_sum(w, ld, lse);
            // dS, scaled once for both dQ and dK; 0 wherever P is.
            const float di = d[at.lse(b, h, i)];
            for (int c = 0; c < ld; ++c) dsr[c] = w[c] == 0.0f ? 0.0f : scale * w[c] * (dsr[c] - di) * sl[c];
          }
          simd::rescale_accumulate_rows(&out.dq[at.q(b, h, i0)], rows, dk, ones.data(), ds.data(), ld, cols,
                                        keys.data());
          simd::transpose(weights.data(), rows, ld, weights_t.data(), ldt);
          simd::transpose(ds.data(), rows, ld, ds_t.data(), ldt);
          simd::rescale_accumulate_rows(dv_tile.data(), cols, dv, ones.data(), weights_t.data(), ldt, rows,
                                        &in.d_o[at.o(b, h, i0)]);
          simd::rescale_accumulate_rows(dk_tile.data(), cols, dk, ones.data(), ds_t.data(), ldt, rows, q);
        }
      }
      grad_fast::rotate(dk_tile.data(), cols, dk, j0, -1, p.rope);
      std::copy_n(dk_tile.begin(), std::size_t(cols) * dk, &out.dk[at.k(b, g, j0)]);
      std::copy_n(dv_tile.begin(), std::size_t(cols) * dv, &out.dv[at.v(b, g, j0)]);
    }
  };
  const int units = s.batch * s.kv_heads, workers = std::clamp(in.threads, 1, units);
  if (workers == 1) {
    for (int u = 0; u < units; ++u) unit(u / s.kv_heads, u % s.kv_heads);
  } else {
    std::exception_ptr failure;
    std::mutex failure_lock;
    auto worker = [&](int w) {
      try {
        for (int u = w; u < units; u += workers) unit(u / s.kv_heads, u % s.kv_heads);
      } catch (...) {
        const std::lock_guard<std::mutex> hold(failure_lock);
        failure = std::current_exception();
      }
    };
    std::vector<std::thread> pool;
    int w = 1;
    try {  // a thread that cannot start (no memory for its stack): this one does its share
      for (; w < workers; ++w) pool.emplace_back(worker, w);
    } catch (const std::system_error&) {
    }
    worker(0);
    for (int rest = w; rest < workers; ++rest) worker(rest);
    for (std::thread& t : pool) t.join();
    if (failure) std::rethrow_exception(failure);
  }
  for (int b = 0; b < s.batch; ++b)
    for (int h = 0; h < s.heads; ++h)
      grad_fast::rotate(&out.dq[at.q(b, h, 0)], s.q_len, dk, p.effective_q_offset(), -1, p.rope);
  if (mod.has_sinks())
    for (std::size_t row = 0; row < d.size(); ++row) {
      const int h = static_cast<int>(row / s.q_len % s.heads);
      if (in.lse[row] > kNegInf) out.dsinks[h] -= std::exp(mod.sink(h) - in.lse[row]) * d[row];
    }
}

}  // namespace attest::kernels
