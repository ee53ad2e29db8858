// Coverage by design (docs/design.md#coverage-model): every class of the coverage model can be forced into a
// problem inside a full declaration, and the per-path pair top-up finds a bug that lives in one
// feature pair on one path, which the random draw of the same check passes.
#include <gtest/gtest.h>

#include <algorithm>
#include <iostream>

#include "attest/kernels/builtin_kernels.h"
#include "attest/mutants/mutants.h"
#include "attest/properties/coverage_model.h"
#include "attest/properties/generators.h"
#include "certify.h"

namespace attest {
namespace {

TEST(CoverageModel, EveryClassOfAFullDeclarationCanBeForced) {
  const auto kernel = make_faulty_tiled_kernel({32, 32}, {}, "tiled-scalar");
  const Capabilities caps = kernel->capabilities();
  const rc::Gen<ProblemSpec> specs = gen_spec(caps);
  for (const std::string& cls : all_targets(coverage_axes(caps), 1)) {
    ProblemNeeds needs;
    needs.force = {cls};
    int landed = 0;
    for (int seed = 0; seed < 32; ++seed) {
      const Problem p = build_problem(specs(rc::Random(seed + 1), 50).value(), caps, needs);
      const std::vector<std::string> classes = coverage_classes(p, caps);
      landed += std::find(classes.begin(), classes.end(), cls) != classes.end() && caps.supports(p);
    }
    EXPECT_GT(landed, 16) << cls;
  }
}

TEST(CoverageModel, PairNamesOfAProblemAreTargetsOfTheModel) {
  const auto kernel = make_faulty_tiled_kernel({32, 32}, {}, "tiled-scalar");
  const Capabilities caps = kernel->capabilities();
  const std::vector<std::string> pairs = all_targets(coverage_axes(caps), 2);
  Problem p;
  p.shape = {2, 4, 2, 40, 70, 16, 16};
  p.mask.causal = true;
  p.modifiers.softcap = 5.0;
  p.resize_buffers();
  for (const std::string& t : targets_of(coverage_classes(p, caps), 2)) {
    if (target_classes(t)[0].rfind("group", 0) != 0 || caps.declares(Feature::kGqa)) {
      EXPECT_NE(std::find(pairs.begin(), pairs.end(), t), pairs.end()) << t;
    }
  }
  const std::vector<std::string> classes = coverage_classes(p, caps);
  for (const char* expected : {"queries: partial last tile", "keys: partial last tile", "mask: causal",
                               "modifier: softcap", "heads: 2-8", "group: 2", "batch: 2-4", "width: small"})
    EXPECT_NE(std::find(classes.begin(), classes.end(), expected), classes.end()) << expected;
}

// matches_reference on one kernel: the random draw, the path top-ups, then the coverage top-up.
CheckResult check_with_coverage(const Kernel& kernel, const PathShapes& discovered, bool& draw_passed) {
  const PropertyInfo& property = find_property("matches_reference");
  DriveOptions drive;
  drive.cases = 100;
  drive.seed = 1;
  drive.counterexample_dir = ::testing::TempDir() + "/coverage_top_up";
  const DriveResult d = drive_property(property, kernel, drive);
  draw_passed = d.passed;
  CheckResult r{kernel.name(), "property", property.name};
  r.effective = d.effective, r.cases = d.asked, r.paths = d.paths, r.failures = d.passed ? 0 : 1;
  top_up_paths(r, property, kernel, drive, discovered);
  top_up_targets(r, property, kernel, drive, discovered, 2);
  return r;
}

TEST(CoverageTopUp, FindsABugInOneFeaturePairOnOnePath) {
  const auto mutant = find_mutant("wide_path_unmasked_softcap").make();
  CertifyOptions options;
  options.progress = false;
  options.sizes = sizes_for_budget(100);
  const PathShapes discovered = discover_paths(*mutant, options);
  ASSERT_TRUE(discovered.contains("wide"));
  bool draw_passed = false;
  const CheckResult r = check_with_coverage(*mutant, discovered, draw_passed);
  EXPECT_TRUE(draw_passed) << "the random draw alone caught it: the test no longer shows the top-up";
  EXPECT_EQ(r.failures, 1);
  EXPECT_NE(r.first_failure.find("coverage on path wide"), std::string::npos) << r.first_failure;
}

TEST(CoverageTopUp, ACorrectKernelCoversEveryTargetItsPathsTake) {
  const auto kernel = make_faulty_tiled_kernel({32, 32}, {}, "tiled-scalar");
  CertifyOptions options;
  options.progress = false;
  options.sizes = sizes_for_budget(100);
  bool draw_passed = false;
  const CheckResult r = check_with_coverage(*kernel, discover_paths(*kernel, options), draw_passed);
  EXPECT_EQ(r.failures, 0) << r.first_failure;
  EXPECT_TRUE(r.path_shortfall.empty()) << r.path_shortfall.front();
  for (const auto& [path, stats] : r.paths) {
    EXPECT_GT(stats.targets_required, 100) << path;
    EXPECT_TRUE(stats.targets_uncovered.empty()) << path;
  }
  // The single-tile path never takes more keys than a tile: its learned predicate says so.
  const std::vector<std::string>& not_taken = r.paths.at("single-tile").targets_not_taken;
  EXPECT_NE(std::find(not_taken.begin(), not_taken.end(), "keys: partial last tile"), not_taken.end());
}

// A kernel with a path for one-hot values (V entries all 0 or 1), as a sparse fast path might:
// rows_sum_to_one's V = 1 probe always lands there, never on the path its case takes.
class OneHotValuePath final : public Kernel {
 public:
  OneHotValuePath() : inner_(make_faulty_tiled_kernel({32, 32}, {}, "one-hot-value-path")) {}
  std::string name() const override { return inner_->name(); }
  Capabilities capabilities() const override { return inner_->capabilities(); }
  void forward(const Problem& p, std::span<float> o, std::span<float> lse) const override {
    one_hot_ = std::all_of(p.v.begin(), p.v.end(), [](float x) { return x == 0.0f || x == 1.0f; });
    inner_->forward(p, o, lse);
  }
  std::string last_path() const override { return one_hot_ ? "one-hot-v" : "dense-v"; }

