// A key tile per declared path (ABI 2.7): one kernel, two paths, one rescaling per key (tile 1),
// one tiling keys by 64. Declared with each path's tile it is CERTIFIED; a bug past the third
// tile of the 64-key path is NOT CERTIFIED because attest draws that path's lengths around 64
// (the contract declares no key tile, so nothing else reaches Tk > 128 at this budget).
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "attest/kernels/builtin_kernels.h"
#include "attest/kernels/faults.h"
#include "quick_certification.h"

namespace attest {
namespace {

// Odd Tk: "per-key", the tiled kernel with one key per tile; even Tk: "by-64".
class TwoTileKernel final : public Kernel {
 public:
  TwoTileKernel(int per_key_declared, int by_64_declared, bool stale_third_tile)
      : per_key_(make_tiled_kernel({.block_q = 32, .block_k = 1})),
        by_64_(stale_third_tile
                   ? make_faulty_tiled_kernel({.block_q = 32, .block_k = 64}, {.third_key_tile_stale = true}, "stale")
                   : make_tiled_kernel({.block_q = 32, .block_k = 64})) {
    caps_ = by_64_->capabilities();
    caps_.contract.key_tile = 0;
    // A forward alone: the tiled kernel's backward, merge and decode are not this kernel's.
    caps_.features = caps_.features.minus({Feature::kBackward, Feature::kDecode});
    caps_.merge = false;
    PathPredicate per_key{.path = "per-key", .k_len_multiple = 2, .k_len_not_multiple = true};
    per_key.key_tile = per_key_declared;
    PathPredicate by_64{.path = "by-64", .k_len_multiple = 2};
    by_64.key_tile = by_64_declared;
    caps_.paths = {per_key, by_64};
  }
  std::string name() const override { return "two-tiles"; }
  Capabilities capabilities() const override { return caps_; }
  std::string last_path() const override { return path_; }
  void forward(const Problem& p, std::span<float> o, std::span<float> lse) const override {
    const bool odd = p.shape.k_len % 2 != 0;
    path_ = odd ? "per-key" : "by-64";
    (odd ? per_key_ : by_64_)->forward(p, o, lse);
  }

 private:
  std::unique_ptr<Kernel> per_key_, by_64_;
  Capabilities caps_;
  mutable std::string path_ = "by-64";
};

TEST(PathKeyTile, EachPathDeclaredWithItsTileIsCertified) {
  const TwoTileKernel kernel(1, 64, false);
  const std::vector<std::string> names = blocking_checks(certify_quick(kernel, "two-tiles"));
  EXPECT_TRUE(names.empty()) << ::testing::PrintToString(names);
}

TEST(PathKeyTile, ABugPastTheThirdTileOfItsPathIsNotCertified) {
  const TwoTileKernel kernel(1, 64, true);
  const std::vector<std::string> names = blocking_checks(certify_quick(kernel, "two-tiles-stale"));
  EXPECT_NE(std::find(names.begin(), names.end(), "matches_reference"), names.end()) << ::testing::PrintToString(names);
}

TEST(PathKeyTile, TheBoundUsesThePathsTile) {
  Capabilities caps;
  PathPredicate per_key{.path = "per-key", .k_len_multiple = 2, .k_len_not_multiple = true};
  per_key.key_tile = 1;
  caps.paths = {per_key};
  caps.contract.key_tile = 64;
  Problem odd, even;
  odd.shape.k_len = 65, even.shape.k_len = 64;
  EXPECT_EQ(caps.key_tile_for(odd), 1);
  EXPECT_EQ(caps.key_tile_for(even), 64);
  EXPECT_EQ(caps.key_tiles(), (std::vector<int>{1, 64}));
}

}  // namespace
}  // namespace attest
