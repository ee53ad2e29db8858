#include "blas_baseline.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <vector>

namespace attest {
namespace {

class BlasBaselineKernel final : public Kernel {
 public:
  std::string name() const override { return "blas"; }
  // What visible() and forward() implement, listed (the default would claim every mask term the
  // feature table gains, chunk and lookahead included).
  Capabilities capabilities() const override {
    Capabilities c;
    c.features = {Feature::kCausal,       Feature::kWindow,   Feature::kKeyPadding,
                  Feature::kQueryPadding, Feature::kSegments, Feature::kExplicitMask,
                  Feature::kGqa,          Feature::kRope,     Feature::kLse};
    return c;
  }

  void forward(const Problem& p, std::span<float> o, std::span<float> lse) const override {
    const Shape& s = p.shape;
    const int tq = s.q_len, tk = s.k_len, dk = s.head_dim, dv = s.value_dim;
    const float neg_inf = -std::numeric_limits<float>::infinity();
    std::vector<float> q(std::size_t(tq) * dk), k(std::size_t(tk) * dk);
    std::vector<float> scores(std::size_t(tq) * tk);  // the whole score matrix of one head
    const long long offset = p.effective_q_offset();
    for (int b = 0; b < s.batch; ++b)
      for (int h = 0; h < s.heads; ++h) {
        const int g = p.kv_head_of(h);
        const float* qh = &p.q[(std::size_t(b) * s.heads + h) * tq * dk];
        const float* kh = &p.k[(std::size_t(b) * s.kv_heads + g) * tk * dk];
        const float* vh = &p.v[(std::size_t(b) * s.kv_heads + g) * tk * dv];
        q.assign(qh, qh + q.size());
        k.assign(kh, kh + k.size());
        if (p.rope.enabled) {
          for (int i = 0; i < tq; ++i) rotate(&q[std::size_t(i) * dk], dk, offset + i, p.rope.base);
          for (int j = 0; j < tk; ++j) rotate(&k[std::size_t(j) * dk], dk, j, p.rope.base);
        }
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, tq, tk, dk, static_cast<float>(p.effective_scale()),
                    q.data(), dk, k.data(), dk, 0.0f, scores.data(), tk);
        float* out = &o[(std::size_t(b) * s.heads + h) * tq * dv];
        for (int i = 0; i < tq; ++i) {
          float* row = &scores[std::size_t(i) * tk];
          float max = neg_inf;
          for (int j = 0; j < tk; ++j) {
            if (!visible(p, b, i, j, offset)) row[j] = neg_inf;
            max = std::max(max, row[j]);
          }
          float sum = 0.0f;
          for (int j = 0; j < tk; ++j) {
            row[j] = row[j] == neg_inf ? 0.0f : std::exp(row[j] - max);
            sum += row[j];
          }
          const float inv = max == neg_inf ? 0.0f : 1.0f / sum;  // an empty row: weights 0, O = 0
          for (int j = 0; j < tk; ++j) row[j] *= inv;
          if (!lse.empty())
            lse[(std::size_t(b) * s.heads + h) * tq + i] = max == neg_inf ? neg_inf : max + std::log(sum);
        }
        // O = P V. sgemm would spread 0 * NaN from a non-finite V row to every query that gives it
        // weight 0 (masked for it, seen by another): such rows leave the product and are added
        // back only where their weight is not 0.
        std::vector<float> v(vh, vh + std::size_t(tk) * dv);
        std::vector<int> nonfinite;
        for (int j = 0; j < tk; ++j) {
          float* vj = &v[std::size_t(j) * dv];
          if (std::all_of(vj, vj + dv, [](float x) { return std::isfinite(x); })) continue;
          nonfinite.push_back(j);
          std::fill_n(vj, dv, 0.0f);
        }
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, tq, dv, tk, 1.0f, scores.data(), tk, v.data(), dv, 0.0f,
                    out, dv);
        for (int j : nonfinite)
          for (int i = 0; i < tq; ++i)
            if (const float w = scores[std::size_t(i) * tk + j]; w != 0.0f)
              for (int r = 0; r < dv; ++r) out[std::size_t(i) * dv + r] += w * vh[std::size_t(j) * dv + r];
      }
  }

 private:
  static bool visible(const Problem& p, int b, int i, int j, long long offset) {
    const MaskSpec& m = p.mask;
    const long long pos = offset + i;
    const int tq = p.shape.q_len, tk = p.shape.k_len;
    if (!m.q_valid.empty() && i >= m.q_valid[b]) return false;
    if (m.causal && j > pos) return false;
    if (m.window && pos - j >= *m.window) return false;
    if (!m.kv_valid.empty() && j >= m.kv_valid[b]) return false;
    if (!m.q_segment.empty() && m.q_segment[std::size_t(b) * tq + i] != m.k_segment[std::size_t(b) * tk + j])
      return false;
    if (!m.explicit_mask.empty() && !m.explicit_mask[(std::size_t(b) * tq + i) * tk + j]) return false;
    return true;
  }
  static void rotate(float* x, int d, long long pos, double base) {
    for (std::ptrdiff_t m = 0; m < d / 2; ++m) {  // a pointer offset: 2 * m in ptrdiff_t
      const double angle = static_cast<double>(pos) * std::pow(base, -2.0 * m / d);
      const float c = static_cast<float>(std::cos(angle)), s = static_cast<float>(std::sin(angle));
      const float a = x[2 * m], b = x[2 * m + 1];
      x[2 * m] = a * c - b * s;
      x[2 * m + 1] = a * s + b * c;
    }
  }
};

}  // namespace

std::unique_ptr<Kernel> make_blas_baseline_kernel() { return std::make_unique<BlasBaselineKernel>(); }

void set_blas_threads(int threads) { openblas_set_num_threads(threads); }

}  // namespace attest
