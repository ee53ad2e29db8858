// Backward properties (docs/design.md#backward): the gradients of exact attention and their invariants.
// Every backward call gets the exact forward's O and LSE rounded to float and a dO drawn from the
// problem (gradient_checks.h), so a backward is judged alone.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <thread>

#include "attest/kernels/builtin_kernels.h"
#include "attest/properties/compare.h"
#include "attest/properties/harness.h"
#include "attest/properties/precision_gate.h"
#include "attest/properties/properties.h"
#include "gradient_checks.h"
#include "problem_edits.h"

namespace attest {
namespace {

constexpr const char* kUnbounded = "every element's bound is infinite (float cannot hold the computation)";

// |a - b| within the sum of both bounds: two calls exact arithmetic says are equal.
Verdict compare_calls(const Problem& p, const std::vector<float>& a, const std::vector<float>& b,
                      const std::vector<double>& bound, const char* which, const std::string& property,
                      const std::string& label, double& worst, long& compared) {
  for (std::size_t e = 0; e < a.size(); ++e) {
    const double error = std::fabs(double(a[e]) - double(b[e])), allowed = 2 * bound[e];
    if (std::isinf(allowed)) continue;  // float cannot hold the computation: nothing to judge
    ++compared;
    if (!(error <= allowed))
      return Verdict::fail(property,
                           fmt::format("{}: {} is {:.9g} and {:.9g} (difference {:.3g} > {:.3g})", label,
                                       describe_gradient(p, which, e), a[e], b[e], error, allowed),
                           allowed > 0 ? error / allowed : INFINITY);
    if (allowed > 0) worst = std::max(worst, error / allowed);
  }
  return Verdict::pass(property, worst);
}

}  // namespace

Verdict gradient_matches_reference(const Problem& p, const Kernel& kernel, Oracle& oracle) {
  return backward_matches_reference(p, kernel, oracle, "gradient_matches_reference");
}

namespace {

// Worst |kernel - exact| over the element's scale (gradient.h), in units of u; the element's of a
// float kernel are a few. Elements float cannot hold (an infinite bound) are not counted.
double scaled_gradient_error(const ReferenceGradient& ref, const Gradients& got) {
  double worst = 0;
  for (const auto& [values, exact, scale, bound] :
       {std::tuple{&got.dq, &ref.dq, &ref.dq_scale, &ref.dq_bound},
        std::tuple{&got.dk, &ref.dk, &ref.dk_scale, &ref.dk_bound},
        std::tuple{&got.dv, &ref.dv, &ref.dv_scale, &ref.dv_bound},
        std::tuple{&got.dsinks, &ref.dsinks, &ref.dsinks_scale, &ref.dsinks_bound}})
    for (std::size_t e = 0; e < values->size(); ++e) {
      if (std::isinf((*bound)[e]) || !((*scale)[e] > 0)) continue;
      const double err = std::fabs(double((*values)[e]) - (*exact)[e]) / (*scale)[e] / 0x1p-24;
      worst = std::max(worst, std::isnan(err) ? INFINITY : err);
    }
  return worst;
}

}  // namespace

Verdict gradient_precision_gate(const Problem& p, const Kernel& kernel, Oracle& oracle) {
  const std::string name = "gradient_precision_gate";
  // Gate 2 (docs/design.md#tolerance-model) for the backward: the hard bound is far above a float kernel's typical
  // error, so the kernel's error is held to the loop backward's on the same inputs.
  const GradientRun r = run_gradient(p, kernel, oracle, output_gradient_for(p));
  if (!r.ref.within_float_range) return Verdict::vacuous(name, kBeyondFloat);
  if (!any_row_sees(r.ref)) return Verdict::vacuous(name, "every row is empty");
  const Gradients model = run_backward_guarded(*make_loop_kernel(), p, spans_of(r.in));
  const double got = scaled_gradient_error(r.ref, r.got), loop = scaled_gradient_error(r.ref, model);
  const double allowed = kPrecisionGateFactor * std::max(loop, kPrecisionGateFloor);
  if (!(got <= allowed))
    return Verdict::fail(name,
                         fmt::format("gradient error {:.3g} u (relative to each element's magnitudes) vs the loop "
                                     "backward's {:.3g} u: above {} x max(loop, {} u): a precision downgrade?",
                                     got, loop, kPrecisionGateFactor, kPrecisionGateFloor),
                         got / allowed);
  return Verdict::pass(name, got / allowed);
}

Verdict gradient_masked_keys_zero(const Problem& p, const Kernel& kernel, Oracle& oracle) {
  const std::string name = "gradient_masked_keys_zero";
  const Capabilities caps = kernel.capabilities();
  // Keys no row sees, then (for a kernel with a bias) keys hidden by a -inf bias alone; each
  // with its K, then its V, poisoned (NaN, inf, 1e30): their dK and dV exactly 0, the rest exact.
  std::vector<std::pair<Problem, std::string>> variants = {{p, "keys no row sees"}};
  if (caps.declares(Feature::kBias)) {
    Problem base = with_bias(p, false, false);
    caps.contract.fit_alibi_or_bias(base, true);
    const int first = static_cast<int>(seed_of(p, 12) % 3);
    Problem biased = base;
    biased.modifiers.bias = rebuilt_bias(base, p.shape, [&](int b, int h, int i, int j) {
      return j % 3 == first ? -INFINITY : base.modifiers.bias[base.modifiers.bias_index(p.shape, b, h, i, j)];
    });
    variants.emplace_back(biased, "keys hidden by a -inf bias");
  }
  bool exercised = false;
  double worst = 0;
  for (const auto& [variant, label] : variants) {
    const KeySet keys = unseen_keys(variant, visibility_of(variant));
    for (Poisoned which : {Poisoned::kKeys, Poisoned::kValues}) {
      Problem poisoned = variant;
      if (poison(poisoned, keys, which, caps) == 0) continue;
      exercised = true;
      const GradientRun r = run_gradient(poisoned, kernel, oracle, output_gradient_for(variant));
      const std::string what = fmt::format("{}, their {} poisoned", label, which == Poisoned::kKeys ? "K" : "V");
      for (std::size_t key = 0; key < r.ref.key_seen.size(); ++key) {
        if (r.ref.key_seen[key]) continue;
        for (const auto& [grad, width, which_name] :
             {std::tuple{&r.got.dk, p.shape.head_dim, "dK"}, std::tuple{&r.got.dv, p.shape.value_dim, "dV"}})
          for (int c = 0; c < width; ++c)
            if (const float x = (*grad)[key * width + c]; x != 0.0f)
              return Verdict::fail(name,
                                   fmt::format("{}: {} = {:.9g} for a key no row sees (must be exactly 0)", what,
                                               describe_gradient(p, which_name, key * width + c), x),
                                   INFINITY);
      }
      const Verdict v = compare_gradients(poisoned, r.ref, r.got, name, what);
      if (!v.passed) return v;
      worst = std::max(worst, v.utilisation);
    }
  }
  if (!exercised) return Verdict::vacuous(name, "no key is masked in every row");
  return Verdict::pass(name, worst);
}

Verdict gradient_dv_is_pt_do(const Problem& p, const Kernel& kernel, Oracle& oracle) {
  const std::string name = "gradient_dv_is_pt_do";
  // dO one-hot: row first + r of every head has 1 in column r, so column r of dV is row first + r
  // of P (summed over a GQA group's heads), P taken from the reference's weights.
  const Shape& s = p.shape;
  const int dv = s.value_dim, group = s.heads / s.kv_heads;
  const Reference& forward = oracle.reference(p, /*weights=*/true);
  if (std::find(forward.empty.begin(), forward.empty.end(), 0) == forward.empty.end())
    return Verdict::vacuous(name, "every row is empty");
  double worst = 0;
  long compared = 0;
  for (int first = 0; first < s.q_len && first < 2 * dv; first += dv) {
    std::vector<float> d_o(p.o_size(), 0.0f);
    for (std::size_t row = 0; row < p.lse_size(); ++row) {
      const int i = static_cast<int>(row % s.q_len);
      if (i >= first && i < first + dv) d_o[row * dv + (i - first)] = 1.0f;
    }
    const GradientRun r = run_gradient(p, kernel, oracle, d_o);
    for (int b = 0; b < s.batch; ++b)
      for (int g = 0; g < s.kv_heads; ++g)
        for (int j = 0; j < s.k_len; ++j)
          for (int c = 0; c < dv && first + c < s.q_len; ++c) {
            double weight = 0;  // sum over the group's heads of P[first + c][j]
            for (int h = g * group; h < (g + 1) * group; ++h)
              weight += forward.weights[((std::size_t(b) * s.heads + h) * s.q_len + first + c) * s.k_len + j];
            const std::size_t e = ((std::size_t(b) * s.kv_heads + g) * s.k_len + j) * dv + c;
            const double error = std::fabs(double(r.got.dv[e]) - weight), bound = r.ref.dv_bound[e] + weight * 0x1p-50;
            if (std::isinf(bound)) continue;
            ++compared;
            if (!(error <= bound))
              return Verdict::fail(
                  name,
                  fmt::format("dO one-hot on row {}: {} = {:.9g}, but that row's weight on key {} "
                              "is {:.9g} (error {:.3g} > bound {:.3g})",
                              first + c, describe_gradient(p, "dV", e), r.got.dv[e], j, weight, error, bound),
                  bound > 0 ? error / bound : INFINITY);
            if (bound > 0) worst = std::max(worst, error / bound);
          }
  }
  if (compared == 0) return Verdict::vacuous_bound(name, kUnbounded);
  return Verdict::pass(name, worst);
}

Verdict gradient_ds_rows_sum_to_zero(const Problem& given, const Kernel& kernel, Oracle& oracle) {
  const std::string name = "gradient_ds_rows_sum_to_zero";
  // With every key of a head equal to one vector k, dQ_i = scale k sum_j dS_ij, and the softmax
  // Jacobian's rows sum to 0: dQ is 0 up to rounding. RoPE would rotate the equal keys apart, and a
  // sink takes part of the row sum (sum_j dS_ij = p_sink D_i).
  if (!given.modifiers.sinks.empty()) return Verdict::vacuous(name, "with sinks, sum_j dS_ij = p_sink D_i, not 0");
  Problem p = given;
  p.rope.enabled = false;
  if (!kernel.capabilities().supports(p)) return Verdict::vacuous(name, "needs the problem without RoPE");
  const Shape& s = p.shape;
  for (int bg = 0; bg < s.batch * s.kv_heads; ++bg)
    for (int j = 1; j < s.k_len; ++j)
      std::copy_n(&p.k[std::size_t(bg) * s.k_len * s.head_dim], s.head_dim,
                  &p.k[(std::size_t(bg) * s.k_len + j) * s.head_dim]);
  const GradientRun r = run_gradient(p, kernel, oracle, output_gradient_for(p));
  if (!r.ref.within_float_range) return Verdict::vacuous(name, kBeyondFloat);
  if (!any_row_sees(r.ref)) return Verdict::vacuous(name, "every row is empty");
  double worst = 0;
  long compared = 0;
  for (std::size_t e = 0; e < r.got.dq.size(); ++e) {
    const double error = std::fabs(double(r.got.dq[e])), bound = r.ref.dq_bound[e] + std::fabs(r.ref.dq[e]);
    if (std::isinf(bound)) continue;
    ++compared;
    if (!(error <= bound))
      return Verdict::fail(name,
                           fmt::format("every key equal: {} = {:.9g}, but the rows of dS sum to 0 (bound {:.3g})",
                                       describe_gradient(p, "dQ", e), r.got.dq[e], bound),
                           bound > 0 ? error / bound : INFINITY);
    if (bound > 0) worst = std::max(worst, error / bound);
  }
  if (compared == 0) return Verdict::vacuous_bound(name, kUnbounded);
  return Verdict::pass(name, worst);
}

Verdict gradient_empty_rows_contribute_nothing(const Problem& p, const Kernel& kernel, Oracle& oracle) {
  const std::string name = "gradient_empty_rows_contribute_nothing";
  const Capabilities caps = kernel.capabilities();
  // More rows made empty (the last query of every batch entry, or every key of the last one), their
  // dO made huge: their dQ is exactly 0 and nothing else changes.
  const Problem variant = with_more_empty_rows(p, caps);
  const Shape& s = p.shape;
  const Reference& forward = oracle.reference(variant);
  std::vector<float> d_o = output_gradient_for(p);
  bool any_empty = false;
  for (std::size_t row = 0; row < forward.empty.size(); ++row)
    if (forward.empty[row] && variant.modifiers.sinks.empty()) {
      any_empty = true;
      std::fill_n(&d_o[row * s.value_dim], s.value_dim, 1e30f);
    }
  if (!any_empty) return Verdict::vacuous(name, "no row ended up empty (or sinks make every row see one)");
  const GradientRun r = run_gradient(variant, kernel, oracle, d_o);
  if (!r.ref.within_float_range) return Verdict::vacuous(name, kBeyondFloat);
  for (std::size_t row = 0; row < forward.empty.size(); ++row)
    if (forward.empty[row])
      for (int c = 0; c < s.head_dim; ++c)
        if (const float x = r.got.dq[row * s.head_dim + c]; x != 0.0f)
          return Verdict::fail(name,
                               fmt::format("{} = {:.9g} for a row that sees no key (must be exactly 0)",
                                           describe_gradient(variant, "dQ", row * s.head_dim + c), x),
                               INFINITY);
  return compare_gradients(variant, r.ref, r.got, name, "rows made empty, their dO 1e30");
}

Verdict gradient_gqa_matches_repeated_heads(const Problem& p, const Kernel& kernel, Oracle& oracle) {
  const std::string name = "gradient_gqa_matches_repeated_heads";
  const Shape& s = p.shape;
  if (s.kv_heads == s.heads) return Verdict::vacuous(name, "H == Hkv: no head is shared");
  // The same forward and dO through repeated heads: each kv head's dK and dV are the sums of its
  // query heads' own.
  const Problem mha = repeated_heads(p);
  const std::vector<float> d_o = output_gradient_for(p);
  const GradientRun gqa = run_gradient(p, kernel, oracle, d_o), rep = run_gradient(mha, kernel, oracle, d_o);
  if (!gqa.ref.within_float_range || !rep.ref.within_float_range) return Verdict::vacuous(name, kBeyondFloat);
  const int group = s.heads / s.kv_heads;
  double worst = 0;
  long compared = 0;
  for (const auto& [width, got, sums, gqa_bound, rep_bound, which] :
       {std::tuple{s.head_dim, &gqa.got.dk, &rep.got.dk, &gqa.ref.dk_bound, &rep.ref.dk_bound, "dK"},
        std::tuple{s.value_dim, &gqa.got.dv, &rep.got.dv, &gqa.ref.dv_bound, &rep.ref.dv_bound, "dV"}}) {
    const std::size_t per_head = std::size_t(s.k_len) * width;
    for (std::size_t e = 0; e < got->size(); ++e) {
      const std::size_t bg = e / per_head, rest = e % per_head;
      const std::size_t b = bg / s.kv_heads, g = bg % s.kv_heads;
      double sum = 0, sum_abs = 0, allowed = (*gqa_bound)[e];
      for (int h = 0; h < group; ++h) {
        const std::size_t m = ((b * s.heads) + g * group + h) * per_head + rest;
        sum += (*sums)[m], sum_abs += std::fabs((*sums)[m]), allowed += (*rep_bound)[m];
      }
      allowed += 2 * group * 0x1p-24 * sum_abs;  // the sum of the repeated heads' gradients, in double here
      const double error = std::fabs(double((*got)[e]) - sum);
      if (std::isinf(allowed)) continue;
      ++compared;
      if (!(error <= allowed))
        return Verdict::fail(
            name,
            fmt::format("GQA {}:{}: {} = {:.9g}, the group's repeated heads sum to {:.9g} "
                        "(difference {:.3g} > {:.3g})",
                        s.heads, s.kv_heads, describe_gradient(p, which, e), (*got)[e], sum, error, allowed),
            allowed > 0 ? error / allowed : INFINITY);
      if (allowed > 0) worst = std::max(worst, error / allowed);
    }
  }
  const Verdict dq =
      compare_calls(p, gqa.got.dq, rep.got.dq, gqa.ref.dq_bound, "dQ", name, "GQA vs repeated heads", worst, compared);
  if (!dq.passed) return dq;
  if (compared == 0) return Verdict::vacuous_bound(name, kUnbounded);
  return Verdict::pass(name, worst);
}

Verdict gradient_permutation_equivariance(const Problem& p, const Kernel& kernel, Oracle& oracle) {
  const std::string name = "gradient_permutation_equivariance";
  for (Feature f : features_used_by(p).members())
    if (info(f).positional)
      return Verdict::vacuous(name, std::string("the problem uses ") + info(f).name + ", which depends on positions");
  const Shape& s = p.shape;
  const std::vector<int> qs = shuffled(s.q_len, seed_of(p, 1)), ks = shuffled(s.k_len, seed_of(p, 2));
  const Problem permuted = permuted_problem(p, qs, ks);
  const std::vector<float> d_o = output_gradient_for(p);
  const GradientRun original = run_gradient(p, kernel, oracle, d_o);
  if (!original.ref.within_float_range) return Verdict::vacuous(name, kBeyondFloat);
  if (!any_row_sees(original.ref)) return Verdict::vacuous(name, "every row is empty");
  const GradientRun moved =
      run_gradient(permuted, kernel, oracle, permute_rows(d_o, s.batch * s.heads, qs, s.value_dim));
  // Back to the original order: row r of the permuted problem is row qs[r] (key ks[r]) of the original.
  auto back = [](const std::vector<float>& x, int outer, const std::vector<int>& order, int width) {
    std::vector<float> out(x.size());
    for (int o = 0; o < outer; ++o)
      for (std::size_t r = 0; r < order.size(); ++r)
        std::copy_n(&x[(o * order.size() + r) * width], width, &out[(o * order.size() + order[r]) * width]);
    return out;
  };
  double worst = 0;
  long compared = 0;
  const std::string label = "queries and keys permuted, mapped back";
  for (const auto& [a, b, bound, which] :
       {std::tuple{&original.got.dq, back(moved.got.dq, s.batch * s.heads, qs, s.head_dim), &original.ref.dq_bound,
                   "dQ"},
        std::tuple{&original.got.dk, back(moved.got.dk, s.batch * s.kv_heads, ks, s.head_dim), &original.ref.dk_bound,
                   "dK"},
        std::tuple{&original.got.dv, back(moved.got.dv, s.batch * s.kv_heads, ks, s.value_dim), &original.ref.dv_bound,
                   "dV"},
        std::tuple{&original.got.dsinks, moved.got.dsinks, &original.ref.dsinks_bound, "dsinks"}}) {
    const Verdict v = compare_calls(p, *a, b, *bound, which, name, label, worst, compared);
    if (!v.passed) return v;
  }
  if (compared == 0) return Verdict::vacuous_bound(name, kUnbounded);
  return Verdict::pass(name, worst);
}

Verdict gradient_deterministic(const Problem& p, const Kernel& kernel, Oracle& oracle) {
  const std::string name = "gradient_deterministic";
  const GradientInputs in = backward_inputs(p, oracle, output_gradient_for(p), kernel.capabilities().empty_rows);
  const Gradients first = run_backward_guarded(kernel, p, spans_of(in));
  // The same call again, then with 1, 2, 3, 4, 8, 16 workers and the machine's cores: a split
  // reduction's order follows them.
  int call = 1;
  std::vector<int> counts = kThreadCounts;
  counts.push_back(static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
  for (int threads : counts) {
    ++call;
    BackwardInputs inputs = spans_of(in);
    inputs.threads = threads;
    const Gradients again = run_backward_guarded(kernel, p, inputs);
    for (const auto& [a, b, which] :
         {std::tuple{&first.dq, &again.dq, "dQ"}, std::tuple{&first.dk, &again.dk, "dK"},
          std::tuple{&first.dv, &again.dv, "dV"}, std::tuple{&first.dsinks, &again.dsinks, "dsinks"}})
      for (std::size_t e = 0; e < a->size(); ++e)
        // NOLINTNEXTLINE(bugprone-suspicious-memory-comparison): bit for bit, a NaN equals its own bits
        if (std::memcmp(&(*a)[e], &(*b)[e], sizeof(float)) != 0)
          return Verdict::fail(
              name,
              fmt::format("the kernel promises deterministic gradients; call {} ({}) gives {} = "
                          "{:.9g}, call 1 (threads: the kernel's choice) gave {:.9g}",
                          call,
                          threads ? fmt::format("threads = {}", threads) : std::string("threads: the kernel's choice"),
                          describe_gradient(p, which, e), (*b)[e], (*a)[e]),
              INFINITY);
  }
  return Verdict::pass(name);
}

Verdict gradient_matches_finite_difference(const Problem& p, const Kernel& kernel, Oracle& oracle) {
  const std::string name = "gradient_matches_finite_difference";
  // dO on one row (b, h, i) only: the kernel's gradients are then that row's loss O_i . dO_i
  // differentiated, which the single-query problem of that row gives by central differences of
  // the exact forward (no gradient formula involved). A few elements per case, chosen by seed.
  const Shape& s = p.shape;
  std::mt19937_64 rng(seed_of(p, 13));
  const int b = static_cast<int>(rng() % s.batch), h = static_cast<int>(rng() % s.heads);
  const int i = static_cast<int>(rng() % s.q_len), g = p.kv_head_of(h);
  const std::size_t row = (std::size_t(b) * s.heads + h) * s.q_len + i;
  std::vector<float> d_o(p.o_size(), 0.0f);
  const std::vector<float> drawn = output_gradient_for(p);
  std::copy_n(&drawn[row * s.value_dim], s.value_dim, &d_o[row * s.value_dim]);
  const GradientRun r = run_gradient(p, kernel, oracle, d_o);
  if (!r.ref.within_float_range) return Verdict::vacuous(name, kBeyondFloat);
  if (r.ref.empty[row]) return Verdict::vacuous(name, "the chosen row sees no key");
  Problem one = single_slice(single_query(p, i), b, h);
  one.storage = {};  // the steps need not be representable in the problem's storage: the reference takes floats
  const std::vector<float> one_d_o(&drawn[row * s.value_dim], &drawn[row * s.value_dim] + s.value_dim);
  struct Element {
    GradientOf of;
    std::size_t in_one, in_full;
    const char* which;
  };
  std::vector<Element> elements;
  for (int n = 0; n < 2; ++n) {
    const int c = static_cast<int>(rng() % s.head_dim), j = static_cast<int>(rng() % s.k_len);
    const int cv = static_cast<int>(rng() % s.value_dim);
    elements.push_back({GradientOf::kQ, std::size_t(c), row * s.head_dim + c, "dQ"});
    const std::size_t key = (std::size_t(b) * s.kv_heads + g) * s.k_len + j;
    elements.push_back({GradientOf::kK, std::size_t(j) * s.head_dim + c, key * s.head_dim + c, "dK"});
    elements.push_back({GradientOf::kV, std::size_t(j) * s.value_dim + cv, key * s.value_dim + cv, "dV"});
  }
  if (!p.modifiers.sinks.empty()) elements.push_back({GradientOf::kSinks, 0, std::size_t(h), "dsinks"});
  double worst = 0;
  long compared = 0;
  for (const Element& el : elements) {
    const std::vector<float>& inputs = el.of == GradientOf::kQ   ? one.q
                                       : el.of == GradientOf::kK ? one.k
                                       : el.of == GradientOf::kV ? one.v
                                                                 : one.modifiers.sinks;
    const float x = inputs[el.in_one];
    // A step of about 2^-16 of the input (at least of 2^-6): truncation ~h^2, rounding ~2^-100 / h.
    if (!std::isfinite(x) || std::fabs(x) > 1e30f) continue;  // a poisoned masked key: nothing to differentiate
    const float step = std::ldexp(1.0f, std::ilogb(std::max(std::fabs(x), 0x1p-6f)) - 16);
    const FiniteDifference at_h = finite_difference(one, one_d_o, el.of, el.in_one, step);
    const FiniteDifference at_2h = finite_difference(one, one_d_o, el.of, el.in_one, 2 * step);
    const double fd = at_h.value, fd2 = at_2h.value;
    const std::vector<float>& got = el.of == GradientOf::kQ   ? r.got.dq
                                    : el.of == GradientOf::kK ? r.got.dk
                                    : el.of == GradientOf::kV ? r.got.dv
                                                              : r.got.dsinks;
    const std::vector<double>& bounds = el.of == GradientOf::kQ   ? r.ref.dq_bound
                                        : el.of == GradientOf::kK ? r.ref.dk_bound
                                        : el.of == GradientOf::kV ? r.ref.dv_bound
                                                                  : r.ref.dsinks_bound;
    // The difference quotient's own error: its change from step 2h to h (Richardson) and the rest.
    const double allowed =
        bounds[el.in_full] + 2 * std::fabs(fd - fd2) + 2 * (at_h.rounding + at_2h.rounding) + 0x1p-40 * std::fabs(fd);
    const double error = std::fabs(double(got[el.in_full]) - fd);
    if (std::isinf(allowed) || std::isnan(allowed)) continue;
    ++compared;
    if (!(error <= allowed))
      return Verdict::fail(
          name,
          fmt::format("dO on row b={} h={} row={} only: {} = {:.9g}, central differences of the "
                      "exact forward give {:.9g} (difference {:.3g} > {:.3g})",
                      b, h, i, describe_gradient(p, el.which, el.in_full), got[el.in_full], fd, error, allowed),
          allowed > 0 ? error / allowed : INFINITY);
    if (allowed > 0) worst = std::max(worst, error / allowed);
  }
  if (compared == 0)
    return Verdict::vacuous(name, "no sampled element could be differentiated (poisoned or unbounded)");
  return Verdict::pass(name, worst);
}

Verdict gradient_overflow_safe(const Problem& p, const Kernel& kernel, Oracle& oracle) {
  const std::string name = "gradient_overflow_safe";
  // Logits brought up to 1e2, 1e3 and 1e4 (P = exp(s - LSE) stays exact to a few ulps there), and
  // values scaled to 1e15: finite gradients within their bounds wherever the exact ones fit in float.
  const double dot = max_abs_dot(p);
  std::vector<std::pair<Problem, std::string>> variants;
  if (dot > 0)
    for (double target : {1e2, 1e3, 1e4})
      variants.emplace_back(with_logits_up_to(p, target, dot, kernel.capabilities()),
                            fmt::format("logits up to {:g}", target));
  // Saturating, for a kernel promised finite inputs: a masked key's 1e30 poison times 1e15 is inf.
  Problem large_values = p;
  const bool finite_only = kernel.capabilities().inputs != InputDomain::kMaskedMayBeNonFinite;
  const float largest_v = static_cast<float>(largest_input(p.storage.v, kernel.capabilities().precision.v_entry));
  for (float& v : large_values.v) {
    const float scaled = v * 1e15f;
    v = round_to(finite_only && std::isfinite(v) ? std::clamp(scaled, -largest_v, largest_v) : scaled, p.storage.v);
  }
  large_values.fit_to_storage();  // a quantized V: its rows refitted to the scaled values
  variants.emplace_back(large_values, "values times 1e15");
  bool exercised = false;
  double worst = 0;
  for (const auto& [variant, label] : variants) {
    if (!kernel.capabilities().supports(variant)) continue;
    // The variant's own dO: its witness replays under gradient_matches_reference.
    const GradientRun r = run_gradient(variant, kernel, oracle, output_gradient_for(variant));
    if (!r.ref.within_float_range || !any_row_sees(r.ref)) continue;
    const Verdict v = compare_gradients(variant, r.ref, r.got, name, label);
    exercised = exercised || v.exercised;
    if (!v.passed) {
      Verdict failed = v;
      failed.witness = std::make_shared<Problem>(variant);
      failed.witness_property = "gradient_matches_reference";
      return failed;
    }
    worst = std::max(worst, v.utilisation);
  }
  if (!exercised) return Verdict::vacuous(name, "no scaled variant stays within float range");
  return Verdict::pass(name, worst);
}

}  // namespace attest
