// The result of one check: pass or fail with an explanation that locates the failure.
#pragma once

#include <memory>
#include <string>

#include "attest/model/problem.h"

namespace attest {

struct Verdict {
  std::string property;
  bool passed = true;
  bool applicable = true;          // false: the property cannot run on this problem (detail says why)
  double utilisation = 0.0;        // worst |error| / bound seen (0 when the check is exact)
  std::string detail;              // where and how it failed: batch/head/row/column, expected, got, bound
  bool isolation_failure = false;  // the kernel crashed or hung: stop this check
  bool exercised = true;           // false: it passed vacuously (nothing masked, no GQA, ...); `detail` says why
  // The problem that actually failed, when the property transformed the one it was given
  // (overflow_safe scales it): saved instead, to be replayed with `witness_property`.
  std::shared_ptr<const Problem> witness;
  std::string witness_property;
  bool bound_vacuous = false;  // not exercised because the error bound proved nothing: gate 2 decides
  // The largest Tq and Tk the check ran when they differ from its case's (a case grown longer);
  // 0: the case's own. Reports count these, not the drawn size.
  int ran_q_len = 0, ran_k_len = 0;

  static Verdict pass(std::string property, double utilisation = 0.0) {
    return {std::move(property), true, true, utilisation, {}, false};
  }
  static Verdict fail(std::string property, std::string detail, double utilisation = 0.0) {
    return {std::move(property), false, true, utilisation, std::move(detail), false};
  }
  static Verdict not_applicable(std::string property, std::string why) {
    return {std::move(property), true, false, 0.0, std::move(why), false, false};
  }
  // A pass that tested nothing: counted as a case asked for, never as evidence.
  static Verdict vacuous(std::string property, std::string why) {
    return {std::move(property), true, true, 0.0, std::move(why), false, false};
  }
  // Every element's bound was infinite or as large as its value: accuracy is gate 2's to judge.
  static Verdict vacuous_bound(std::string property, std::string why) {
    Verdict v = vacuous(std::move(property), std::move(why));
    v.bound_vacuous = true;
    return v;
  }
};

}  // namespace attest
