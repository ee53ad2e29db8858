#include "declared_range.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "attest/kernels/contract.h"
#include "problem_edits.h"

namespace attest {
namespace {

// A bias, ALiBi or a sum order may add to the largest logit; a normalised P.V sum stays within a few
// roundings of its largest |V| (the generator's own draws reach sqrt(3)/2 of a format's largest
// value, inside this, so the range clips only what overflows).
constexpr double kLogitHeadroom = 4, kValueHeadroom = 1.125;

double largest(Scalar s, double headroom) {
  return s == Scalar::kF32 ? std::numeric_limits<double>::infinity() : info(s).max_finite / headroom;
}

// One path's range (by range, not by rounding: bf16 rounds coarser than f16 but holds far more).
DeclaredRange range_of(const Precision& p, int k_len) {
  const double terms = p.pv_unnormalised ? std::max(1, k_len) : 1;
  // O's storage too: |O| <= max |V| of the visible keys, and an exact O past its format is no test.
  return {largest(p.scores, kLogitHeadroom),
          std::min(largest(p.accumulator, kValueHeadroom) / terms, largest(p.o, kValueHeadroom))};
}

// The largest finite |x| of the K or V rows ([B][Hkv][Tk][width]) of the keys `counted` marks.
double max_abs(const std::vector<float>& values, const Shape& s, int width, const KeySet& counted) {
  double m = 0;
  for (int b = 0; b < s.batch; ++b)
    for (int g = 0; g < s.kv_heads; ++g)
      for (int j = 0; j < s.k_len; ++j) {
        if (!counted[b][j]) continue;
        const float* row = &values[((std::size_t(b) * s.kv_heads + g) * s.k_len + j) * width];
        for (int c = 0; c < width; ++c)
          if (std::isfinite(row[c])) m = std::max(m, static_cast<double>(std::fabs(row[c])));
      }
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
  DeclaredRange out = range_of(caps.precision, k_len);
  for (const auto& [path, precision] : caps.path_precision) {
    const DeclaredRange r = range_of(precision, k_len);
    out = {std::min(out.logit, r.logit), std::min(out.value, r.value)};
  }
  return out;
}

void fit_to_declared_range(Problem& p, const Capabilities& caps) {
  const DeclaredRange range = declared_range(caps, p.shape.k_len);
  if (!std::isfinite(range.logit) && !std::isfinite(range.value)) return;
  const Shape& s = p.shape;
  // What the declared arithmetic holds: the K and V of keys some query sees, and the K of every key
  // for a kernel that scores masked keys (inputs masked_scored; its poison is made to fit). A masked
  // key's finite poison (inputs finite: +-1e30) is the input domain's to send, never weighted:
  // counted here, it would halve every visible value to nothing.
  const KeySet seen = keys_seen(p), scored = scored_keys(p, caps);
  // RoPE mixes each pair of K's components: up to twice |k| per term of the bound.
  const double scale = std::max(1.0, std::fabs(p.effective_scale())) * (p.rope.enabled ? 2 : 1);
  if (std::isfinite(range.logit)) {
    const double k = max_abs(p.k, s, s.head_dim, scored);
    shrink(p.q, p.storage.q, [&] { return max_row_l1(p.q, s.head_dim) * k * scale <= range.logit; });
  }
  if (std::isfinite(range.value))
    shrink(p.v, p.storage.v, [&] { return max_abs(p.v, s, s.value_dim, seen) <= range.value; });
}

KeySet scored_keys(const Problem& p, const Capabilities& caps) {
  if (caps.inputs == InputDomain::kMaskedScored) return KeySet(p.shape.batch, std::vector<char>(p.shape.k_len, 1));
  return keys_seen(p);
}

bool logits_within_declared_range(const Problem& p, const Capabilities& caps) {
  const double logit = declared_range(caps, p.shape.k_len).logit;
  if (!std::isfinite(logit)) return true;
  const KeySet scored = scored_keys(p, caps);
  return max_abs_product_sum(p, &scored) * std::max(1.0, std::fabs(p.effective_scale())) <= logit;
}

}  // namespace attest
