// Every built-in kernel against the reference, through the hard bound, over the grid.
#include <gtest/gtest.h>

#include <cmath>

#include "attest/kernels/builtin_kernels.h"
#include "attest/kernels/kernel.h"
#include "attest/properties/cases.h"
#include "attest/properties/compare.h"
#include "attest/properties/declaration_fit.h"
#include "attest/properties/oracle.h"

namespace attest {
namespace {

class Grid : public ::testing::TestWithParam<std::string> {};

TEST_P(Grid, EveryKernelWithinHardBound) {
  static Oracle oracle(1);
  const NamedProblem& c = [&]() -> const NamedProblem& {
    static const std::vector<NamedProblem> grid = grid_problems();
    for (const NamedProblem& g : grid)
      if (g.name == GetParam()) return g;
    throw std::logic_error("no grid case " + GetParam());
  }();
  // Each kernel gets the case as its declaration takes it (a bf16 kernel: inputs rounded to bf16).
  for (const KernelEntry& entry : kernel_registry()) {
    const auto kernel = entry.make();
    if (!kernel->capabilities().forward()) continue;  // decode-only: certified through its sessions
    const std::optional<Problem> p = fit_to_declaration(c.problem, kernel->capabilities());
    ASSERT_TRUE(p) << entry.name;
    const Reference& ref = oracle.reference(*p);
    ASSERT_TRUE(ref.finite());
    const Comparison cmp = compare_with_reference(*p, ref, run_forward(*kernel, *p), kernel->capabilities());
    EXPECT_TRUE(cmp.verdict.passed) << entry.name << ": " << cmp.verdict.detail;
    // Headroom: an f32 kernel stays under half its bound on the grid; a 16-bit kernel's bound counts
    // each declared rounding at its own unit roundoff and is closer (calibration: up to 0.95).
    const double headroom = kernel->capabilities().precision.all_f32() ? 0.5 : 0.75;
    EXPECT_LT(cmp.verdict.utilisation, headroom) << entry.name << " uses too much of its bound";
  }
  // The scalar tiled code that the mutants switch faults into is correct with every switch off.
  const auto scalar = make_faulty_tiled_kernel({32, 32}, KernelFaults{}, "tiled-scalar");
  const Reference& ref = oracle.reference(c.problem);
  const Comparison cmp =
      compare_with_reference(c.problem, ref, run_forward(*scalar, c.problem), scalar->capabilities());
  EXPECT_TRUE(cmp.verdict.passed) << "tiled-scalar: " << cmp.verdict.detail;
}

// Two runs that agree on an infinity agree: a metamorphic property must not read -inf vs -inf
// (inf - inf = NaN) as an error. An infinity against a finite value is still a failure.
TEST(CompareRuns, EqualInfinitiesCompareEqual) {
  static Oracle oracle(1);
  const std::vector<NamedProblem> grid = grid_problems();
  const NamedProblem& c = grid.front();
  const auto kernel = make_loop_kernel();
  const Reference& ref = oracle.reference(c.problem);
  Outputs first = run_forward(*kernel, c.problem);
  std::size_t row = 0;
  while (ref.empty[row]) ++row;
  first.lse[row] = -INFINITY;
  first.o[row * c.problem.shape.value_dim] = INFINITY;
  const Outputs second = first;
  const Verdict same = compare_runs(c.problem, ref, first, second, kernel->capabilities(), "p", "");
  EXPECT_TRUE(same.passed) << same.detail;

  Outputs finite = first;
  finite.lse[row] = static_cast<float>(ref.lse[row]);
  const Verdict differs = compare_runs(c.problem, ref, first, finite, kernel->capabilities(), "p", "");
  EXPECT_FALSE(differs.passed);
  EXPECT_NE(differs.detail.find("LSE"), std::string::npos) << differs.detail;
}

std::vector<std::string> grid_names() {
  std::vector<std::string> names;
  for (const NamedProblem& c : grid_problems()) names.push_back(c.name);
  return names;
}

INSTANTIATE_TEST_SUITE_P(Cases, Grid, ::testing::ValuesIn(grid_names()), [](const auto& info) {
  std::string n = info.param;
  for (char& ch : n)
    if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return n;
});

}  // namespace
}  // namespace attest
