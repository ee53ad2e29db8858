#include "attest/kernels/cost_model.h"

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

double backward_work(const Problem& p) { return 2.5 * forward_work(p); }

double merge_work(const MergeInputs& in) { return double(in.parts) * in.rows * (double(in.value_dim) + 1); }

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
  // The largest measurable calls no bigger than this one, scaled up by work: never a call above
  // it, whose dense work may hide a cheap masked or padded problem.
  std::optional<double> predicted;
  auto above = std::upper_bound(samples_.begin(), samples_.end(), std::make_pair(work, double(INFINITY)));
  std::size_t used = 0;
  for (auto it = above; it != samples_.begin() && used < kPredictors;) {
    --it;
    if (it->second < measurable_) continue;
    predicted = std::max(predicted.value_or(0), it->second * (work / it->first));
    ++used;
  }
  return predicted;
}

double CostModel::predict_or_floor(double work) const {
  // Unmeasured: the floor itself. Scaling it by work from a call that took less would make the hang
  // limit of a large call hours long (10 x 20 ms x 1e5), and a hang there would wait that long.
  const std::optional<double> measured = work > 0 ? predict(work) : std::nullopt;
  return measured ? std::max(*measured, measurable_) : measurable_;
}

}  // namespace attest
