#include "sampled_gradient.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>

#include "attest/properties/harness.h"
#include "attest/reference/reference.h"
#include "gradient_checks.h"

namespace attest {
namespace {

// Whether row i of batch entry b sees key j under p's mask terms (a conjunction; no bias).
bool row_sees_key(const Problem& p, int b, int i, int j) {
  const MaskSpec& m = p.mask;
  const Shape& s = p.shape;
  const long long pos = p.query_position(i);
  if (!m.q_valid.empty() && !(i < m.q_valid[b])) return false;
  if (m.causal && j > pos) return false;
  if (m.window && pos - j >= *m.window) return false;
  if (m.chunk && std::floor(double(pos) / *m.chunk) != std::floor(double(j) / *m.chunk)) return false;
  if (m.lookahead && j - pos >= *m.lookahead) return false;
  if (!m.kv_valid.empty() && !(j < m.kv_valid[b])) return false;
  if (!m.q_segment.empty() && m.q_segment[std::size_t(b) * s.q_len + i] != m.k_segment[std::size_t(b) * s.k_len + j])
    return false;
  if (!m.explicit_mask.empty() && !m.explicit_mask[(std::size_t(b) * s.q_len + i) * s.k_len + j]) return false;
  return true;
}

// The sampled rows of p as a problem of their own: the same keys, each row's visibility as an
// explicit mask (positions no longer matter: samples_backward holds).
Problem sampled_rows_only(const Problem& p, const std::vector<int>& rows) {
  const Shape& s = p.shape;
  const int n = static_cast<int>(rows.size());
  Problem r = p;
  r.shape.q_len = n;
  r.q_offset.reset();
  r.q.clear();
  for (int bh = 0; bh < s.batch * s.heads; ++bh)
    for (int i : rows) {
      const auto row = p.q.begin() + (std::size_t(bh) * s.q_len + i) * s.head_dim;
      r.q.insert(r.q.end(), row, row + s.head_dim);
    }
  r.mask = MaskSpec{};
  r.mask.explicit_mask.assign(std::size_t(s.batch) * n * s.k_len, 0);
  for (int b = 0; b < s.batch; ++b)
    for (int e = 0; e < n; ++e)
      for (int j = 0; j < s.k_len; ++j)
        r.mask.explicit_mask[(std::size_t(b) * n + e) * s.k_len + j] = row_sees_key(p, b, rows[e], j) ? 1 : 0;
  return r;
}

double l2_norm(const float* x, int n) {
  double sum = 0;
  for (int e = 0; e < n; ++e) sum += double(x[e]) * x[e];
  return std::sqrt(sum);
}

// An LSE no logit of the row exceeds (|scale| |q| max |k|, a softcap's c, the sink), plus a margin
// for the kernel's own rounding: exp(s - LSE) <= e for every key.
float lse_above_logits(const Problem& p, int h, const float* q, double largest_key) {
  const double scale = p.scale ? std::fabs(*p.scale) : 1.0 / std::sqrt(double(p.shape.head_dim));
  double top = scale * l2_norm(q, p.shape.head_dim) * largest_key;
  if (p.modifiers.softcap) top = std::min(top, *p.modifiers.softcap);
  if (!p.modifiers.sinks.empty()) top = std::max(top, double(p.modifiers.sinks[h]));
  return static_cast<float>(top * 1.001 + 1.0);
}

}  // namespace

bool samples_backward(const Problem& p) {
  return !p.rope.enabled && p.modifiers.alibi_slopes.empty() && p.modifiers.bias.empty();
}

SampledBackward sampled_backward(const Problem& p, std::vector<int> rows, EmptyRowPolicy policy, int jobs) {
  if (!samples_backward(p)) throw std::logic_error("sampled_backward: a position-dependent term (RoPE, ALiBi, bias)");
  const Shape& s = p.shape;
  std::sort(rows.begin(), rows.end());
  rows.erase(std::unique(rows.begin(), rows.end()), rows.end());
  SampledBackward out;
  out.rows = rows;
  out.restricted = sampled_rows_only(p, rows);
  const Reference ref = compute_reference_fast(out.restricted, {.jobs = jobs});
  const int n = static_cast<int>(rows.size()), dv = s.value_dim, dk = s.head_dim;
  const std::vector<float> d_o = output_gradient_for(p);
  GradientInputs& full = out.full;
  full.o.assign(p.o_size(), 0.0f);
  full.lse.assign(p.lse_size(), 0.0f);
  full.d_o.assign(p.o_size(), 0.0f);
  // The largest key of each (batch, kv head), for the unsampled rows' LSE.
  std::vector<double> largest(std::size_t(s.batch) * s.kv_heads, 0.0);
  for (std::size_t bg = 0; bg < largest.size(); ++bg)
    for (int j = 0; j < s.k_len; ++j) largest[bg] = std::max(largest[bg], l2_norm(&p.k[(bg * s.k_len + j) * dk], dk));
  const bool sinks = !p.modifiers.sinks.empty();
  for (int b = 0; b < s.batch; ++b)
    for (int h = 0; h < s.heads; ++h) {
      const std::size_t bh = std::size_t(b) * s.heads + h;
      const double key = largest[std::size_t(b) * s.kv_heads + h / (s.heads / s.kv_heads)];
      for (int i = 0; i < s.q_len; ++i)
        full.lse[bh * s.q_len + i] = lse_above_logits(p, h, &p.q[(bh * s.q_len + i) * dk], key);
      for (int e = 0; e < n; ++e) {
        const std::size_t from = bh * n + e, to = bh * s.q_len + rows[e];
        full.lse[to] = static_cast<float>(ref.lse[from]);
        for (int c = 0; c < dv; ++c) {
          const bool nan = ref.empty[from] && !sinks && policy == EmptyRowPolicy::kNan;
          full.o[to * dv + c] =
              nan ? std::numeric_limits<float>::quiet_NaN() : static_cast<float>(ref.o[from * dv + c]);
          full.d_o[to * dv + c] = d_o[to * dv + c];
        }
      }
    }
  GradientInputs& mine = out.sampled;
  for (int bh = 0; bh < s.batch * s.heads; ++bh)
    for (int i : rows) {
      const std::size_t row = std::size_t(bh) * s.q_len + i;
      mine.lse.push_back(full.lse[row]);
      mine.o.insert(mine.o.end(), full.o.begin() + row * dv, full.o.begin() + (row + 1) * dv);
      mine.d_o.insert(mine.d_o.end(), full.d_o.begin() + row * dv, full.d_o.begin() + (row + 1) * dv);
    }
  return out;
}

Gradients run_sampled_backward(const Problem& p, const SampledBackward& in, const Kernel& kernel,
                               double* kernel_seconds) {
  BackwardInputs inputs = spans_of(in.full);
  inputs.threads = drawn_threads(p);
  const auto start = std::chrono::steady_clock::now();
  Gradients got = run_backward_guarded(kernel, p, inputs);
  if (kernel_seconds) *kernel_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return got;
}

Verdict sampled_backward_matches_reference(const Problem& p, const std::vector<int>& rows, const Kernel& kernel,
                                           int jobs, double* kernel_seconds) {
  const std::string property = "matches_reference";
  const Capabilities caps = kernel.capabilities();
  const SampledBackward in = sampled_backward(p, rows, caps.empty_rows, jobs);
  Gradients got = run_sampled_backward(p, in, kernel, kernel_seconds);
  const ReferenceGradient ref = compute_gradient(in.restricted, in.sampled, gradient_numerics(caps));
  if (!ref.within_float_range) return Verdict::vacuous(property, kBeyondFloat);
  if (!any_row_sees(ref)) return Verdict::vacuous(property, "every sampled row is empty");
  // dQ of the sampled rows only; the kernel's dK, dV and dsinks whole (the other rows add exactly 0).
  const Shape& s = p.shape;
  const int dk = s.head_dim;
  if (got.dq.size() == p.q_size()) {
    std::vector<float> dq;
    for (int bh = 0; bh < s.batch * s.heads; ++bh)
      for (int i : in.rows) {
        const auto row = got.dq.begin() + (std::size_t(bh) * s.q_len + i) * dk;
        dq.insert(dq.end(), row, row + dk);
      }
    got.dq = std::move(dq);
  } else {
    return Verdict::fail(property, fmt::format("dQ has {} elements, expected {}", got.dq.size(), p.q_size()), INFINITY);
  }
  const int threads = drawn_threads(p);
  const std::string label =
      fmt::format("{} sampled rows{}", in.rows.size(), threads ? fmt::format(", threads = {}", threads) : "");
  return compare_gradients(in.restricted, ref, got, property, label, in.rows);
}

}  // namespace attest
