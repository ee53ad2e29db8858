// The worked example of the source material, for the reference and every kernel.
#include <gtest/gtest.h>

#include <cmath>

#include "attest/kernels/kernel.h"
#include "attest/properties/cases.h"
#include "attest/properties/compare.h"
#include "attest/properties/declaration_fit.h"
#include "attest/reference/reference.h"

namespace attest {
namespace {

// Exact values of the last row: weights softmax([1, 1, 2] / sqrt 2), output P V.
constexpr double kWeightSide = 0.248255078258;
constexpr double kWeightSelf = 0.503489843485;
constexpr double kOutput0 = 1.758724608711;
constexpr double kOutput1 = 1.0;
constexpr double kLse = 2.100405301228;

TEST(Golden, ReferenceLastRowOfWorkedExample) {
  const Reference ref = compute_reference(worked_example(), {.weights = true});
  EXPECT_NEAR(ref.weights[6], kWeightSide, 1e-6);
  EXPECT_NEAR(ref.weights[7], kWeightSide, 1e-6);
  EXPECT_NEAR(ref.weights[8], kWeightSelf, 1e-6);
  EXPECT_NEAR(ref.o[4], kOutput0, 1e-6);
  EXPECT_NEAR(ref.o[5], kOutput1, 1e-6);
  EXPECT_NEAR(ref.lse[2], kLse, 1e-6);
  // The source material's rounded figures.
  EXPECT_NEAR(ref.weights[8], 0.503, 5e-4);
  EXPECT_NEAR(ref.o[4], 1.758, 1e-3);
  // Causal: the first row sees only itself.
  EXPECT_EQ(ref.weights[1], 0.0);
  EXPECT_EQ(ref.weights[2], 0.0);
}

class GoldenKernel : public ::testing::TestWithParam<std::string> {};

TEST_P(GoldenKernel, LastRowOfWorkedExample) {
  const auto kernel = make_kernel(GetParam());
  const Outputs out = run_forward(*kernel, worked_example());  // its inputs are exact in every format
  // O within a unit roundoff of its storage format (a bf16 kernel stores 8 significant bits).
  const double u = unit_roundoff(kernel->capabilities().precision.o);
  EXPECT_NEAR(out.o[4], kOutput0, 1e-6 + 2 * u * kOutput0);
  EXPECT_NEAR(out.o[5], kOutput1, 1e-6 + 2 * u * kOutput1);
  EXPECT_NEAR(out.lse[2], kLse, 1e-6 + 4 * unit_roundoff(kernel->capabilities().precision.p) * kLse);
  EXPECT_NEAR(out.o[0], 1.0, 1e-6);  // row 0 sees only key 0
  EXPECT_NEAR(out.o[1], 0.0, 1e-6);
}

TEST_P(GoldenKernel, GoldenProblemsWithinHardBound) {
  const auto kernel = make_kernel(GetParam());
  for (const NamedProblem& named : golden_problems()) {
    const std::optional<Problem> fitted = fit_to_declaration(named.problem, kernel->capabilities());
    ASSERT_TRUE(fitted) << named.name;
    const NamedProblem c{named.name, *fitted};
    const Reference ref = compute_reference(c.problem);
    const Comparison cmp =
        compare_with_reference(c.problem, ref, run_forward(*kernel, c.problem), kernel->capabilities());
    EXPECT_TRUE(cmp.verdict.passed) << c.name << ": " << cmp.verdict.detail;
    EXPECT_LT(cmp.verdict.utilisation, 0.5) << c.name;
  }
}

std::vector<std::string> kernel_names() {
  std::vector<std::string> names;
  for (const KernelEntry& e : kernel_registry())
    if (e.make()->capabilities().forward()) names.push_back(e.name);  // a decode-only kernel has no forward
  return names;
}

INSTANTIATE_TEST_SUITE_P(Builtin, GoldenKernel, ::testing::ValuesIn(kernel_names()),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace attest
