// The long stage as a time budget (docs/design.md#time-is-a-budget): which cases a kernel's measured speed lets it
// afford, and how long each may run before it is dropped as too slow at its size.
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "attest/kernels/cost_model.h"
#include "attest/properties/size_ladder.h"

namespace attest {

class LongStagePlan {
 public:
  // `budget_seconds` 0: no time budget. Cases of up to `required_len` keys are outside the budget:
  // a slow machine never keeps the stage from the length its budget level counts on. So is every
  // case of `cases` no costlier than the costliest of those (a 1 x 32768 call beside a 512 x 512
  // one): the budget could afford it whenever it affords them, and a kernel that hangs on such a
  // call is found however busy the machine. `calibration` are cases of every family the long stage
  // has, at ladder sizes: timed once each (the kernel alone) so the first long case has a prediction.
  LongStagePlan(const Kernel& kernel, double budget_seconds, int required_len, const std::vector<SizedCase>& cases,
                const std::vector<SizedCase>& calibration);

  // Why the case cannot be afforded now ("predicted 41 s, 6.2 s of the budget left"), or empty.
  std::string refuses(const SizedCase& c) const;
  // The time the case's calls may run to before they are cut (the budget's end); empty without a
  // budget and for a required length.
  std::optional<std::chrono::steady_clock::time_point> cutoff(const SizedCase& c) const;
  // A finished case: the kernel's seconds and the whole case's (reference and comparison included).
  void learn(const SizedCase& c, double kernel_seconds, double case_seconds);
  double budget() const { return budget_; }

 private:
  std::optional<double> predict_kernel(const SizedCase& c) const;
  std::optional<double> predict_overhead(const SizedCase& c) const;
  double seconds_left() const;

  bool required(const SizedCase& c) const;
  CostModel& model(const std::string& family);  // the family's kernel timings, measurable calls only

  double budget_;
  int required_len_;
  double required_work_ = 0, required_size_ = 0;  // of the costliest case of up to required_len_ keys
  long long capacity_;                            // positions an evicting cache keeps (0: every one)
  std::chrono::steady_clock::time_point start_;
  std::map<std::string, CostModel> kernel_by_family_;  // "square", "window", "decode_shape", ...
  CostModel overhead_{kMeasurableCallSeconds};  // attest's own time per case, by the size of what it builds and checks
};

// "window_t32768_d64" -> "window": cases of one family scale alike (a window's keys do not grow).
std::string case_family(const std::string& name);

}  // namespace attest
