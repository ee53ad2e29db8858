// selfcheck's draw reaches the fields it claims, in the shares it claims, and only as honest
// declarations the model can serve: backward in about a sixth (float32 throughout), cache policies
// and block tables with decode, declared paths only with a forward, fp8 K/V.
#include "declaration_draw.h"

#include <gtest/gtest.h>

#include "attest/kernel.h"

namespace attest {
namespace {

TEST(DeclarationDraw, ReachesEveryServedFieldInItsShare) {
  int backward = 0, evicting = 0, paged = 0, paths = 0, fp8 = 0;
  const int n = 1200;
  for (int i = 0; i < n; ++i) {
    const Capabilities c = draw_declaration(1, i);
    if (c.backward()) {
      ++backward;
      EXPECT_TRUE(c.precision.all_f32()) << "declaration " << i;
    }
    if (c.cache.evicts() || c.page_tokens > 0) EXPECT_TRUE(c.decode()) << "declaration " << i;
    evicting += c.cache.evicts();
    paged += c.page_tokens > 0;
    if (!c.paths.empty()) {
      ++paths;
      EXPECT_TRUE(c.forward()) << "declaration " << i;
    }
    fp8 += c.precision.k == Scalar::kE4M3 || c.precision.k == Scalar::kE5M2;
    EXPECT_EQ(draw_declaration(1, i), c) << "declaration " << i << " is not reproducible";
  }
  EXPECT_NEAR(backward, n / 6, n / 24);
  EXPECT_GT(evicting, n / 40);
  EXPECT_GT(paged, n / 40);
  EXPECT_GT(paths, n / 10);
  EXPECT_GT(fp8, n / 40);
}

}  // namespace
}  // namespace attest
