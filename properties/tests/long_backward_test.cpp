// The long stage's backward beyond square causal problems: the ladder's rectangular problem with a
// padded batch entry, judged on sampled rows, past the ladder's 512.
#include <gtest/gtest.h>

#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

#include "attest/kernels/builtin_kernels.h"
#include "attest/kernels/faults.h"
#include "attest/properties/size_ladder.h"

namespace attest {
namespace {

const SizeOptions kOptions{.max_len = 2048, .head_dims = {32}, .square_limit = 2048, .sampled_rows = 32, .jobs = 2};

const SizedCase& named(const std::vector<SizedCase>& cases, const std::string& name) {
  const auto it = std::find_if(cases.begin(), cases.end(), [&](const SizedCase& c) { return c.name == name; });
  if (it == cases.end()) throw std::runtime_error("no case " + name);
  return *it;
}

// Tq = T against a whole key tile and one key more, no causality, the second batch entry's keys
// padded to T: at every long length up to square_limit, on sampled rows.
TEST(LongBackward, HasRectangularPaddedProblemsOnSampledRows) {
  const auto tiled = make_tiled_kernel({128, 128});
  const std::vector<SizedCase> cases = long_cases(tiled->capabilities(), kOptions);
  for (int t : {1024, 2048}) {
    const SizedCase& c = named(cases, "backward_rect_t" + std::to_string(t) + "_d32");
    EXPECT_TRUE(c.backward);
    EXPECT_FALSE(c.rows.empty());
    const Shape& s = c.problem.shape;
    EXPECT_EQ(s.batch, 2);
    EXPECT_EQ(s.q_len, t);
    EXPECT_EQ(s.k_len, t + 129);
    EXPECT_FALSE(c.problem.mask.causal);
    EXPECT_EQ(c.problem.mask.kv_valid, (std::vector<int>{t + 129, t}));
  }
}

// A backward wrong only for Tq != Tk past Tk 2048, and one wrong only for a padded batch entry
// past Tk 2048: the square causal case (all the long stage had) passes both, the rectangular
// padded one fails both, and the correct backward passes it.
TEST(LongBackward, FindsBugsOnlyRectangularOrPaddedProblemsShow) {
  const auto correct = make_tiled_kernel({128, 128});
  const std::vector<SizedCase> cases = long_cases(correct->capabilities(), kOptions);
  const SizedCase &square = named(cases, "backward_square_t2048_d32"), &rect = named(cases, "backward_rect_t2048_d32");
  const Verdict good = check_sized_case(rect, *correct, kOptions.jobs);
  EXPECT_TRUE(good.passed && good.exercised) << good.detail;
  for (const KernelFaults& fault : {KernelFaults{.backward_dk_wrong_rect_past_2048 = true},
                                    KernelFaults{.backward_dv_wrong_padded_past_2048 = true}}) {
    const auto broken = make_faulty_tiled_kernel({128, 128}, fault, "broken");
    const Verdict unseen = check_sized_case(square, *broken, kOptions.jobs);
    EXPECT_TRUE(unseen.passed) << unseen.detail;
    const Verdict seen = check_sized_case(rect, *broken, kOptions.jobs);
    EXPECT_FALSE(seen.passed);
    EXPECT_NE(seen.detail.find("backward: "), std::string::npos) << seen.detail;
  }
}

}  // namespace
}  // namespace attest
