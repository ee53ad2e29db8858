// Overflow safety, determinism and memory discipline.
#include <cmath>
#include <cstring>
#include <fmt/format.h>
#include <limits>

#include "attest/compare.h"
#include "attest/harness.h"
#include "attest/properties.h"

namespace attest {
namespace {

// Calls f(q_row, k_row) for every query row and every key row its head reads.
template <typename F>
void for_each_pair(const Problem& p, F f) {
  const Shape& s = p.shape;
  for (int b = 0; b < s.batch; ++b)
    for (int h = 0; h < s.heads; ++h)
      for (int i = 0; i < s.q_len; ++i)
        for (int j = 0; j < s.k_len; ++j)
          f(&p.q[((std::size_t(b) * s.heads + h) * s.q_len + i) * s.head_dim],
            &p.k[((std::size_t(b) * s.kv_heads + p.kv_head_of(h)) * s.k_len + j) * s.head_dim]);
}

// sum_k |q_k k_k|, or with RoPE the pairwise bound (|q0| + |q1|)(|k0| + |k1|) of the rotated products.
double abs_product_sum(const Problem& p, const float* q, const float* k) {
  double sum = 0;
  if (p.rope.enabled) {
    for (int c = 0; c + 1 < p.shape.head_dim; c += 2)
      sum += (std::fabs(q[c]) + std::fabs(q[c + 1])) * (std::fabs(double(k[c])) + std::fabs(k[c + 1]));
  } else {
    for (int c = 0; c < p.shape.head_dim; ++c) sum += std::fabs(double(q[c]) * k[c]);
  }
  return sum;
}

// Largest |<q, k>| over all pairs, in double (float products are exact there); with RoPE the
// rotated products' bound, since rotation can raise a dot product up to it.
double max_abs_dot(const Problem& p) {
  double best = 0;
  for_each_pair(p, [&](const float* q, const float* k) {
    double dot = 0;
    if (p.rope.enabled) {
      dot = abs_product_sum(p, q, k);
    } else {
      for (int c = 0; c < p.shape.head_dim; ++c) dot += double(q[c]) * double(k[c]);
    }
    best = std::max(best, std::fabs(dot));
  });
  return best;
}

// A failure on the scaled problem: that problem is the one to save and replay (against the reference).
Verdict with_witness(Verdict v, const Problem& scaled) {
  v.witness = std::make_shared<const Problem>(scaled);
  v.witness_property = "matches_reference";
  return v;
}

}  // namespace

bool within_float_range(const Problem& p) {
  const double limit = std::numeric_limits<float>::max() / 4.0;
  const double scale = std::max(1.0, std::fabs(p.effective_scale()));
  double vmax = 0;
  for (float v : p.v) vmax = std::max<double>(vmax, std::fabs(v));
  if (!(vmax * p.shape.k_len < limit)) return false;
  bool ok = true;
  for_each_pair(p, [&](const float* q, const float* k) { ok = ok && abs_product_sum(p, q, k) * scale < limit; });
  return ok;
}

Verdict overflow_safe(const Problem& p, const Kernel& kernel, Oracle& oracle) {
  const std::string name = "overflow_safe";
  const double dot = max_abs_dot(p);
  if (!(dot > 0) || !std::isfinite(dot)) return Verdict::vacuous(name, "all scores are zero: nothing to scale");
  double worst = 0;
  // Largest logit magnitude, both signs: a negative scale makes rows whose logits are all negative.
  for (double target : {1e2, -1e4, 1e8, -1e16, 1e37}) {
    // Reach the target through the scale, and through Q where the scale alone would leave
    // float range (a float kernel must be able to hold its scale).
    // A kernel that takes only the default scale gets there through Q alone.
    Problem scaled = p;
    const bool default_scale = kernel.capabilities().contract.default_scale_only;
    const double wanted = target / dot;
    const double scale = default_scale ? p.effective_scale() : std::copysign(std::min(std::fabs(wanted), 1e30), wanted);
    if (!default_scale) scaled.scale = scale;
    if (scale != wanted) {
      const double boost = wanted / scale;
      // Q keeps its storage format: boosted values are rounded to it (saturating at its largest).
      const float largest = static_cast<float>(info(scaled.storage.q).max_finite);
      for (float& x : scaled.q) x = round_to(std::clamp(static_cast<float>(x * boost), -largest, largest), scaled.storage.q);
    }
    const Reference& ref = oracle.reference(scaled);
    const GuardedOutputs out = run_guarded(kernel, scaled);
    for (std::size_t row = 0; row < ref.lse.size(); ++row) {
      if (ref.empty[row]) continue;
      for (int c = 0; c < p.shape.value_dim; ++c) {
        const std::size_t e = row * p.shape.value_dim + c;
        if (std::isfinite(ref.o[e]) && !std::isfinite(out.o[e]))
          return with_witness(Verdict::fail(name, fmt::format("logits up to {:.0e}: {}: output {} where the exact value is {:.9g}",
                                                              target, describe_element(p, e), out.o[e], ref.o[e]), INFINITY),
                              scaled);
      }
      if (!out.lse.empty() && std::isfinite(ref.lse[row]) && !std::isfinite(out.lse[row]))
        return with_witness(Verdict::fail(name, fmt::format("logits up to {:.0e}: {}: LSE {} where the exact value is {:.9g}",
                                                            target, describe_row(p, row), out.lse[row], ref.lse[row]), INFINITY),
                            scaled);
    }
    Comparison cmp = compare_with_reference(scaled, ref, out, kernel.capabilities(), name);
    if (!cmp.verdict.passed) {
      cmp.verdict.detail = fmt::format("logits up to {:.0e}: {}", target, cmp.verdict.detail);
      cmp.verdict.witness = std::make_shared<const Problem>(scaled);
      cmp.verdict.witness_property = "matches_reference";
      return cmp.verdict;
    }
    worst = std::max(worst, cmp.verdict.utilisation);
  }
  return Verdict::pass(name, worst);
}

Verdict deterministic_and_in_bounds(const Problem& p, const Kernel& kernel, Oracle& oracle) {
  const std::string name = "deterministic_and_in_bounds";
  const Reference& ref = oracle.reference(p);
  const GuardedOutputs first = run_guarded(kernel, p), second = run_guarded(kernel, p);
  for (const GuardedOutputs* run : {&first, &second}) {
    if (!run->canaries_intact) return Verdict::fail(name, "guard canary overwritten: " + run->canary_report, INFINITY);
    if (!run->inputs_intact) return Verdict::fail(name, "the kernel changed its input buffers", INFINITY);
  }
  // Outputs start as a marked NaN: an element still holding it was never written; another NaN was computed.
  for (std::size_t e = 0; e < first.o.size(); ++e) {
    if (ref.empty[e / p.shape.value_dim] || !std::isnan(first.o[e]) || std::isnan(ref.o[e])) continue;
    return Verdict::fail(name,
                         never_written(first.o[e])
                             ? fmt::format("{}: output never written (it still holds the NaN it was handed)",
                                           describe_element(p, e))
                             : fmt::format("{}: the kernel computed NaN where the exact value is {:.9g}",
                                           describe_element(p, e), ref.o[e]),
                         INFINITY);
  }
  auto bits_equal = [](const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
  };
  if (!bits_equal(first.o, second.o) || !bits_equal(first.lse, second.lse))
    return Verdict::fail(name, "two runs on the same inputs differ bitwise", INFINITY);
  return Verdict::pass(name);
}

}  // namespace attest
