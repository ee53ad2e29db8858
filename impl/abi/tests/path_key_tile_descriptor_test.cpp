// ABI 2.7: each declared path's key tile crosses the protocol (its own section after 2.4's) and
// the C descriptor (attest_path_predicate.key_tile); a 2.6 descriptor means every path's tile is the
// contract's; a count other than the declared paths', or a tile out of range, is refused.
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "attest/abi/abi_adapter.h"

namespace attest {
namespace {

Capabilities two_paths(int per_key, int by_64) {
  Capabilities c;
  PathPredicate odd{.path = "per-key", .k_len_multiple = 2, .k_len_not_multiple = true};
  odd.key_tile = per_key;
  PathPredicate even{.path = "by-64", .k_len_multiple = 2};
  even.key_tile = by_64;
  c.paths = {odd, even};
  return c;
}

// Only its declaration is read: the adapter builds the C descriptor from it.
class DeclarationOnly final : public Kernel {
 public:
  explicit DeclarationOnly(Capabilities c) : caps_(std::move(c)) {}
  std::string name() const override { return "two-tiles"; }
  Capabilities capabilities() const override { return caps_; }
  void forward(const Problem&, std::span<float>, std::span<float>) const override {
    throw std::logic_error("not called: the test reads the descriptor only");
  }

 private:
  Capabilities caps_;
};

protocol::Descriptor round_trip(const protocol::Descriptor& d) {
  protocol::Writer w;
  protocol::write_descriptor(w, d);
  protocol::Reader r(w.bytes());
  return protocol::read_descriptor(r);
}

TEST(PathKeyTileDescriptor, TilesCrossTheProtocolAndTheCDescriptor) {
  const Capabilities c = two_paths(1, 64);
  const protocol::Descriptor d = descriptor_from_capabilities(c, "two-tiles");
  EXPECT_EQ(d.declared_key_tiles, (std::vector<std::int32_t>{1, 64}));
  const Capabilities back = capabilities_from_descriptor(round_trip(d));
  ASSERT_EQ(back.paths.size(), 2u);
  EXPECT_EQ(back.paths[0].key_tile, 1);
  EXPECT_EQ(back.paths[1].key_tile, 64);
  EXPECT_EQ(back.paths[1].summary(), "by-64: Tk % 2 = 0 (key tile 64)");
  // Through the C struct the kernel host reads: the adapter writes each predicate's key_tile.
  const AbiAdapter adapter(std::make_unique<DeclarationOnly>(c));
  const attest_kernel_v2& k = *adapter.descriptor();
  ASSERT_EQ(k.path_predicate_count, 2);
  EXPECT_EQ(k.path_predicates[0].key_tile, 1);
  EXPECT_EQ(k.path_predicates[1].key_tile, 64);
}

TEST(PathKeyTileDescriptor, WithoutTilesTheSectionIsAbsentAndReadsAsZero) {
  const protocol::Descriptor d = descriptor_from_capabilities(two_paths(0, 0), "no-tiles");
  EXPECT_TRUE(d.declared_key_tiles.empty());
  protocol::Writer w;
  protocol::write_descriptor(w, d);
  protocol::Writer with_tiles;
  protocol::write_descriptor(with_tiles, descriptor_from_capabilities(two_paths(0, 64), "tiles"));
  EXPECT_LT(w.bytes().size(), with_tiles.bytes().size());  // a 2.6 reader still loads it
  for (const PathPredicate& p : capabilities_from_descriptor(round_trip(d)).paths) EXPECT_EQ(p.key_tile, 0);
}

TEST(PathKeyTileDescriptor, BadTilesAreRefused) {
  protocol::Descriptor d = descriptor_from_capabilities(two_paths(1, 64), "bad");
  d.declared_key_tiles = {1};
  protocol::Writer w;
  protocol::write_descriptor(w, d);
  protocol::Reader r(w.bytes());
  EXPECT_THROW(protocol::read_descriptor(r), protocol::ProtocolError);
  d.declared_key_tiles = {1, 5000};
  try {
    capabilities_from_descriptor(d);
    ADD_FAILURE() << "a key tile of 5000 accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("key_tile"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace attest
