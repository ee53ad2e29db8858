#include "long_stage_plan.h"

#include <fmt/format.h>

#include <algorithm>

#include "attest/model/problem.h"
#include "attest/properties/harness.h"

namespace attest {
namespace {

using Clock = std::chrono::steady_clock;

// The share of the Tq x Tk (query, key) pairs that the causal, window and lookahead terms let through:
// a kernel skipping masked tiles does work in proportion to it (a window of 512 at 32768 keys is
// 1/64 of the square), so the plan affords a windowed case by what it computes, not by its keys.
double visible_share(const Problem& p) {
  const Shape& s = p.shape;
  if (s.q_len <= 0 || s.k_len <= 0) return 1;
  const MaskSpec& m = p.mask;
  const long long offset = p.effective_q_offset();
  double pairs = 0;
  for (long long i = 0; i < s.q_len; ++i) {
    const long long pos = offset + i;
    long long lo = 0, hi = s.k_len - 1;
    if (m.causal) hi = std::min(hi, pos);
    if (m.lookahead) hi = std::min(hi, pos + *m.lookahead - 1);
    if (m.window) lo = std::max(lo, pos - *m.window + 1);
    pairs += static_cast<double>(std::max(0LL, hi - lo + 1));
  }
  return pairs / (double(s.q_len) * s.k_len);
}

// Work of a whole case: one forward or backward call over the pairs its mask lets through, or
// every step of its decode session (a cache keeping `capacity` positions, when it declares it,
// attends to no more than those).
double case_work(const SizedCase& c, long long capacity) {
  if (c.backward) return backward_work(c.problem) * visible_share(c.problem);
  if (c.decode_chunks.empty()) return forward_work(c.problem) * visible_share(c.problem);
  const Shape& s = c.problem.shape;
  const DecodeConfig config{s.batch, s.heads, s.kv_heads, s.head_dim, s.value_dim};
  double work = 0;
  long long cached = 0;
  for (int n : c.decode_chunks)
    work += decode_step_work(config, capacity > 0 ? std::min(cached, capacity) : cached, n), cached += n;
  return work;
}

// What attest itself builds and checks for a case: the inputs and outputs, and the rows it
// checks against the reference (each costs an exact dot product per key the mask lets through).
double case_size(const SizedCase& c) {
  const Shape& s = c.problem.shape;
  const double rows = c.rows.empty() ? s.q_len : static_cast<double>(c.rows.size());
  const double keys = s.k_len * (c.decode_chunks.empty() ? visible_share(c.problem) : 1.0);
  return double(s.batch) * s.heads * (s.q_len + s.k_len + rows * keys) * (double(s.head_dim) + s.value_dim);
}

// A prediction with a safety margin for a machine whose load changes between two cases.
constexpr double kMargin = 1.5;

}  // namespace

std::string case_family(const std::string& name) {
  const std::size_t at = name.find("_t");
  return at == std::string::npos ? name : name.substr(0, at);
}

LongStagePlan::LongStagePlan(const Kernel& kernel, double budget_seconds, int required_len,
                             const std::vector<SizedCase>& cases, const std::vector<SizedCase>& calibration)
    : budget_(budget_seconds),
      required_len_(required_len),
      capacity_(kernel.capabilities().cache.evicts() ? kernel.capabilities().cache.exact_up_to() : 0),
      start_(Clock::now()) {
  if (budget_ <= 0) return;  // no budget: nothing to plan
  for (const SizedCase& c : cases)
    if (c.problem.shape.k_len <= required_len_) {
      required_work_ = std::max(required_work_, case_work(c, capacity_));
      required_size_ = std::max(required_size_, case_size(c));
    }
  for (const SizedCase& c : calibration) {
    try {
      const auto start = Clock::now();
      run_sized_case(c, kernel);
      model(case_family(c.name))
          .record(case_work(c, capacity_), std::chrono::duration<double>(Clock::now() - start).count());
    } catch (const KernelLoadError&) {
      throw;
    } catch (const std::exception&) {
      // The ladder stage reports a kernel that fails at these sizes; the plan only lacks a timing.
    }
  }
  start_ = Clock::now();  // the calibration is not charged to the stage's budget
}

double LongStagePlan::seconds_left() const {
  return budget_ - std::chrono::duration<double>(Clock::now() - start_).count();
}

bool LongStagePlan::required(const SizedCase& c) const {
  return c.problem.shape.k_len <= required_len_ ||
         (case_work(c, capacity_) <= required_work_ && case_size(c) <= required_size_);
}

std::optional<Clock::time_point> LongStagePlan::cutoff(const SizedCase& c) const {
  if (budget_ <= 0 || required(c)) return std::nullopt;
  return start_ + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(budget_));
}

std::optional<double> LongStagePlan::predict_kernel(const SizedCase& c) const {
  const double work = case_work(c, capacity_);
  // Its own family first; a family not yet timed (a window past the square sizes) scales from the
  // squares by visible pairs. A kernel computing masked tiles anyway takes longer than that: its
  // first windowed case teaches the window family, and the budget's cutoff bounds that case.
  for (const std::string& family : {case_family(c.name), std::string("square")})
    if (auto it = kernel_by_family_.find(family); it != kernel_by_family_.end())
      if (auto t = it->second.predict(work)) return t;
  std::optional<double> slowest;
  for (const auto& [family, model] : kernel_by_family_)
    if (auto t = model.predict(work)) slowest = std::max(slowest.value_or(0), *t);
  return slowest;
}

std::optional<double> LongStagePlan::predict_overhead(const SizedCase& c) const {
  return overhead_.predict(case_size(c));
}

std::string LongStagePlan::refuses(const SizedCase& c) const {
  if (budget_ <= 0 || required(c)) return {};
  const double left = seconds_left();
  if (left <= 0) return fmt::format("the {:g} s time budget was spent", budget_);
  const std::optional<double> kernel = predict_kernel(c);
  if (!kernel) return {};  // nothing measured yet: the first case teaches the plan
  const double predicted = kMargin * (*kernel + predict_overhead(c).value_or(0));
  if (predicted <= left) return {};
  return fmt::format("predicted {:.3g} s, {:.3g} s of the {:g} s time budget left", predicted, left, budget_);
}

CostModel& LongStagePlan::model(const std::string& family) {
  return kernel_by_family_.try_emplace(family, kMeasurableCallSeconds).first->second;
}

void LongStagePlan::learn(const SizedCase& c, double kernel_seconds, double case_seconds) {
  if (!(kernel_seconds > 0)) return;  // the kernel failed or was never called: no timing
  model(case_family(c.name)).record(case_work(c, capacity_), kernel_seconds);
  overhead_.record(case_size(c), std::max(0.0, case_seconds - kernel_seconds));
}

}  // namespace attest
