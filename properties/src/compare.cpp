#include "attest/properties/compare.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "attest/model/quantized.h"
#include "attest/properties/harness.h"

namespace attest {

KernelNumerics numerics_of(const Capabilities& caps, const Problem& problem) {
  return numerics_of(caps, caps.loosest_precision(), problem);
}

KernelNumerics numerics_of(const Capabilities& caps, const std::string& path, const Problem& problem) {
  return numerics_of(caps, caps.precision_for(path), problem);
}

namespace {

// The largest L1 norm of a row of width d in `values` (a query's or a key's components). A row
// holding NaN or inf is poison of a masked key or a padded query, which no visible score reads:
// counted, it made the bound NaN.
double largest_l1(const std::vector<float>& values, int d) {
  double worst = 0;
  for (std::size_t r = 0; r + d <= values.size(); r += d) {
    double sum = 0;
    for (int i = 0; i < d; ++i) sum += std::fabs(double(values[r + i]));
    if (std::isfinite(sum)) worst = std::max(worst, sum);
  }
  return worst;
}

// The largest finite magnitude in `values` (poison of padded queries left out, as above).
double largest_finite(const std::vector<float>& values) {
  double worst = 0;
  for (float x : values)
    if (std::isfinite(x)) worst = std::max(worst, double(std::fabs(x)));
  return worst;
}

// Flushed subnormals (ABI 2.9) charged as absolute errors with float's normal-range quantum: a value
// below 2^-126 in magnitude, in any format (bf16's normal range ends there too; f16 and fp8 hold
// nothing so small), may become zero. Q and K read as zero move each logit as entry rounding's flush
// does; each product, partial sum and modifier of a logit may flush (2d + 8 of them, the bias's
// value among them); V moves O by at most 2^-126; the sums, weights, products and O's flush at
// 2^-126 (the quanta the underflow term counts: O's and P's doubled, the bound charges half of them).
void charge_flush(KernelNumerics& k, const Precision& p, const Problem& problem) {
  constexpr double flush = 0x1p-126;
  const int d = problem.shape.head_dim;
  const double scale = std::fabs(problem.effective_scale());
  k.entry_score_absolute += 2 * scale * flush * (largest_l1(problem.k, d) + largest_l1(problem.q, d) + d * flush) +
                            (2.0 * d + 8) * std::max(scale, 1.0) * flush;
  k.entry_value_absolute += flush;
  k.underflow_quantum = std::max(k.underflow_quantum, flush);
  k.output_quantum = std::max(k.output_quantum, 2 * flush);
  if (p.p != Scalar::kF32) k.weight_quantum = std::max(k.weight_quantum, 2 * flush);
}

}  // namespace

KernelNumerics numerics_of(const Capabilities& caps, const Precision& p, const Problem& problem) {
  KernelNumerics k;
  k.score_roundoff = unit_roundoff(p.scores);
  k.sum_roundoff = unit_roundoff(p.accumulator);
  k.weight_sum_roundoff = unit_roundoff(p.sum_precision());
  // Rounding on entry costs relative error only where it is coarser than the storage; a finer
  // format with a narrower range flushes (below), and its overflow the problem builders avoid.
  auto entry = [](Scalar rounded, Scalar stored) {
    return unit_roundoff(rounded) > unit_roundoff(stored) ? unit_roundoff(rounded) : 0.0;
  };
  const double uq = entry(p.q_entry, p.q), uk = entry(p.k_entry, p.k);
  k.entry_score = uq + uk + uq * uk;
  k.entry_value = entry(p.v_entry, p.v);
  // Below the entry format's normal range a rounding errs by up to half its smallest spacing,
  // whatever the value (charged a whole spacing: a tie rounded to zero would use the bound to its
  // last bit): each logit by |scale| (dq |k|_1 + dk |q|_1 + d dq dk), doubled for RoPE's rotations
  // and the products of the relative and absolute parts. That holds for a finer entry format too
  // when its normal range ends higher than the storage's: f16 behind bf16 keeps every bf16 digit
  // but flushes what lies below 2^-14 (a V of 1e-30 enters as 0).
  auto flush = [](Scalar rounded, Scalar stored) {
    return flushes_on_entry(rounded, stored) ? info(rounded).min_subnormal : 0.0;
  };
  const double dq = flush(p.q_entry, p.q), dk = flush(p.k_entry, p.k);
  if (dq > 0 || dk > 0) {
    const int d = problem.shape.head_dim;
    k.entry_score_absolute = 2 * std::fabs(problem.effective_scale()) *
                             (dq * largest_l1(problem.k, d) + dk * largest_l1(problem.q, d) + d * dq * dk);
  }
  // Q quantized on entry (q8 per 32) errs by up to a step of its group, whatever the value: each
  // logit by |scale| |dq| |k|_1 with dq that step for the problem's largest |q| (doubled as above,
  // and K's own entry rounding on top).
  if (scaled(p.q_entry))
    k.entry_score_absolute += 2 * std::fabs(problem.effective_scale()) * (1 + uk) *
                              entry_quantization_error(largest_finite(problem.q)) *
                              largest_l1(problem.k, problem.shape.head_dim);
  k.entry_value_absolute = flush(p.v_entry, p.v);
  k.output_roundoff = unit_roundoff(p.o);
  k.exp_error = 2 * k.score_roundoff * p.exp_ulps;  // one ulp is 2u
  k.underflow_quantum = info(p.accumulator).min_subnormal;
  k.output_quantum = info(p.o).min_subnormal;
  k.weight_quantum = p.p == Scalar::kF32 ? 0.0 : info(p.p).min_subnormal;
  k.weight_rounding = unit_roundoff(p.p) > k.sum_roundoff ? unit_roundoff(p.p) : 0.0;
  k.key_tile = caps.key_tile_for(problem);  // the declared path's own tile, if it has one
  if (p.flush_subnormals || caps.precision.flush_subnormals) charge_flush(k, p, problem);
  return k;
}

std::string describe_row(const Problem& p, std::size_t row) {
  const Shape& s = p.shape;
  const std::size_t i = row % s.q_len, h = (row / s.q_len) % s.heads, b = row / (std::size_t(s.q_len) * s.heads);
  return fmt::format("b={} h={} row={}", b, h, i);
}

std::string describe_element(const Problem& p, std::size_t element) {
  return fmt::format("{} col={}", describe_row(p, element / p.shape.value_dim), element % p.shape.value_dim);
}

namespace {

// |got - expected|, with equal infinities equal: two runs that both give -inf (an LSE) or both
// overflow to the same inf agree, where inf - inf would read as a NaN error.
double difference(double got, double expected) { return got == expected ? 0.0 : std::fabs(got - expected); }

// Tracks the worst utilisation and the first failure. `where` describes the element; it is
// called only for a failure (formatting every passing element cost more than the comparison).
// A value in a message: NaN and infinities spelled out (never "-nan"), an untouched output named.
std::string value_text(double x) {
  if (std::isnan(x)) return never_written(static_cast<float>(x)) ? "NaN (never written)" : "NaN";
  if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
  return fmt::format("{:.9g}", x);
}

class Worst {
 public:
  template <typename Where>
  void add(double error, double bound, const Where& where, double expected, double got) {
    const double util = bound > 0 ? error / bound : (error == 0 ? 0.0 : std::numeric_limits<double>::infinity());
    if (!(util <= 1.0) && failure_.empty()) {
      if (std::isnan(expected) && std::isnan(got))
        failure_ = fmt::format("{}: NaN in both runs (a finite value was due)", where());
      else if (std::isnan(expected))
        failure_ = fmt::format("{}: the other run gave NaN, this one {}", where(), value_text(got));
      else
        failure_ = fmt::format("{}: expected {}, got {}, |error| {:.3g} > bound {:.3g}", where(), value_text(expected),
                               value_text(got), error, bound);
    }
    if (util > utilisation_ || std::isnan(util)) utilisation_ = std::isnan(util) ? INFINITY : util;
  }
  void fail(std::string why) {
    if (failure_.empty()) failure_ = std::move(why);
  }
  double utilisation() const { return utilisation_; }
  const std::string& failure() const { return failure_; }

