// The long stage's plan affords a windowed case by the pairs its window lets through, not by its
// keys: at the default budget a kernel that ran the 2048 square in a second is predicted to run the
// windowed 16384 and 32768 cases in a few (they compute a quarter and an eighth of the 8192 square),
// while the 8192 square itself stays over the budget. Timings are given, not measured: no test
// here depends on the machine's speed.
#include "long_stage_plan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "attest/kernels/builtin_kernels.h"
#include "attest/properties/size_ladder.h"
#include "certify.h"

namespace attest {
namespace {

const SizedCase& named(const std::vector<SizedCase>& cases, const std::string& name) {
  const auto it = std::find_if(cases.begin(), cases.end(), [&](const SizedCase& c) { return c.name == name; });
  if (it == cases.end()) throw std::runtime_error("no case " + name);
  return *it;
}

const Kernel& kernel() {
  static const std::unique_ptr<Kernel> tiled = make_tiled_kernel({128, 128});
  return *tiled;
}
const SizeOptions sizes = sizes_for_budget(100);  // the default budget: 20 s, 32768 keys
// Built once (their long inputs take seconds): every test reads them.
const std::vector<SizedCase>& cases() {
  static const std::vector<SizedCase> all = long_cases(kernel().capabilities(), sizes);
  return all;
}

class LongStagePlanTest : public ::testing::TestWithParam<std::string> {};

// "" for the forward's cases, "backward_" for the backward's.
TEST_P(LongStagePlanTest, AffordsWindowedCasesByVisiblePairs) {
  const std::string family = GetParam();
  LongStagePlan plan(kernel(), sizes.time_budget, sizes.required_len, cases(), {});
  plan.learn(named(cases(), family + "square_t2048_d64"), 1.0, 1.0);  // one second, all of it the kernel's
  for (const int t : {16384, 32768}) {
    const SizedCase& windowed = named(cases(), family + "window_t" + std::to_string(t) + "_d64");
    ASSERT_TRUE(windowed.problem.mask.window);
    EXPECT_EQ(plan.refuses(windowed), "") << windowed.name;
  }
  // The causal square of 8192 computes 16 times the 2048 square's pairs: 24 s with the margin.
  EXPECT_NE(plan.refuses(named(cases(), family + "square_t8192_d64")), "");
}

INSTANTIATE_TEST_SUITE_P(ForwardAndBackward, LongStagePlanTest, ::testing::Values("", "backward_"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param.empty() ? std::string("forward") : std::string("backward");
                         });

// A window as wide as the keys hides nothing: the plan predicts it as the dense square it is.
TEST(LongStagePlan, AWindowCoveringEveryKeyCostsTheSquare) {
  SizedCase wide = named(cases(), "square_t8192_d64");
  wide.name = "window_t8192_d64";
  wide.problem.mask.window = 8192;
  LongStagePlan plan(kernel(), sizes.time_budget, sizes.required_len, cases(), {});
  plan.learn(named(cases(), "square_t2048_d64"), 1.0, 1.0);
  EXPECT_NE(plan.refuses(wide), "");
}

}  // namespace
}  // namespace attest
