// Score modifiers (docs/design.md#score-modifiers): a -inf bias is a mask, ALiBi is a bias, a softcap bounds every
// weight from below, a sink takes its share of the denominator.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <random>
#include <utility>

#include "attest/properties/compare.h"
#include "attest/properties/harness.h"
#include "attest/properties/properties.h"
#include "declared_range.h"
#include "problem_edits.h"

namespace attest {
namespace {

// Batch, head and query row of a [B][H][Tq] row index.
struct RowIndex {
  int b, h, i;
};
RowIndex row_index(const Shape& s, std::size_t row) {
  return {static_cast<int>(row / (std::size_t(s.heads) * s.q_len)), static_cast<int>((row / s.q_len) % s.heads),
          static_cast<int>(row % s.q_len)};
}

// The additive terms of key j's logit besides the capped score: ALiBi's slope * (j - qpos) and the bias.
double additive_terms(const Problem& p, RowIndex r, int j) {
  const ScoreModifiers& m = p.modifiers;
  double a = 0;
  if (!m.alibi_slopes.empty()) a += double(m.alibi_slopes[r.h]) * double(j - p.query_position(r.i));
  if (!m.bias.empty()) a += m.bias[m.bias_index(p.shape, r.b, r.h, r.i, j)];
  return a;
}

// log(sum e^x) of the terms added, kept as a running maximum and a sum scaled by it (no overflow,
// and a term far below another is not lost against a third one far above).
struct LogSum {
  double max = -INFINITY, sum = 0;
  void add(double x, double weight = 1.0) {
    if (weight == 0) return;
    if (x > max)
      sum = sum * std::exp(max - x) + weight, max = x;
    else
      sum += weight * std::exp(x - max);
  }
  void add(const LogSum& other) { add(other.max, other.sum); }
  double log() const { return sum > 0 ? max + std::log(sum) : -INFINITY; }
};

// The smallest weight exact attention can give each visible key j of a row under a cap c: every
// logit lies in (a_k - c, a_k + c), a_k its additive terms, and p_j grows with s_j, so
//   p_j > e^(a_j - c) / (e^sigma + e^(a_j - c) + sum_{k != j} e^(a_k + c)) = 1 / (1 + e^(L_j - a_j + c)),
// L_j = log(e^sigma + sum_{k != j} e^(a_k + c)), summed before and after j (no cancellation).
std::vector<double> weight_floor(const Problem& p, RowIndex r, double c, const std::vector<int>& keys) {
  const ScoreModifiers& m = p.modifiers;
  const std::size_t n = keys.size();
  std::vector<double> a(n);
  for (std::size_t k = 0; k < n; ++k) a[k] = additive_terms(p, r, keys[k]);
  std::vector<LogSum> before(n + 1), after(n + 1);  // over k < idx and over k >= idx
  for (std::size_t k = 0; k < n; ++k) before[k + 1] = before[k], before[k + 1].add(a[k] + c);
  for (std::size_t k = n; k-- > 0;) after[k] = after[k + 1], after[k].add(a[k] + c);
  std::vector<double> floor(n);
  for (std::size_t k = 0; k < n; ++k) {
    LogSum rest = before[k];
    rest.add(after[k + 1]);
    if (!m.sinks.empty()) rest.add(double(m.sinks[r.h]));
    floor[k] = 1.0 / (1.0 + std::exp(rest.log() - (a[k] - c)));
  }
  return floor;
}

// Relative slack of a kernel's weights against the floor: its logits may stray a few roundings of
// c + |a| outside (a - c, a + c); the exp arguments carry u |s - m| over a logit range R; each of the
// K tiles' rescales adds an exp error; the sums, the division, P's and O's roundings add theirs.
double floor_slack(const KernelNumerics& k, double c, double max_abs_terms, double range, int terms, int tiles) {
  const double sums = std::max(k.sum_roundoff, k.weight_sum_roundoff);
  const double logit = (8 * k.score_roundoff + 2 * k.entry_score) * (c + max_abs_terms);
  const double eta = 2 * logit + 2 * k.entry_score_absolute + 2 * k.score_roundoff * (range + 2 * logit) +
                     (tiles + 2) * k.exp_error + gamma_n(summation_terms(terms, k.key_tile, tiles) + 2, sums) +
                     2 * sums + k.weight_rounding + k.entry_value + k.output_roundoff;
  return 2 * eta;
}

// Checks the V = I probe's rows (probe block `first`, `width` keys) against the cap's floor.
Verdict check_weight_floor(const Problem& probe, const Reference& ref, const Outputs& out, int first, int width,
                           const Capabilities& caps, const std::string& label) {
  const std::string name = "softcap_saturates";
  const Shape& s = probe.shape;
  const double c = *probe.modifiers.softcap;
  const KernelNumerics numerics = numerics_of(caps, out.path, probe);
  const int tiles = numerics.key_tile > 0 ? (s.k_len + numerics.key_tile - 1) / numerics.key_tile : 1;
  const double quantum =
      numerics.underflow_quantum + numerics.output_quantum + numerics.weight_quantum + numerics.entry_value_absolute;
  std::vector<int> keys;
  for (std::size_t row = 0; row < ref.lse.size(); ++row) {
    if (ref.empty[row]) continue;
    keys.clear();
    for (int j = 0; j < s.k_len; ++j)
      if (ref.visible[row * s.k_len + j]) keys.push_back(j);
    const RowIndex r = row_index(s, row);
    const std::vector<double> floor = weight_floor(probe, r, c, keys);
    double lo = INFINITY, hi = probe.modifiers.sinks.empty() ? -INFINITY : double(probe.modifiers.sinks[r.h]),
           largest = 0;
    for (int j : keys) {
      const double a = additive_terms(probe, r, j);
      lo = std::min(lo, a - c), hi = std::max(hi, a + c), largest = std::max(largest, std::fabs(a));
    }
    const double eta = floor_slack(numerics, c, largest, hi - lo, ref.visible_keys[row], tiles);
    const double absolute = 2.0 * (ref.visible_keys[row] + tiles + 4) * quantum;
    for (std::size_t k = 0; k < keys.size(); ++k) {
      const int j = keys[k];
      if (j < first || j >= first + width) continue;
      // The output is the weight times the probe's stored one (a quantized V holds only its nearest).
      const std::size_t one =
          ((std::size_t(r.b) * s.kv_heads + probe.kv_head_of(r.h)) * s.k_len + j) * width + (j - first);
      const double got = out.o[row * width + (j - first)],
                   allowed = floor[k] * double(probe.v[one]) * std::exp(-eta) - absolute;
      if (!(got >= allowed))
        return Verdict::fail(name,
                             fmt::format("{}{}: visible key {} gets weight {:.9g}, below what the cap c = {} "
                                         "allows ({:.9g}, with {:.3g} relative slack)",
                                         label, describe_row(probe, row), j, got, c, floor[k], eta),
                             INFINITY);
    }
  }
  return Verdict::pass(name);
}

}  // namespace

Verdict bias_minus_inf_equals_mask(const Problem& p, const Kernel& kernel, Oracle& oracle) {
  const std::string name = "bias_minus_inf_equals_mask";
  const Shape& s = p.shape;
  std::mt19937_64 rng(seed_of(p, 7));
  const bool per_batch = rng() % 2, per_head = rng() % 2;
  Problem base = with_bias(p, per_batch, per_head);
  kernel.capabilities().contract.fit_alibi_or_bias(base, true);
  const ScoreModifiers& m = base.modifiers;
  // Entries to hide, [B or 1][Tq][Tk] (one set for every batch when the bias is broadcast over
  // batches): about one in four, one whole row (it becomes empty) and one whole key column.
  const int nb = m.bias_per_batch ? s.batch : 1, tq = s.q_len, tk = s.k_len;
  std::vector<std::uint8_t> hide(std::size_t(nb) * tq * tk);
  for (auto& x : hide) x = rng() % 4 == 0;
  const int full_row = static_cast<int>(rng() % tq), full_column = static_cast<int>(rng() % tk);
  for (int b = 0; b < nb; ++b) {
    for (int j = 0; j < tk; ++j) hide[(std::size_t(b) * tq + full_row) * tk + j] = 1;
    for (int i = 0; i < tq; ++i) hide[(std::size_t(b) * tq + i) * tk + full_column] = 1;
  }
  auto hidden = [&](int b, int i, int j) { return hide[(std::size_t(m.bias_per_batch ? b : 0) * tq + i) * tk + j]; };
  // The same keys hidden twice: by a -inf bias in every head, and by the explicit mask.
  Problem biased = base;
  biased.modifiers.bias = rebuilt_bias(base, s, [&](int b, int h, int i, int j) {
    return hidden(b, i, j) ? -INFINITY : m.bias[m.bias_index(s, b, h, i, j)];
  });
  Problem masked = base;
  std::vector<std::uint8_t>& mask = masked.mask.explicit_mask;
  if (mask.empty()) mask.assign(std::size_t(s.batch) * tq * tk, 1);
  const std::vector<std::uint8_t> visible = visibility_of(base);
  bool changed = false;
  for (int b = 0; b < s.batch; ++b)
    for (int i = 0; i < tq; ++i)
      for (int j = 0; j < tk; ++j) {
        const std::size_t e = (std::size_t(b) * tq + i) * tk + j;
        if (!hidden(b, i, j)) continue;
        changed = changed || visible[e];
        mask[e] = 0;
      }
  if (!changed) return Verdict::vacuous(name, "every key the bias hides was masked already");
  const Reference& ref = oracle.reference(masked);
  return compare_runs(masked, ref, run_guarded(kernel, masked), run_guarded(kernel, biased), kernel.capabilities(),
                      name, "keys hidden by a -inf bias vs by the explicit mask:");
}

Verdict alibi_matches_bias(const Problem& p, const Kernel& kernel, Oracle& oracle) {
  const std::string name = "alibi_matches_bias";
  const Shape& s = p.shape;
  Problem sloped = with_alibi_slopes(p, seed_of(p, 8));
  // ALiBi or a bias, not both: the slopes alone against the same terms as a bias alone.
  kernel.capabilities().contract.fit_alibi_or_bias(sloped, false);
  const ScoreModifiers& m = sloped.modifiers;
  // The same terms as a bias: slope[h] * (j - qpos(i)) in every head, added to the problem's own
  // bias (per batch only if that one is); the product rounded to float as a kernel rounds it.
  Problem biased = sloped;
  ScoreModifiers& bm = biased.modifiers;
  bm.alibi_slopes.clear();
  bm.bias_per_head = true;
  bm.bias_per_batch = !m.bias.empty() && m.bias_per_batch;
  bm.bias.clear();
  for (int b = 0; b < (bm.bias_per_batch ? s.batch : 1); ++b)
    for (int h = 0; h < s.heads; ++h)
      for (int i = 0; i < s.q_len; ++i)
        for (int j = 0; j < s.k_len; ++j) {
          const float term = static_cast<float>(double(m.alibi_slopes[h]) * double(j - sloped.query_position(i)));
          const float own = m.bias.empty() ? 0.0f : m.bias[m.bias_index(s, b, h, i, j)];
          bm.bias.push_back(std::isinf(own) ? own : static_cast<float>(double(own) + double(term)));
        }
  // Exercised when some visible key sits at a distance other than 0 in a head whose slope is not 0.
  const bool any_slope = std::any_of(m.alibi_slopes.begin(), m.alibi_slopes.end(), [](float x) { return x != 0; });
  const std::vector<std::uint8_t> visible = visibility_of(sloped);
  bool any_distance = false;
  for (std::size_t e = 0; e < visible.size() && !any_distance; ++e)
    any_distance = visible[e] && long(e % s.k_len) != sloped.query_position(int(e / s.k_len % s.q_len));
  if (!any_slope || !any_distance)
    return Verdict::vacuous(name, "every slope is 0 or every visible key is at distance 0");
  // A kernel taking its bias in 16 bits gets these terms rounded there: the two problems then
  // differ by that rounding, so each run is judged against its own reference instead.
  const Capabilities& caps = kernel.capabilities();
  biased.storage.bias = caps.precision.bias;
  bool rounded = false;
  for (float& x : bm.bias) rounded |= std::exchange(x, round_to(x, caps.precision.bias)) != x;
  if (rounded) {
    Verdict v =
        compare_with_reference(sloped, oracle.reference(sloped), run_guarded(kernel, sloped), caps, name).verdict;
    return v.passed ? compare_with_reference(biased, oracle.reference(biased), run_guarded(kernel, biased), caps, name)
                          .verdict
                    : v;
  }
  const Reference& ref = oracle.reference(sloped);
  return compare_runs(sloped, ref, run_guarded(kernel, sloped), run_guarded(kernel, biased), kernel.capabilities(),
                      name, "ALiBi slopes vs the same terms as an explicit bias:");
}

Verdict softcap_saturates(const Problem& p, const Kernel& kernel, Oracle& oracle) {
  const std::string name = "softcap_saturates";
  const int tk = p.shape.k_len;
  if (tk > 256) return Verdict::not_applicable(name, "probe V = I needs Tk <= 256");
  Problem capped = p;
  std::mt19937_64 rng(seed_of(p, 9));
  if (!capped.modifiers.softcap) capped.modifiers.softcap = std::array{1.0, 5.0, 30.0, 50.0}[rng() % 4];
  const double c = *capped.modifiers.softcap;
  const double dot = max_abs_dot(capped);
  if (!(dot > 0) || !std::isfinite(dot)) return Verdict::vacuous(name, "all scores are zero: nothing to scale");
  const Capabilities caps = kernel.capabilities();
  const int width = identity_probe_width(capped, caps);
  double worst = 0;
  bool exercised = false;
  // Logits just past the cap, far past it (a tanh written with exp(2x) overflows there), and huge.
  // Every block of V = I at the first scale; at the two extreme ones (an overflow shows in any
  // block) the first and the last block, so a narrow Dv does not multiply the calls by three.
  for (double target : {4 * c, -1e3 * c, 1e30}) {
    const Problem scaled = with_logits_up_to(capped, target, dot, caps);
    // A q.k that overflows its float or declared score format is not the cap's business.
    if (!within_float_range(scaled) || !logits_within_declared_range(scaled, caps)) continue;
    const std::string label = fmt::format("Q scaled to logits up to {:.0e} (cap {}), V = I: ", target, c);
    const int last = (tk - 1) / width * width;
    for (int first = 0; first < tk; first = target == 4 * c || first == last ? first + width : last) {
      const Problem probe = identity_probe(scaled, width, first);
      const Reference& ref = oracle.reference(probe, /*weights=*/true);
      const GuardedOutputs out = run_guarded(kernel, probe);
      for (std::size_t e = 0; e < out.o.size(); ++e)
        if (!ref.empty[e / width] && !std::isfinite(out.o[e]))
          return Verdict::fail(
              name,
              fmt::format("{}{}: weight {} (a capped logit is finite)", label, describe_element(probe, e), out.o[e]),
              INFINITY);
      // The floor first: it holds at every scale, also where the bound has grown vacuous.
      const Verdict floor = check_weight_floor(probe, ref, out, first, width, caps, label);
      if (!floor.passed) return floor;
      Comparison cmp = compare_with_reference(probe, ref, out, caps, name);
      if (!cmp.verdict.passed) {
        cmp.verdict.detail = label + cmp.verdict.detail;
        return cmp.verdict;
      }
      exercised = exercised || std::find(ref.empty.begin(), ref.empty.end(), 0) != ref.empty.end();
      worst = std::max(worst, cmp.verdict.utilisation);
    }
  }
  return exercised ? Verdict::pass(name, worst) : Verdict::vacuous(name, "no row sees a key at any scaling");
}

Verdict sink_takes_mass(const Problem& p, const Kernel& kernel, Oracle& oracle) {
  const std::string name = "sink_takes_mass";
  const Capabilities caps = kernel.capabilities();
  const Shape& s = p.shape;
  Problem sunk = p;
  std::mt19937_64 rng(seed_of(p, 10));
  if (sunk.modifiers.sinks.empty()) {
    // Far below the logits (no mass), near them, and far above (all of it: an exp(sigma - m) overflows).
    const float values[] = {-1e4f, -10.0f, -1.0f, 0.0f, 0.0f, 1.0f, 3.0f, 10.0f, 100.0f, 1e4f};
    for (int h = 0; h < s.heads; ++h) sunk.modifiers.sinks.push_back(values[rng() % 10]);
  }
  // A row that sees no key but the sink: batch 0's last query padded, or failing that capability,
  // every key of the last batch.
  if (caps.declares(Feature::kQueryPadding)) {
    if (sunk.mask.q_valid.empty()) sunk.mask.q_valid.assign(s.batch, s.q_len);
    sunk.mask.q_valid[0] = std::min(sunk.mask.q_valid[0], s.q_len - 1);
  } else if (caps.declares(Feature::kKeyPadding)) {
    if (sunk.mask.kv_valid.empty()) sunk.mask.kv_valid.assign(s.batch, s.k_len);
    sunk.mask.kv_valid.back() = 0;
  }
  // V = 1 in every column of the problem's own width: a kernel whose path depends on Dv keeps it.
  const int dv = s.value_dim;
  const Problem probe = with_values(sunk, dv, [](int, int) { return 1.0f; });
  const Reference& ref = oracle.reference(probe);
  const GuardedOutputs out = run_guarded(kernel, probe);
  const KernelNumerics numerics = numerics_of(caps, out.path, probe);
  const bool lse = caps.lse() && !out.lse.empty();
  double worst = 0;
  for (std::size_t row = 0; row < ref.lse.size(); ++row) {
    const float sigma = sunk.modifiers.sinks[row_index(s, row).h];
    for (int col = 0; col < dv; ++col) {
      const std::size_t e = row * dv + col;
      const float got = out.o[e];
      if (ref.empty[row]) {
        if (got != 0.0f)
          return Verdict::fail(name,
                               fmt::format("{}: sees no key but the sink (sigma = {}): outputs {:.9g}, not 0",
                                           describe_element(probe, e), sigma, got),
                               INFINITY);
        continue;
      }
      // The keys' share of the denominator: 1 - exp(sigma - LSE), as the reference has it exactly.
      const double expected = ref.o[e], error = std::fabs(double(got) - expected);
      const double bound = output_bound(probe, ref, e, numerics);
      if (!(error <= bound))
        return Verdict::fail(name,
                             fmt::format("{}: V = 1 outputs {:.9g}, not 1 - exp(sigma - LSE) = 1 - exp({} - "
                                         "{:.9g}) = {:.9g}, |error| {:.3g} > bound {:.3g}",
                                         describe_element(probe, e), got, sigma, ref.lse[row], expected, error, bound),
                             error / bound);
      worst = std::max(worst, error / bound);
    }
    if (!lse) continue;
    const float got = out.lse[row];
    if (ref.empty[row]) {
      if (got != sigma)
        return Verdict::fail(name,
                             fmt::format("{}: sees no key but the sink: LSE {:.9g}, not sigma = {}",
                                         describe_row(probe, row), got, sigma),
                             INFINITY);
      continue;
    }
    const double error = std::fabs(double(got) - ref.lse[row]), bound = lse_bound(probe, ref, row, numerics);
    if (!(error <= bound))
      return Verdict::fail(name,
                           fmt::format("{}: LSE {:.9g}, expected log(exp({}) + sum exp(s)) = {:.9g}, |error| "
                                       "{:.3g} > bound {:.3g}",
                                       describe_row(probe, row), got, sigma, ref.lse[row], error, bound),
                           error / bound);
    worst = std::max(worst, error / bound);
  }
  return Verdict::pass(name, worst);
}

}  // namespace attest
