#include "gradient_checks.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

#include "attest/properties/harness.h"
#include "problem_edits.h"

namespace attest {

std::vector<float> output_gradient_for(const Problem& p) {
  std::mt19937_64 rng(seed_of(p, 0x6772616400ULL));
  std::uniform_int_distribution<int> step(-64, 64);
  std::vector<float> d_o(p.o_size());
  for (float& x : d_o) x = static_cast<float>(step(rng)) / 64.0f;
  return d_o;
}

const std::vector<int> kThreadCounts = {0, 1, 2, 3, 4, 8, 16};

int drawn_threads(const Problem& p) { return kThreadCounts[seed_of(p, 0x7468726561647300ULL) % kThreadCounts.size()]; }

GradientNumerics gradient_numerics(const Capabilities& caps) {
  GradientNumerics n;
  n.exp_error = std::max(2.0, caps.precision.exp_ulps) * n.roundoff;
  return n;
}

GradientRun run_gradient(const Problem& p, const Kernel& kernel, Oracle& oracle, std::vector<float> d_o) {
  const Capabilities caps = kernel.capabilities();
  GradientRun r;
  r.in = backward_inputs(p, oracle, std::move(d_o), caps.empty_rows);
  r.ref = compute_gradient(p, r.in, gradient_numerics(caps));
  BackwardInputs inputs = spans_of(r.in);
  inputs.threads = drawn_threads(p);
  r.got = run_backward_guarded(kernel, p, inputs);
  return r;
}

bool any_row_sees(const ReferenceGradient& ref) {
  return std::find(ref.empty.begin(), ref.empty.end(), 0) != ref.empty.end();
}

Verdict backward_matches_reference(const Problem& p, const Kernel& kernel, Oracle& oracle,
                                   const std::string& property) {
  const GradientRun r = run_gradient(p, kernel, oracle, output_gradient_for(p));
  if (!r.ref.within_float_range) return Verdict::vacuous(property, kBeyondFloat);
  if (!any_row_sees(r.ref)) return Verdict::vacuous(property, "every row is empty");
  const int threads = drawn_threads(p);
  return compare_gradients(p, r.ref, r.got, property, threads ? fmt::format("threads = {}", threads) : "");
}

GradientInputs backward_inputs(const Problem& p, Oracle& oracle, std::vector<float> d_o, EmptyRowPolicy policy) {
  const Reference& ref = oracle.reference(p);
  GradientInputs in;
  in.o.resize(ref.o.size());
  in.lse.resize(ref.lse.size());
  const int dv = p.shape.value_dim;
  const bool sinks = !p.modifiers.sinks.empty();
  for (std::size_t row = 0; row < ref.lse.size(); ++row) {
    in.lse[row] = static_cast<float>(ref.lse[row]);
    for (int c = 0; c < dv; ++c) {
      const std::size_t e = row * dv + c;
      in.o[e] = ref.empty[row] && !sinks && policy == EmptyRowPolicy::kNan ? std::numeric_limits<float>::quiet_NaN()
                                                                           : static_cast<float>(ref.o[e]);
    }
  }
  in.d_o = std::move(d_o);
  return in;
}

BackwardInputs spans_of(const GradientInputs& in) { return {in.o, in.lse, in.d_o}; }

std::string describe_gradient(const Problem& p, const std::string& which, std::size_t e,
                              const std::vector<int>& query_rows) {
  const Shape& s = p.shape;
  if (which == "dsinks") return fmt::format("dsinks[h={}]", e);
  const bool query = which == "dQ";
  const int width = which == "dV" ? s.value_dim : s.head_dim, rows = query ? s.q_len : s.k_len;
  const int heads = query ? s.heads : s.kv_heads;
  const std::size_t col = e % width, row = e / width;
  const std::size_t index = query && !query_rows.empty() ? std::size_t(query_rows[row % rows]) : row % rows;
  return fmt::format("{}[b={} {}={} {}={} col={}]", which, row / rows / heads, query ? "h" : "g", row / rows % heads,
                     query ? "row" : "key", index, col);
}

Verdict compare_gradients(const Problem& p, const ReferenceGradient& ref, const Gradients& got,
                          const std::string& property, const std::string& label, const std::vector<int>& query_rows) {
  const std::string where = label.empty() ? "" : label + ": ";
  double worst = 0;
  long compared = 0;
  const struct {
    const char* name;
    const std::vector<float>& got;
    const std::vector<double>& exact;
    const std::vector<double>& bound;
  } parts[] = {{"dQ", got.dq, ref.dq, ref.dq_bound},
               {"dK", got.dk, ref.dk, ref.dk_bound},
               {"dV", got.dv, ref.dv, ref.dv_bound},
               {"dsinks", got.dsinks, ref.dsinks, ref.dsinks_bound}};
  for (const auto& part : parts) {
    if (part.got.size() != part.exact.size())
      return Verdict::fail(
          property,
          fmt::format("{}{} has {} elements, expected {}", where, part.name, part.got.size(), part.exact.size()),
          INFINITY);
    for (std::size_t e = 0; e < part.got.size(); ++e) {
      const double x = part.got[e], error = std::fabs(x - part.exact[e]), bound = part.bound[e];
      if (std::isinf(bound)) continue;  // float cannot hold the computation (logits of 1e9): nothing to judge
      ++compared;
      if (error <= bound) {
        if (bound > 0) worst = std::max(worst, error / bound);
        continue;
      }
      const std::string what =
          std::isnan(x) ? (never_written(part.got[e]) ? "never written" : "NaN computed") : fmt::format("{:.9g}", x);
      return Verdict::fail(
          property,
          fmt::format("{}{}: {}, exact {:.9g}, error {:.3g} > bound {:.3g}", where,
                      describe_gradient(p, part.name, e, query_rows), what, part.exact[e], error, bound),
          bound > 0 ? error / bound : INFINITY);
    }
  }
  if (compared == 0) return Verdict::vacuous_bound(property, where + "every element's bound is infinite");
  return Verdict::pass(property, worst);
}

}  // namespace attest
