// Per-path evidence: a kernel whose second path needs Tk > 256 (generated lengths rarely get
// there) still gets kPathFloor cases of it in every property that can take such problems.
#include <gtest/gtest.h>

#include "attest/kernels/builtin_kernels.h"
#include "certify.h"

namespace attest {
namespace {

TEST(PathTopUp, EveryPropertyReachesEveryDiscoveredPath) {
  const auto kernel = make_faulty_tiled_kernel({32, 256}, {}, "tiled-scalar-32x256");
  CertifyOptions options;
  options.property_cases = 10;
  options.seed = 7;
  options.progress = false;
  options.out_dir = ::testing::TempDir() + "/path_top_up";
  options.sizes = {.max_len = 512};
  const PathShapes paths = discover_paths(*kernel, options);
  ASSERT_EQ(paths.size(), 2u);
  ASSERT_TRUE(paths.count("multi-tile"));
  EXPECT_GT(paths.at("multi-tile").front().k_len, 256);  // its smallest shape has more keys than a tile

  int topped_up = 0;
  for (const CheckResult& r : run_property_stage(*kernel, options)) {
    if (r.status() == CheckStatus::kNotCovered) continue;
    EXPECT_EQ(r.status(), CheckStatus::kPass) << r.check << ": " << r.first_failure;
    EXPECT_TRUE(r.path_shortfall.empty()) << r.check;
    const auto multi = r.paths.find("multi-tile");
    const PropertyInfo& property = find_property(r.check);
    if (property.needs.max_keys > 0 && property.needs.max_keys <= 256) {
      EXPECT_TRUE(multi == r.paths.end() || multi->second.cases == 0) << r.check;  // cannot reach it: not required
      continue;
    }
    ASSERT_NE(multi, r.paths.end()) << r.check;
    EXPECT_GE(multi->second.cases, kPathFloor) << r.check;
    topped_up += r.cases > options.property_cases;
  }
  EXPECT_GT(topped_up, 0);  // ten generated cases seldom reach Tk > 256: the top-up did it
}

}  // namespace
}  // namespace attest
