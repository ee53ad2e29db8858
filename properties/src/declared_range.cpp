#include "declared_range.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "problem_edits.h"

namespace attest {
namespace {

constexpr double kHeadroom = 4;  // a bias, ALiBi or a sum order may add to the largest term

double largest(Scalar s) {
  return s == Scalar::kF32 ? std::numeric_limits<double>::infinity() : info(s).max_finite / kHeadroom;
}

double max_abs(const std::vector<float>& values) {
  double m = 0;
  for (float x : values)
    if (std::isfinite(x)) m = std::max(m, static_cast<double>(std::fabs(x)));
  return m;
}

double max_row_l1(const std::vector<float>& values, int width) {
  double m = 0;
  for (std::size_t row = 0; row + width <= values.size(); row += width) {
    double sum = 0;
    for (int c = 0; c < width; ++c) sum += std::isfinite(values[row + c]) ? std::fabs(values[row + c]) : 0.0;
    m = std::max(m, sum);
  }
  return m;
}

// Halves every value until `fits` holds (at most 300 times: then zero), rounded to storage.
template <typename Fits>
void shrink(std::vector<float>& values, Scalar storage, Fits fits) {
  for (int tries = 0; !fits() && tries < 300; ++tries)
    for (float& x : values)
      if (std::isfinite(x)) x = round_to(x * 0.5f, storage);
}

}  // namespace

DeclaredRange declared_range(const Capabilities& caps, int k_len) {
  const Precision loose = caps.loosest_precision();
  const double terms = loose.pv_unnormalised ? std::max(1, k_len) : 1;
  // O's storage too: |O| <= max |V| of the visible keys, and an exact O past its format is no test.
  return {largest(loose.scores), std::min(largest(loose.accumulator) / terms, largest(loose.o))};
}

void fit_to_declared_range(Problem& p, const Capabilities& caps) {
  const DeclaredRange range = declared_range(caps, p.shape.k_len);
  // RoPE mixes each pair of K's components: up to twice |k| per term of the bound.
  const double scale = std::max(1.0, std::fabs(p.effective_scale())) * (p.rope.enabled ? 2 : 1);
  if (std::isfinite(range.logit))
    shrink(p.q, p.storage.q, [&] { return max_row_l1(p.q, p.shape.head_dim) * max_abs(p.k) * scale <= range.logit; });
  if (std::isfinite(range.value)) shrink(p.v, p.storage.v, [&] { return max_abs(p.v) <= range.value; });
}

bool logits_within_declared_range(const Problem& p, const Capabilities& caps) {
  const double logit = declared_range(caps, p.shape.k_len).logit;
  return !std::isfinite(logit) || max_abs_product_sum(p) * std::max(1.0, std::fabs(p.effective_scale())) <= logit;
}

}  // namespace attest
