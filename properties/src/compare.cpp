#include "attest/compare.h"

#include <cmath>
#include <fmt/format.h>
#include <limits>

namespace attest {

KernelNumerics numerics_of(const Capabilities& caps) {
  KernelNumerics k;
  k.unit_roundoff = unit_roundoff(caps.precision);
  k.exp_error = 2 * k.unit_roundoff * caps.exp_ulps;  // one ulp is 2u
  k.underflow_quantum = caps.precision == ComputePrecision::kF16 ? std::ldexp(1.0, -24)
                        : caps.precision == ComputePrecision::kBF16 ? std::ldexp(1.0, -133)
                                                                    : std::ldexp(1.0, -149);
  k.key_tile = caps.key_tile;
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

// Tracks the worst utilisation and the first failure.
class Worst {
 public:
  void add(double error, double bound, const std::string& where, double expected, double got) {
    const double util = bound > 0 ? error / bound : (error == 0 ? 0.0 : std::numeric_limits<double>::infinity());
    if (!(util <= 1.0) && failure_.empty())
      failure_ = fmt::format("{}: expected {:.9g}, got {:.9g}, |error| {:.3g} > bound {:.3g}", where, expected,
                             got, error, bound);
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

}  // namespace

Comparison compare_with_reference(const Problem& p, const Reference& ref, const Outputs& out,
                                  const Capabilities& caps, const std::string& property) {
  Comparison result;
  if (!ref.finite())
    return {Verdict::fail(property, "reference failure: the exact result is NaN for this problem "
                                    "(non-finite visible inputs); no comparison is possible"), 0.0};
  const KernelNumerics numerics = numerics_of(caps);
  const int dv = p.shape.value_dim;
  const bool nan_policy = caps.empty_rows == EmptyRowPolicy::kNan;
  Worst worst;
  for (std::size_t row = 0; row < ref.lse.size(); ++row) {
    for (int c = 0; c < dv; ++c) {
      const std::size_t e = row * dv + c;
      const double got = out.o[e];
      if (ref.empty[row]) {
        const bool ok = nan_policy ? std::isnan(got) : got == 0.0;
        if (!ok)
          worst.fail(fmt::format("{}: empty row must output {} under the {} policy, got {:.9g}",
                                 describe_element(p, e), nan_policy ? "NaN" : "0", to_string(caps.empty_rows), got));
        continue;
      }
      const double error = std::fabs(got - ref.o[e]);
      result.max_abs_error = std::max(result.max_abs_error, std::isnan(error) ? INFINITY : error);
      worst.add(error, output_bound(p, ref, e, numerics), describe_element(p, e), ref.o[e], got);
    }
    if (!caps.lse || out.lse.empty()) continue;
    const double got = out.lse[row];
    if (ref.empty[row]) {
      const bool ok = nan_policy ? std::isnan(got) : (std::isinf(got) && got < 0);
      if (!ok) worst.fail(fmt::format("{}: empty row must have LSE {}, got {:.9g}", describe_row(p, row),
                                      nan_policy ? "NaN" : "-inf", got));
      continue;
    }
    worst.add(std::fabs(got - ref.lse[row]), lse_bound(p, ref, row, numerics), describe_row(p, row) + " (LSE)",
              ref.lse[row], got);
  }
  result.verdict = worst.failure().empty() ? Verdict::pass(property, worst.utilisation())
                                           : Verdict::fail(property, worst.failure(), worst.utilisation());
  return result;
}

Verdict compare_runs(const Problem& p, const Reference& ref, const Outputs& expected, const Outputs& got,
                     const Capabilities& caps, const std::string& property, const std::string& label, double factor,
                     int extra_key_tiles) {
  KernelNumerics numerics = numerics_of(caps);
  numerics.extra_tiles = extra_key_tiles;  // the other run may have had more tiles
  const int dv = p.shape.value_dim;
  const bool nan_policy = caps.empty_rows == EmptyRowPolicy::kNan;
  Worst worst;
  for (std::size_t row = 0; row < ref.lse.size(); ++row) {
    for (int c = 0; c < dv; ++c) {
      const std::size_t e = row * dv + c;
      if (ref.empty[row]) {
        if (!(nan_policy ? std::isnan(got.o[e]) : got.o[e] == 0.0))
          worst.fail(fmt::format("{} {}: empty row gives {:.9g}", label, describe_element(p, e), got.o[e]));
        continue;
      }
      worst.add(std::fabs(double(got.o[e]) - expected.o[e]), factor * output_bound(p, ref, e, numerics),
                label + " " + describe_element(p, e), expected.o[e], got.o[e]);
    }
    if (ref.empty[row] || !caps.lse || got.lse.empty() || expected.lse.empty()) continue;
    worst.add(std::fabs(double(got.lse[row]) - expected.lse[row]), factor * lse_bound(p, ref, row, numerics),
              label + " " + describe_row(p, row) + " (LSE)", expected.lse[row], got.lse[row]);
  }
  return worst.failure().empty() ? Verdict::pass(property, worst.utilisation())
                                 : Verdict::fail(property, worst.failure(), worst.utilisation());
}

}  // namespace attest
