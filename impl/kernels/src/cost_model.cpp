#include "attest/cost_model.h"

#include <algorithm>
#include <cmath>

namespace attest {
namespace {

// The largest calls at or below a size predict it; more of them smooth one noisy timing.
constexpr std::size_t kPredictors = 3;
// Samples kept: a run makes thousands of calls, and only the distinct sizes matter.
constexpr std::size_t kMaxSamples = 256;

}  // namespace

double forward_work(const Problem& p) {
  const Shape& s = p.shape;
  return double(s.batch) * s.heads * s.q_len * s.k_len * (double(s.head_dim) + s.value_dim);
}

double decode_step_work(const DecodeConfig& c, long long cached, int n) {
  return double(c.batch) * c.heads * n * double(cached + n) * (double(c.head_dim) + c.value_dim);
}

void CostModel::record(double work, double seconds) {
  if (!(work > 0) || !std::isfinite(seconds) || seconds < 0) return;
  ++calls_;
  auto at = std::lower_bound(samples_.begin(), samples_.end(), std::make_pair(work, 0.0));
  if (at != samples_.end() && at->first == work) {
    at->second = std::max(at->second, seconds);  // the same size again: keep the slower timing
    return;
  }
  samples_.insert(at, {work, seconds});
  // Too many sizes: thin out the small end, whose calls are mostly fixed overhead.
  if (samples_.size() > kMaxSamples) samples_.erase(samples_.begin() + 1);
}

std::optional<double> CostModel::predict(double work) const {
  // From below: the largest measurable calls no bigger than this one, scaled up by work.
  std::optional<double> from_below;
  auto above = std::upper_bound(samples_.begin(), samples_.end(), std::make_pair(work, double(INFINITY)));
  std::size_t used = 0;
  for (auto it = above; it != samples_.begin() && used < kPredictors;) {
    --it;
    if (it->second < measurable_) continue;
    from_below = std::max(from_below.value_or(0), it->second * (work / it->first));
    ++used;
  }
  // From above: a call no bigger than one already answered costs no more than it did (a call
  // under the measurable time counts as taking that long).
  std::optional<double> from_above;
  for (auto it = std::lower_bound(samples_.begin(), samples_.end(), std::make_pair(work, 0.0)); it != samples_.end(); ++it)
    from_above = std::min(from_above.value_or(INFINITY), std::max(it->second, measurable_));
  if (from_below && from_above) return std::min(*from_below, *from_above);
  return from_below ? from_below : from_above;
}

}  // namespace attest