 private:
  std::unique_ptr<Kernel> inner_;
  mutable bool one_hot_ = false;
};

TEST(ProbePaths, ACaseWhoseProbesLeaveItsPathIsDrawnAgainThenKeptAndCounted) {
  const OneHotValuePath kernel;
  DriveOptions drive;
  drive.cases = 20;
  drive.seed = 1;
  drive.counterexample_dir = ::testing::TempDir() + "/probe_paths";
  const DriveResult d = drive_property(find_property("rows_sum_to_one"), kernel, drive);
  EXPECT_TRUE(d.passed) << d.message;
  EXPECT_EQ(d.probes_redone, 20);
  EXPECT_GT(d.probes_kept_off_path, 0);
  // What ran is evidence for the path the probes took.
  EXPECT_FALSE(d.paths.contains("dense-v"));
  EXPECT_GT(d.paths.at("one-hot-v").cases, 0);
}

TEST(ProbePaths, ProbesOfTheBuiltInKernelsKeepTheirPaths) {
  for (const char* name : {"tiled", "blocked", "tiled_bf16"}) {
    const auto kernel = make_kernel(name);
    for (const char* property : {"rows_sum_to_one", "zero_masked_weight", "masked_inputs_have_no_influence",
                                 "slices_are_independent", "overflow_safe"}) {
      DriveOptions drive;
      drive.cases = 30;
      drive.seed = 3;
      drive.counterexample_dir = ::testing::TempDir() + "/probe_paths";
      const DriveResult d = drive_property(find_property(property), *kernel, drive);
      EXPECT_TRUE(d.passed) << name << " " << property << ": " << d.message;
      EXPECT_EQ(d.probes_redone, 0) << name << " " << property;
    }
  }
}

}  // namespace
}  // namespace attest
