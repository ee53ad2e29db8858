// The exact merge of partial attention states (merge_states, Kernel::merge): worked values,
// empty parts skipped unread, rows no part saw, scores past exp's float range, and bad calls.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "attest/kernels/builtin_kernels.h"
#include "attest/model/problem.h"

namespace attest {
namespace {

constexpr float kMergeInf = std::numeric_limits<float>::infinity();
constexpr float kMergeNaN = std::numeric_limits<float>::quiet_NaN();

struct Merged {
  std::vector<float> o, lse;
};

// One row, value width 1 (or `width`), parts given as (o, lse).
Merged merge(const std::vector<float>& part_o, const std::vector<float>& part_lse, int width = 1,
             const KernelFaults& faults = {}) {
  const int parts = static_cast<int>(part_lse.size());
  const MergeInputs in{parts, 1, width, Scalar::kF32, part_o, part_lse};
  Merged m{std::vector<float>(static_cast<std::size_t>(width), kMergeNaN), {kMergeNaN}};
  check_merge_inputs(in, m.o, m.lse);
  merge_states(in, m.o, m.lse, faults);
  return m;
}

TEST(MergeStates, WeighsEachPartByItsSumOfExponentials) {
  // Part 0: sum e^0 = 1 over its keys, o = 2; part 1: sum e^log3 = 3, o = 6. Whole: (2 + 18) / 4.
  const Merged m = merge({2.0f, 6.0f}, {0.0f, std::log(3.0f)});
  EXPECT_NEAR(m.o[0], 5.0f, 1e-6f);
  EXPECT_NEAR(m.lse[0], std::log(4.0f), 1e-6f);
}

TEST(MergeStates, SkipsAnEmptyPartWithoutReadingItsOutput) {
  const Merged m = merge({kMergeNaN, 3.0f, kMergeNaN}, {-kMergeInf, 1.5f, -kMergeInf});
  EXPECT_EQ(m.o[0], 3.0f);
  EXPECT_EQ(m.lse[0], 1.5f);
  // The mutant reads it: 0 * NaN.
  EXPECT_TRUE(std::isnan(merge({kMergeNaN, 3.0f}, {-kMergeInf, 1.5f}, 1, {.merge_reads_empty_part = true}).o[0]));
}

TEST(MergeStates, ARowNoPartSawIsZeroWithLseMinusInfinity) {
  const Merged m = merge({kMergeNaN, kMergeNaN, kMergeNaN, kMergeNaN}, {-kMergeInf, -kMergeInf}, 2);
  EXPECT_EQ(m.o, (std::vector<float>{0.0f, 0.0f}));
  EXPECT_EQ(m.lse[0], -kMergeInf);
}

TEST(MergeStates, LsesPastExpsRangeStayFinite) {
  const Merged m = merge({1.0f, -1.0f}, {300.0f, 300.0f});
  EXPECT_NEAR(m.o[0], 0.0f, 1e-6f);
  EXPECT_NEAR(m.lse[0], 300.0f + std::log(2.0f), 1e-4f);
  EXPECT_TRUE(std::isnan(merge({1.0f, -1.0f}, {300.0f, 300.0f}, 1, {.merge_without_max = true}).o[0]));
}

TEST(MergeStates, TheBf16LseMutantMovesTheLse) {
  const Merged m = merge({1.0f}, {5.01f}, 1, {.merge_lse_bf16 = true});
  EXPECT_GT(std::fabs(m.lse[0] - 5.01f), 1e-3f);
}

TEST(MergeStates, BadCallsAreRefusedByName) {
  std::vector<float> o(2), lse(1), part_o(2), part_lse(2);
  EXPECT_THROW(check_merge_inputs({0, 1, 1, Scalar::kF32, part_o, part_lse}, o, lse), ProblemError);
  EXPECT_THROW(check_merge_inputs({2, 1, 1, Scalar::kF16, part_o, part_lse}, o, lse), ProblemError);
  EXPECT_THROW(check_merge_inputs({2, 1, 2, Scalar::kF32, part_o, part_lse}, o, lse), ProblemError);
  EXPECT_NO_THROW(check_merge_inputs({2, 1, 1, Scalar::kF32, part_o, part_lse}, {o.data(), 1}, lse));
}

}  // namespace
}  // namespace attest