 private:
  double utilisation_ = 0.0;
  std::string failure_;
};

// Every element within factor x its bound of `expected` (the reference's values, or another
// run's), LSE too when declared; empty rows exactly per the policy.
template <typename Expected>
Comparison compare_impl(const Problem& p, const Reference& ref, const Expected& expected_o,
                        const Expected& expected_lse, const Outputs& got, const Capabilities& caps,
                        const std::string& property, const std::string& label, double factor, int extra_key_tiles,
                        KernelNumerics numerics) {
  numerics.extra_tiles = extra_key_tiles;  // the other run may have had more tiles
  const int dv = p.shape.value_dim;
  const bool nan_policy = caps.empty_rows == EmptyRowPolicy::kNan;
  const bool sinks = !p.modifiers.sinks.empty();  // rows without keys are defined then: O = 0, LSE = sigma
  const std::string prefix = label.empty() ? "" : label + " ";
  Comparison result;
  Worst worst;
  // A bound that is infinite, or reaches the size of the values it bounds, proves nothing: such an
  // element is not compared, and a case with no other element is not evidence (gate 2 decides).
  long checked = 0, vacuous = 0;
  std::string first_vacuous;
  auto meaningful = [&](double bound, double magnitude, const auto& where) {
    if (std::isfinite(bound) && !(magnitude > 0 && bound >= magnitude)) return ++checked, true;
    if (vacuous++ == 0)
      first_vacuous = fmt::format("{}: bound {:.3g} against values of size {:.3g}", where(), bound, magnitude);
    return false;
  };
  for (std::size_t row = 0; row < ref.lse.size(); ++row) {
    if (!ref.has_row(row)) continue;  // a long problem's reference holds a sample of rows
    for (int c = 0; c < dv; ++c) {
      const std::size_t e = row * dv + c;
      const double value = got.o[e];
      if (ref.empty[row]) {
        if (sinks && value != 0.0)
          worst.fail(fmt::format("{}{}: a row that sees no key but a sink must output 0, got {}", prefix,
                                 describe_element(p, e), value_text(value)));
        else if (!sinks && !(nan_policy ? std::isnan(value) : value == 0.0))
          worst.fail(fmt::format("{}{}: empty row must output {} under the {} policy, got {}", prefix,
                                 describe_element(p, e), nan_policy ? "NaN" : "0", to_string(caps.empty_rows),
                                 value_text(value)));
        continue;
      }
      const double error = difference(value, double(expected_o[e]));
      result.max_abs_error = std::max(result.max_abs_error, std::isnan(error) ? INFINITY : error);
      const double bound = factor * output_bound(p, ref, e, numerics);
      const auto where = [&] { return prefix + describe_element(p, e); };
      if (meaningful(bound, ref.max_abs_value[e], where)) worst.add(error, bound, where, expected_o[e], value);
    }
    if (!caps.lse() || got.lse.empty() || expected_lse.empty()) continue;
    const double value = got.lse[row];
    if (ref.empty[row] && sinks) {  // LSE = the sink's logit, exactly as given
      if (value != static_cast<float>(ref.lse[row]))
        worst.fail(fmt::format("{}{}: a row that sees no key but a sink must have LSE = sigma = {}, got {}", prefix,
                               describe_row(p, row), value_text(ref.lse[row]), value_text(value)));
      continue;
    }
    if (ref.empty[row]) {
      if (!(nan_policy ? std::isnan(value) : (std::isinf(value) && value < 0)))
        worst.fail(fmt::format("{}{}: empty row must have LSE {}, got {}", prefix, describe_row(p, row),
                               nan_policy ? "NaN" : "-inf", value_text(value)));
      continue;
    }
    const double bound = factor * lse_bound(p, ref, row, numerics);
    const auto where = [&] { return prefix + describe_row(p, row) + " (LSE)"; };
    if (meaningful(bound, 0.0, where))
      worst.add(difference(value, double(expected_lse[row])), bound, where, expected_lse[row], value);
  }
  if (!worst.failure().empty())
    result.verdict = Verdict::fail(property, worst.failure(), worst.utilisation());
  else if (vacuous > 0 && checked == 0)
    result.verdict = Verdict::vacuous_bound(
        property, fmt::format("bound vacuous for every element ({}); gate 2 decides", first_vacuous));
  else
    result.verdict = Verdict::pass(property, worst.utilisation());
  result.vacuous_elements = vacuous;
  return result;
}

}  // namespace

Comparison compare_with_reference(const Problem& p, const Reference& ref, const Outputs& out, const Capabilities& caps,
                                  const std::string& property) {
  if (!ref.finite())
    return {Verdict::fail(property,
                          "reference failure: the exact result is NaN for this problem "
                          "(non-finite visible inputs); no comparison is possible"),
            0.0};
  return compare_impl(p, ref, ref.o, ref.lse, out, caps, property, "", 1.0, 0, numerics_of(caps, out.path, p));
}

Verdict compare_runs(const Problem& p, const Reference& ref, const Outputs& expected, const Outputs& got,
                     const Capabilities& caps, const std::string& property, const std::string& label, double factor,
                     int extra_key_tiles) {
  return compare_impl(p, ref, expected.o, expected.lse, got, caps, property, label, factor, extra_key_tiles,
                      numerics_of(caps, p))  // either run may have taken any path
      .verdict;
}

}  // namespace attest
