// The long stage's sampled checks: the backward on sampled rows and a long session through an
// evicting cache against its retained set.
#include "../src/sampled_gradient.h"

#include <gtest/gtest.h>

#include <cmath>

#include "../src/problem_edits.h"
#include "../src/retained_session.h"
#include "attest/kernels/builtin_kernels.h"
#include "attest/kernels/faults.h"
#include "attest/properties/cases.h"

namespace attest {
namespace {

Problem causal_problem(int t, std::uint64_t seed) {
  Problem p;
  p.shape = {2, 2, 1, t, t + 9, 16, 16};
  p.resize_buffers();
  fill_random(p, seed);
  p.mask.causal = true;
  p.mask.kv_valid = {t + 9, t - 20};
  p.modifiers.softcap = 20.0;
  p.modifiers.sinks = {0.5f, -1.0f};
  return p;
}

// With dO zero outside the sampled rows, the exact gradient of the whole problem is that of the
// sampled rows alone: the same dK, dV and dsinks, their dQ, and dQ 0 on every other row.
TEST(SampledGradient, TheSampledRowsGiveTheWholeExactGradient) {
  const Problem p = causal_problem(150, 7);
  const std::vector<int> rows = {0, 1, 63, 64, 100, 140, 149};
  const SampledBackward in = sampled_backward(p, rows, EmptyRowPolicy::kZero, 1);
  const ReferenceGradient whole = compute_gradient(p, in.full);
  const ReferenceGradient sampled = compute_gradient(in.restricted, in.sampled);
  auto near = [](double a, double b) { return std::fabs(a - b) <= 1e-12 * (1 + std::fabs(a)); };
  ASSERT_EQ(whole.dk.size(), sampled.dk.size());
  for (std::size_t e = 0; e < whole.dk.size(); ++e) ASSERT_TRUE(near(whole.dk[e], sampled.dk[e])) << "dK " << e;
  for (std::size_t e = 0; e < whole.dv.size(); ++e) ASSERT_TRUE(near(whole.dv[e], sampled.dv[e])) << "dV " << e;
  for (std::size_t h = 0; h < whole.dsinks.size(); ++h) EXPECT_TRUE(near(whole.dsinks[h], sampled.dsinks[h]));
  const int dk = p.shape.head_dim, n = static_cast<int>(rows.size());
  for (int bh = 0; bh < p.shape.batch * p.shape.heads; ++bh)
    for (int i = 0, e = 0; i < p.shape.q_len; ++i) {
      const bool kept = e < n && rows[e] == i;
      for (int c = 0; c < dk; ++c) {
        const double x = whole.dq[(std::size_t(bh) * p.shape.q_len + i) * dk + c];
        if (kept)
          ASSERT_TRUE(near(x, sampled.dq[(std::size_t(bh) * n + e) * dk + c])) << "dQ row " << i;
        else
          ASSERT_EQ(x, 0.0) << "dQ row " << i;
      }
      e += kept;
    }
}

// A correct backward passes on sampled rows; one whose dQ is 1% off past Tk 2048 fails there only.
TEST(SampledGradient, FindsABackwardWrongOnlyPastTk2048) {
  const auto correct = make_tiled_kernel({128, 128});
  const auto broken = make_faulty_tiled_kernel({128, 128}, {.backward_dq_wrong_past_2048 = true}, "dq_past_2048");
  const std::vector<int> rows = {0, 127, 128, 1000, 2047, 2048, 2100};
  for (int t : {2000, 2101}) {
    Problem p;
    p.shape = {1, 1, 1, t, t, 64, 64};
    p.resize_buffers();
    fill_random(p, 3);
    p.mask.causal = true;
    std::vector<int> inside;
    for (int i : rows)
      if (i < t) inside.push_back(i);
    const Verdict good = sampled_backward_matches_reference(p, inside, *correct, 2);
    EXPECT_TRUE(good.passed && good.exercised) << t << ": " << good.detail;
    const Verdict bad = sampled_backward_matches_reference(p, inside, *broken, 2);
    EXPECT_EQ(bad.passed, t <= 2048) << t << ": " << bad.detail;
    if (!bad.passed) {
      EXPECT_NE(bad.detail.find("dQ[b=0 h=0 row="), std::string::npos) << bad.detail;
    }
  }
}

// The sinks + recent cache holds over a long session; one that drops its sinks from position
// 5000 fails once the session passes it.
TEST(RetainedSession, FindsSinksDroppedFromPosition5000) {
  const auto correct = make_sinks_recent_decode_kernel(4, 32);
  const auto broken =
      make_faulty_sinks_recent_decode_kernel(4, 32, false, {.sinks_evicted_from_5000 = true}, "sinks_from_5000");
  for (int t : {4900, 6000}) {
    Problem p;
    p.shape = {1, 2, 1, t, t, 32, 32};
    p.resize_buffers();
    fill_random(p, 5);
    p.mask.causal = true;
    std::vector<int> chunks;
    for (int left = t; left > 0; left -= chunks.back()) chunks.push_back(std::min(left, 1 + int(chunks.size() % 37)));
    const std::vector<int> rows = {0, 35, 36, 37, 4899, t - 1};
    const Verdict good = retained_session_matches(p, chunks, rows, *correct, 1);
    EXPECT_TRUE(good.passed && good.exercised) << t << ": " << good.detail;
    const Verdict bad = retained_session_matches(p, chunks, rows, *broken, 1);
    EXPECT_EQ(bad.passed, t <= 5000) << t << ": " << bad.detail;
  }
}

}  // namespace
}  // namespace attest
