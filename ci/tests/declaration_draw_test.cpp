// selfcheck's draw reaches the fields it claims, in the shares it claims, and only as honest
// declarations the model can serve: backward in about a sixth (float32 throughout), cache policies
// and block tables with decode, declared paths only with a forward, fp8 K/V, merge.
#include "declaration_draw.h"

#include <gtest/gtest.h>

#include "attest/abi/wire_conversion.h"
#include "attest/kernels/kernel.h"

namespace attest {
namespace {

// Whether the contract admits a problem the first declared path leaves to the second (seed 7 #34
// declared a path no problem could reach: Dk % 16 = 0 first, under Dk in {16, 32}).
bool later_path_reachable(const Capabilities& c) {
  const Contract& k = c.contract;
  if (c.paths[0].path == "per-batch-d16") {
    for (int dim = 1; dim <= 256; ++dim)
      if (dim % 16 != 0 && k.accepts_head_dim(dim)) return true;
    return false;
  }
  if (c.paths[0].path == "short-q")
    return (k.q_len.unlimited() || k.q_len.max > 8) &&
           (!k.self_attention_only || k.k_len.unlimited() || k.k_len.max > 8);
  return true;  // per-batch leaves B = 1, which every contract admits
}

TEST(DeclarationDraw, ReachesEveryServedFieldInItsShare) {
  int backward = 0, evicting = 0, paged = 0, paths = 0, fp8 = 0, value_widths = 0, alibi_or_bias = 0;
  int declared_paths = 0, tiled_paths = 0;
  int merge = 0, merge_with_splits = 0, packed = 0, forwards = 0;
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
      EXPECT_EQ(c.page_tokens, 0) << "declaration " << i << ": paths with a block table";
    }
    if (c.paths.size() > 1) EXPECT_TRUE(later_path_reachable(c)) << "declaration " << i << " shadows a path";
    for (const PathPredicate& path : c.paths) {  // the path's own key tile (ABI 2.7) half the time
      ++declared_paths, tiled_paths += path.key_tile > 0;
      EXPECT_TRUE(path.key_tile == 0 || path.key_tile == 1 || path.key_tile == 16 || path.key_tile == 64)
          << "declaration " << i << ": key tile " << path.key_tile;
    }
    fp8 += c.precision.k == Scalar::kE4M3 || c.precision.k == Scalar::kE5M2;
    // ABI 2.7: Dv's own widths never beside dk_equals_dv; ALiBi-or-bias only where both are declared.
    const Contract& k = c.contract;
    if (!k.value_dims.empty() || !k.value_dim.unlimited()) {
      ++value_widths;
      EXPECT_FALSE(k.dk_equals_dv) << "declaration " << i;
    }
    if (k.alibi_excludes_bias) {
      ++alibi_or_bias;
      EXPECT_TRUE(c.features.contains(Feature::kAlibi) && c.features.contains(Feature::kBias)) << "declaration " << i;
    }
    merge += c.merge;
    // split_invariance's splits: an explicit mask hides the keys of other parts, LSE weighs them.
    merge_with_splits += c.merge && c.declares(Feature::kExplicitMask) && c.lse() && c.forward();
    // The packed layout (ABI 2.8) with a forward and float32 storage, its paths on the contract's tile.
    forwards += c.forward();
    if (c.packed) {
      ++packed;
      EXPECT_TRUE(c.forward() && packed_storage(c)) << "declaration " << i;
      for (const PathPredicate& path : c.paths) EXPECT_EQ(path.key_tile, 0) << "declaration " << i;
    }
    EXPECT_EQ(draw_declaration(1, i), c) << "declaration " << i << " is not reproducible";
    // selfcheck serves each model through the C ABI too: the descriptor must carry it unchanged.
    try {
      EXPECT_EQ(capabilities_from_descriptor(descriptor_from_capabilities(c, "model")), c) << "declaration " << i;
    } catch (const std::invalid_argument& e) {
      ADD_FAILURE() << "declaration " << i << ": " << e.what();
    }
  }
  // NOLINTNEXTLINE(bugprone-integer-division): whole shares of n, as the counts are
  EXPECT_NEAR(backward, n / 6, n / 24);
  EXPECT_GT(evicting, n / 40);
  EXPECT_GT(paged, n / 40);
  EXPECT_GT(paths, n / 10);
  EXPECT_GT(fp8, n / 40);
  EXPECT_GT(value_widths, n / 10);
  EXPECT_GT(alibi_or_bias, n / 40);
  // NOLINTNEXTLINE(bugprone-integer-division): whole shares, as the counts are
  EXPECT_NEAR(tiled_paths, declared_paths / 2, declared_paths / 8);
  EXPECT_GT(merge, n / 10);
  EXPECT_GT(merge_with_splits, n / 20);
  EXPECT_NEAR(packed, forwards / 6, forwards / 24);
}

}  // namespace
}  // namespace attest
