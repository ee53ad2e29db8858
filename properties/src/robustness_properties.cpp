// Overflow safety, determinism and memory discipline.
#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "attest/properties/compare.h"
#include "attest/properties/harness.h"
#include "attest/properties/properties.h"
#include "problem_edits.h"

namespace attest {
namespace {

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
  return max_abs_product_sum(p) * scale < limit;
}

Verdict overflow_safe(const Problem& p, const Kernel& kernel, Oracle& oracle) {
  const std::string name = "overflow_safe";
  const double dot = max_abs_dot(p);
  if (!(dot > 0) || !std::isfinite(dot)) return Verdict::vacuous(name, "all scores are zero: nothing to scale");
  double worst = 0;
  bool exercised = false;
  // Largest logit magnitude, both signs: a negative scale makes rows whose logits are all negative.
  for (double wanted : {1e2, -1e4, 1e8, -1e16, 1e37}) {
    double target = wanted;
    const std::optional<Problem> held = with_logits_in_float_range(p, wanted, dot, kernel.capabilities(), &target);
    if (!held) continue;  // no float kernel holds this problem's products: not the kernel's business
    const Problem& scaled = *held;
    const Reference& ref = oracle.reference(scaled);
    const GuardedOutputs out = run_guarded(kernel, scaled);
    // An inf is a failure wherever O's storage holds the exact value (an f16 O may overflow
    // honestly; an unnormalised P.V sum overflowing, declared or not, may not).
    const double o_max = info(kernel.capabilities().precision.o).max_finite;
    for (std::size_t row = 0; row < ref.lse.size(); ++row) {
      if (ref.empty[row]) continue;
      for (int c = 0; c < p.shape.value_dim; ++c) {
        const std::size_t e = row * p.shape.value_dim + c;
        if (std::fabs(ref.o[e]) <= o_max && !std::isfinite(out.o[e]))
          return with_witness(
              Verdict::fail(name,
                            fmt::format("logits up to {:.0e}: {}: output {} where the exact value is {:.9g}", target,
                                        describe_element(p, e), out.o[e], ref.o[e]),
                            INFINITY),
              scaled);
      }
      if (!out.lse.empty() && std::isfinite(ref.lse[row]) && !std::isfinite(out.lse[row]))
        return with_witness(Verdict::fail(name,
                                          fmt::format("logits up to {:.0e}: {}: LSE {} where the exact value is {:.9g}",
                                                      target, describe_row(p, row), out.lse[row], ref.lse[row]),
                                          INFINITY),
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
    exercised = true;
  }
  if (!exercised) return Verdict::vacuous(name, "no scaled problem keeps a float q.k finite");
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
    return Verdict::fail(
        name,
        never_written(first.o[e])
            ? fmt::format("{}: output never written (it still holds the NaN it was handed)", describe_element(p, e))
            : fmt::format("{}: the kernel computed NaN where the exact value is {:.9g}", describe_element(p, e),
                          ref.o[e]),
        INFINITY);
  }
  auto bits_equal = [](const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
  };
  if (!bits_equal(first.o, second.o) || !bits_equal(first.lse, second.lse))
    return Verdict::fail(name, "two runs on the same inputs differ bitwise", INFINITY);
  return Verdict::pass(name);
}

}  // namespace attest
