// What a kernel call costs, learnt from the calls it has answered (docs/design.md#time-is-a-budget: time is a
// budget, not a verdict). Work is counted dense, every (query, key) pair of every head, so a
// kernel that skips masked tiles only ever runs faster than predicted: the prediction is an
// upper estimate, which is what a deadline and a time budget need.
#pragma once

#include <cstddef>
#include <optional>
#include <vector>

#include "attest/kernels/kernel.h"

namespace attest {

// Multiply-adds of a forward call: B x H x Tq x Tk x (Dk + Dv).
double forward_work(const Problem& p);
// Of a backward call: 2.5 x the forward's (its five products against the forward's two).
double backward_work(const Problem& p);
// Of a decode step appending n tokens to a cache of `cached` tokens.
double decode_step_work(const DecodeConfig& c, long long cached, int n);
// Of a merge of partial states: parts x rows x (Dv + 1).
double merge_work(const MergeInputs& in);

class CostModel {
 public:
  // Calls faster than `measurable_seconds` are never scaled up: their time is the fixed cost of
  // a call and timer noise, and multiplying that by work would predict absurd times.
  explicit CostModel(double measurable_seconds = 0) : measurable_(measurable_seconds) {}
  // One answered call of this work that took this long.
  void record(double work, double seconds);
  // Seconds a call of this work should take: the largest measurable calls at or below it scaled
  // linearly by work (the slowest of them wins). Empty when no measurable call is that small.
  std::optional<double> predict(double work) const;
  // Seconds for a call's hang limit, never empty: predict(work), never less than the floor
  // (`measurable_seconds`); when no call at or below this size was slow enough to time (or work 0,
  // not a computation), the floor. The hang limit is max(--timeout, 10 x this).
  double predict_or_floor(double work) const;
  std::size_t calls() const { return calls_; }

 private:
  double measurable_;
  std::vector<std::pair<double, double>> samples_;  // (work, seconds), ascending work, few per size
  std::size_t calls_ = 0;
};

// A call is a hang, not slowness, once it has run this many times its predicted cost.
inline constexpr double kHangFactor = 10.0;
// The shortest call whose time a deadline is scaled from.
inline constexpr double kMeasurableCallSeconds = 0.02;

}  // namespace attest
