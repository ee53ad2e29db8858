// Weight properties through black-box probes, so they hold for kernels that never form P.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "attest/properties/compare.h"
#include "attest/properties/harness.h"
#include "attest/properties/properties.h"
#include "problem_edits.h"

namespace attest {

Verdict rows_sum_to_one(const Problem& p, const Kernel& kernel, Oracle& oracle) {
  const std::string name = "rows_sum_to_one";
  // V = 1 in every column of the problem's own width: a kernel whose path depends on Dv keeps it.
  const int dv = p.shape.value_dim;
  const Problem probe = with_values(p, dv, [](int, int) { return 1.0f; });
  const Reference& ref = oracle.reference(probe);
  const GuardedOutputs out = run_guarded(kernel, probe);
  const KernelNumerics numerics = numerics_of(kernel.capabilities(), out.path, probe);
  double worst = 0;
  if (std::find(ref.empty.begin(), ref.empty.end(), 0) == ref.empty.end())
    return Verdict::vacuous(name, "every row is empty");
  for (std::size_t row = 0; row < ref.lse.size(); ++row) {
    if (ref.empty[row]) continue;
    for (int c = 0; c < dv; ++c) {
      const std::size_t e = row * dv + c;
      // The weights sum to 1, or with a sink to 1 - exp(sigma - LSE): the exact probe output.
      const double expected = ref.o[e];
      const double error = std::fabs(double(out.o[e]) - expected), bound = output_bound(probe, ref, e, numerics);
      if (!(error <= bound))
        return Verdict::fail(name,
                             fmt::format("{}: weights sum to {:.9g}, not {:.9g} (bound {:.3g})", describe_row(p, row),
                                         out.o[e], expected, bound),
                             error / bound);
      worst = std::max(worst, error / bound);
    }
  }
  return Verdict::pass(name, worst);
}

Verdict zero_masked_weight(const Problem& p, const Kernel& kernel, Oracle& oracle) {
  const std::string name = "zero_masked_weight";
  const int tk = p.shape.k_len;
  if (tk > 256) return Verdict::not_applicable(name, "probe V = I needs Tk <= 256");
  // V = I: one-hot values, so the output row is the weight row. When the contract does not take
  // Dv = Tk, the identity is sent in blocks of the problem's own width: block k covers keys
  // [k w, k w + w).
  const int width = identity_probe_width(p, kernel.capabilities());
  bool masked_seen = false;
  double worst = 0;
  for (int first = 0; first < tk; first += width) {
    const Problem probe = identity_probe(p, width, first);
    const Reference& ref = oracle.reference(probe, /*weights=*/true);
    const GuardedOutputs out = run_guarded(kernel, probe);
    for (std::size_t row = 0; row < ref.lse.size(); ++row) {
      if (ref.empty[row]) continue;
      for (int c = 0; c < width && first + c < tk; ++c) {
        const int j = first + c;
        if (ref.visible[row * tk + j]) continue;
        masked_seen = true;
        const float weight = out.o[row * width + c];
        if (weight != 0.0f)
          return Verdict::fail(
              name,
              fmt::format("{}: masked key {} gets weight {:.9g} (must be exactly 0)", describe_row(p, row), j, weight),
              INFINITY);
      }
    }
    // The visible weights themselves, under the hard bound (the probe's output row is P).
    const Verdict v = compare_with_reference(probe, ref, out, kernel.capabilities(), name).verdict;
    if (!v.passed) return v;
    worst = std::max(worst, v.utilisation);
  }
  if (!masked_seen) return Verdict::vacuous(name, "no key is masked in a row that sees any");
  return Verdict::pass(name, worst);
}

Verdict output_in_convex_hull(const Problem& p, const Kernel& kernel, Oracle& oracle) {
  const std::string name = "output_in_convex_hull";
  const Reference& ref = oracle.reference(p, /*weights=*/true);
  if (!ref.finite()) return Verdict::fail(name, "reference failure: NaN in the exact result");
  const GuardedOutputs out = run_guarded(kernel, p);
  const KernelNumerics numerics = numerics_of(kernel.capabilities(), out.path, p);
  const Shape& s = p.shape;
  double worst = 0;
  if (std::find(ref.empty.begin(), ref.empty.end(), 0) == ref.empty.end())
    return Verdict::vacuous(name, "every row is empty");
  for (std::size_t row = 0; row < ref.lse.size(); ++row) {
    if (ref.empty[row]) continue;
    const int b = static_cast<int>(row / (std::size_t(s.heads) * s.q_len));
    const int h = static_cast<int>((row / s.q_len) % s.heads);
    const float* values = &p.v[(std::size_t(b) * s.kv_heads + p.kv_head_of(h)) * s.k_len * s.value_dim];
    for (int c = 0; c < s.value_dim; ++c) {
      // A sink is a key of value 0 in the denominator: the hull then includes 0.
      double lo = p.modifiers.sinks.empty() ? INFINITY : 0.0, hi = p.modifiers.sinks.empty() ? -INFINITY : 0.0;
      for (int j = 0; j < s.k_len; ++j)
        if (ref.visible[row * s.k_len + j]) {
          lo = std::min<double>(lo, values[std::size_t(j) * s.value_dim + c]);
          hi = std::max<double>(hi, values[std::size_t(j) * s.value_dim + c]);
        }
      const std::size_t e = row * s.value_dim + c;
      const double got = out.o[e], slack = output_bound(p, ref, e, numerics);
      const double outside = std::max(lo - got, got - hi);
      if (std::isnan(got))  // not "-nan outside [...]": say what it is
        return Verdict::fail(
            name,
            fmt::format("{}: output {} where the visible values span [{:.9g}, {:.9g}]", describe_element(p, e),
                        never_written(out.o[e]) ? "never written" : "NaN computed", lo, hi),
            INFINITY);
      if (!(outside <= slack))
        return Verdict::fail(name,
                             fmt::format("{}: output {:.9g} outside the visible values [{:.9g}, {:.9g}]",
                                         describe_element(p, e), got, lo, hi),
                             slack > 0 ? outside / slack : INFINITY);
      if (outside > 0) worst = std::max(worst, outside / slack);
    }
  }
  return Verdict::pass(name, worst);
}

}  // namespace attest
