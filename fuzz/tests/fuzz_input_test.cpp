// The fuzz decoder: bounded sizes, valid problems, seeds that decode as written, and
// controls that live apart from the data.
#include "fuzz_input.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <random>
#include <set>

#include "attest/mutants/mutants.h"
#include "fuzz_targets.h"

namespace attest::fuzz {
namespace {

Controls sample() {
  Controls c;
  c.batch = 2, c.head_config = 3, c.q_len = 7, c.k_len = 33, c.head_dim = 6, c.value_dim = 5;
  c.flags = kCausal | kWindow | kKeyPadding;
  c.window = 9;  // queries sit at 26..32: each sees up to 9 keys, the last three padded in batch 0
  c.kv_valid = {30, 0};
  c.q_valid = {7, 7};
  return c;
}

TEST(FuzzInput, EncodedControlsDecodeAsWritten) {
  const std::vector<std::int16_t> values = {8192, -4096, 100};
  const FuzzCase c = decode_input(encode_input(sample(), values, Flavor::kGeneral).data(),
                                  encode_input(sample(), values, Flavor::kGeneral).size(), Flavor::kGeneral);
  const Shape& s = c.problem.shape;
  EXPECT_EQ(s.batch, 2);
  EXPECT_EQ(s.heads, 4);
  EXPECT_EQ(s.kv_heads, 2);
  EXPECT_EQ(s.q_len, 7);
  EXPECT_EQ(s.k_len, 33);
  EXPECT_EQ(s.head_dim, 6);
  EXPECT_EQ(s.value_dim, 5);
  EXPECT_TRUE(c.problem.mask.causal);
  EXPECT_EQ(c.problem.mask.window, 9);
  EXPECT_EQ(c.problem.mask.kv_valid, (std::vector<int>{30, 0}));
  EXPECT_FLOAT_EQ(c.problem.q[0], 1.0f);  // 8192 / 8192 at magnitude 1
  EXPECT_FLOAT_EQ(c.problem.q[1], -0.5f);
}

TEST(FuzzInput, ShapeMutationsLeaveDataInPlace) {
  const std::vector<std::int16_t> values = {1000, 2000, 3000, 4000};
  std::vector<std::uint8_t> bytes = encode_input(sample(), values, Flavor::kGeneral);
  const FuzzCase before = decode_input(bytes.data(), bytes.size(), Flavor::kGeneral);
  bytes[bytes.size() - 3] ^= 0x5;  // the q_len control byte (third from the end)
  const FuzzCase after = decode_input(bytes.data(), bytes.size(), Flavor::kGeneral);
  EXPECT_NE(before.problem.shape.q_len, after.problem.shape.q_len);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(before.problem.q[i], after.problem.q[i]) << i;
}

// The reach of a kernel with these tiles declaring every score modifier (or none).
Reach reach_with(int query_tile, int key_tile, bool modifiers) {
  Capabilities caps;
  caps.contract.query_tile = query_tile, caps.contract.key_tile = key_tile;
  if (modifiers) caps.features = caps.features | FeatureSet::of_kind(FeatureKind::kModifier);
  return reach_of(caps);
}

TEST(FuzzInput, AnyBytesGiveABoundedValidProblem) {
  std::mt19937_64 rng(7);
  const Reach reaches[] = {reach_with(0, 0, false), reach_with(128, 64, true), reach_with(0, 16, true),
                           reach_with(32, 32, false)};
  for (int n = 0; n < 1000; ++n) {
    std::vector<std::uint8_t> bytes(rng() % 300);
    for (auto& b : bytes) b = static_cast<std::uint8_t>(rng());
    for (const Reach& reach : reaches) {
      for (Flavor f : {Flavor::kGeneral, Flavor::kMasks, Flavor::kOverflow, Flavor::kDecode}) {
        const FuzzCase c = decode_input(bytes.data(), bytes.size(), f, reach);
        ASSERT_NO_THROW(c.problem.validate());
        const bool extended = decode_controls(bytes.data(), bytes.size(), f).flags & kExtended;
        const int limit = extended ? reach.max_length : kMaxLength;
        EXPECT_LE(c.problem.shape.q_len, limit);
        EXPECT_LE(c.problem.shape.k_len, limit);
        const Shape& s = c.problem.shape;
        const std::int64_t slices = std::int64_t(s.batch) * s.heads * s.q_len * s.k_len;
        if (extended) {
          EXPECT_LE(slices, std::max<std::int64_t>(kSliceBudget, 2 * limit * limit));
        }
        if (!extended) {
          EXPECT_EQ(features_used_by(c.problem) & FeatureSet::of_kind(FeatureKind::kModifier), FeatureSet{});
        }
        if (f == Flavor::kDecode) {
          int total = 0;
          for (int k : c.chunks) total += k;
          EXPECT_EQ(total, c.problem.shape.k_len);
        }
      }
    }
  }
}

TEST(FuzzInput, CapsFollowTheTiles) {
  EXPECT_EQ(reach_with(128, 64, false).max_length, 258);       // builtin:tiled: twice the largest tile, +2
  EXPECT_EQ(reach_with(32, 32, false).max_length, 66);         // the tiled mutants
  EXPECT_EQ(reach_with(0, 16, false).max_length, kMaxLength);  // decode's 16-token pages: the basic cap covers 2 pages
  EXPECT_EQ(reach_with(32, 0, false).key_tile, 32);            // blocked: query blocks only, the key tile follows
  EXPECT_EQ(reach_with(0, 0, false).max_length, 2 * kDefaultTile + 2);
  EXPECT_EQ(reach_with(4096, 4096, false).max_length, 1026);  // bounded: one input stays under seconds
}

TEST(FuzzInput, LengthPicksNameTileEdges) {
  for (int m : {1, 2})
    for (int delta : {-1, 0, 1}) {
      EXPECT_EQ(extended_length(tile_edge_pick(m, delta), 5, 128, 258), m * 128 + delta);
      EXPECT_EQ(extended_length(tile_edge_pick(m, delta), 5, 32, 66), m * 32 + delta);
    }
  EXPECT_EQ(extended_length(tile_edge_pick(4, 1), 5, 64, 258), 257);
  EXPECT_EQ(extended_length(kSmallPick, 5, 128, 258), 5);
  EXPECT_EQ(extended_length(1, 5, 128, 258), 5);
  std::set<int> anywhere;  // pick % 4 == 3 with every basic length: every length up to the cap
  for (int pick = 3; pick < 256; pick += 4)
    for (int small = 1; small <= kMaxLength; ++small) anywhere.insert(extended_length(pick, small, 128, 258));
  EXPECT_EQ(anywhere.size(), 258u);
  EXPECT_EQ(*anywhere.begin(), 1);
  EXPECT_EQ(*anywhere.rbegin(), 258);
  EXPECT_EQ(valid_length(0, 10, 10, 200, 64), 200);  // all valid stays all valid
  EXPECT_EQ(valid_length(0, 0, 10, 200, 64), 0);
  EXPECT_EQ(valid_length(0, 5, 10, 200, 64), 100);
  EXPECT_EQ(valid_length(tile_edge_pick(3, 1), 5, 10, 200, 64), 193);
  EXPECT_EQ(valid_length(tile_edge_pick(1, -1), 5, 10, 20, 64), 20);  // clamped to the length
}

// Random bytes on builtin:tiled's reach: second query and key tiles are reached, small shapes
// stay common, and tile edges come up far more often than uniform sizes would give them.
TEST(FuzzInput, RandomInputsReachTheSecondTilesAndStaySmallOften) {
  const Reach tiled = reach_with(128, 64, true);
  std::mt19937_64 rng(11);
  int q_beyond = 0, k_beyond = 0, small = 0, edges = 0;
  const int n = 4000;
  for (int i = 0; i < n; ++i) {
    std::vector<std::uint8_t> bytes(rng() % 300);
    for (auto& b : bytes) b = static_cast<std::uint8_t>(rng());
    const Shape s = decode_input(bytes.data(), bytes.size(), Flavor::kGeneral, tiled).problem.shape;
    q_beyond += s.q_len > 128, k_beyond += s.k_len > 128;
    small += s.q_len <= kMaxLength && s.k_len <= kMaxLength;
    edges += s.q_len > 64 && std::abs((s.q_len + 1) % 128 - 1) <= 1;
  }
  EXPECT_GT(q_beyond, n / 20);
  EXPECT_GT(k_beyond, n / 20);
  EXPECT_GT(small, n / 2);
  EXPECT_GT(edges, n / 20);
}

Controls extended_sample() {
  Controls c = sample();
  c.flags |= kExtended;
  c.extended = kSoftcapOn | kAlibiOn | kBiasOn | kSinksOn | kBiasPerHead;
  c.q_size = tile_edge_pick(1, 1), c.k_size = tile_edge_pick(1, -1), c.window_size = kSmallPick;
  c.kv_valid_size = {0, 0}, c.q_valid_size = {0, 0};
  c.softcap = 255, c.slope_kinds = 0b11100100, c.slope_exponent = 192;
  c.bias_exponent = 51, c.bias_minus_inf = 64, c.bias_seed = 7;
  c.sink_exponent = 255, c.sink_kinds = 0b11100100;
  return c;
}

TEST(FuzzInput, ExtendedControlsDecodeAsWritten) {
  const Controls c = extended_sample();
  const std::vector<std::uint8_t> bytes = encode_input(c, {8192}, Flavor::kGeneral);
  const Controls read = decode_controls(bytes.data(), bytes.size(), Flavor::kGeneral);
  EXPECT_EQ(read.flags, c.flags);
  EXPECT_EQ(read.extended, c.extended);
  EXPECT_EQ(read.q_size, c.q_size);
  EXPECT_EQ(read.k_size, c.k_size);
  EXPECT_EQ(read.bias_seed, c.bias_seed);
  EXPECT_EQ(read.sink_kinds, c.sink_kinds);

  const FuzzCase tiled = decode_input(bytes.data(), bytes.size(), Flavor::kGeneral, reach_with(128, 64, true));
  const Problem& p = tiled.problem;
  EXPECT_EQ(p.shape.q_len, 129);                                          // 1 query tile + 1
  EXPECT_EQ(p.shape.k_len, 63);                                           // 1 key tile - 1
  EXPECT_EQ(p.mask.window, 9);                                            // the basic window
  EXPECT_EQ(p.mask.kv_valid, (std::vector<int>{int(30L * 63 / 33), 0}));  // scaled to the new Tk
  EXPECT_DOUBLE_EQ(*p.modifiers.softcap, 1e4);
  EXPECT_EQ(p.modifiers.alibi_slopes.size(), 4u);
  EXPECT_EQ(p.modifiers.alibi_slopes[0], 0.0f);  // kinds 0, +geometric, -geometric, +magnitude
  EXPECT_GT(p.modifiers.alibi_slopes[1], 0.0f);
  EXPECT_LT(p.modifiers.alibi_slopes[2], 0.0f);
  EXPECT_EQ(p.modifiers.alibi_slopes[3], 1.0f);  // 2^(192 / 32 - 6)
  EXPECT_FALSE(p.modifiers.bias_per_batch);
  EXPECT_TRUE(p.modifiers.bias_per_head);
  EXPECT_EQ(p.modifiers.bias.size(), std::size_t(4) * 129 * 63);
  const auto minus_inf = std::count(p.modifiers.bias.begin(), p.modifiers.bias.end(), -INFINITY);
  EXPECT_GT(minus_inf, 0);  // a quarter, about
  EXPECT_LT(minus_inf, std::ptrdiff_t(p.modifiers.bias.size() / 2));
  EXPECT_EQ(p.modifiers.sinks, (std::vector<float>{0.0f, 1e4f, -1e4f, -1e4f}));
  EXPECT_NO_THROW(p.validate());

  // The same bytes on a 32x32 kernel with no modifiers: its own tile edges, no modifier drawn.
  const Problem q = decode_input(bytes.data(), bytes.size(), Flavor::kGeneral, reach_with(32, 32, false)).problem;
  EXPECT_EQ(q.shape.q_len, 33);
  EXPECT_EQ(q.shape.k_len, 31);
  EXPECT_EQ(features_used_by(q) & FeatureSet::of_kind(FeatureKind::kModifier), FeatureSet{});
  // Decode sessions take no bias.
  const Problem d = decode_input(encode_input(c, {}, Flavor::kDecode).data(),
                                 encode_input(c, {}, Flavor::kDecode).size(), Flavor::kDecode, reach_with(0, 16, true))
                        .problem;
  EXPECT_TRUE(d.modifiers.bias.empty());
  EXPECT_FALSE(d.modifiers.sinks.empty());
}

// Each integer mask term of the feature table is reachable by its bit of the integer_terms
// control (a term added later needs no decoder change); without kMoreTerms the control is not read,
// so inputs written before it decode as they did.
TEST(FuzzInput, EveryIntegerMaskTermIsReachable) {
  const std::vector<const FeatureInfo*>& terms = integer_mask_terms();
  for (std::size_t k = 0; k < terms.size(); ++k) {
    Controls c = sample();
    c.flags = kExtended;
    c.extended = kMoreTerms;
    c.kv_valid_size = {0, 0}, c.q_valid_size = {0, 0};
    c.integer_terms = 1 << k;
    const std::vector<std::uint8_t> bytes = encode_input(c, {1, 2, 3}, Flavor::kGeneral);
    const Problem p = decode_input(bytes.data(), bytes.size(), Flavor::kGeneral).problem;
    for (std::size_t other = 0; other < terms.size(); ++other)
      EXPECT_EQ((p.mask.*terms[other]->parameter).has_value(), other == k)
          << terms[k]->name << " on, " << terms[other]->name;
    EXPECT_EQ(p.mask.*terms[k]->parameter, c.window) << terms[k]->name;
    EXPECT_NO_THROW(p.validate());
  }
  Controls old = sample();
  old.flags = kExtended;
  old.kv_valid_size = {0, 0}, old.q_valid_size = {0, 0};
  old.integer_terms = 0xff;  // not written: kMoreTerms is clear
  const std::vector<std::uint8_t> bytes = encode_input(old, {1, 2, 3}, Flavor::kGeneral);
  EXPECT_EQ(decode_controls(bytes.data(), bytes.size(), Flavor::kGeneral).integer_terms, 0);
}

// Over many inputs the modifiers cover the ranges a real model uses: caps 1 to 1e4, slopes of both
// signs and zero, -inf bias entries, sinks from -1e4 to 1e4.
TEST(FuzzInput, ModifierRanges) {
  const Reach reach = reach_with(32, 32, true);
  std::mt19937_64 rng(5);
  double cap_lo = INFINITY, cap_hi = 0, sink_lo = INFINITY, sink_hi = -INFINITY;
  bool slope_pos = false, slope_neg = false, slope_zero = false, bias_inf = false;
  for (int n = 0; n < 3000; ++n) {
    std::vector<std::uint8_t> bytes(rng() % 200);
    for (auto& b : bytes) b = static_cast<std::uint8_t>(rng());
    const ScoreModifiers m = decode_input(bytes.data(), bytes.size(), Flavor::kGeneral, reach).problem.modifiers;
    if (m.softcap) cap_lo = std::min(cap_lo, *m.softcap), cap_hi = std::max(cap_hi, *m.softcap);
    for (float x : m.alibi_slopes) slope_pos |= x > 0, slope_neg |= x < 0, slope_zero |= x == 0;
    for (float x : m.bias) bias_inf |= x == -INFINITY;
    for (float x : m.sinks) sink_lo = std::min<double>(sink_lo, x), sink_hi = std::max<double>(sink_hi, x);
  }
  EXPECT_GE(cap_lo, 1.0);
  EXPECT_LT(cap_lo, 2.0);
  EXPECT_LE(cap_hi, 1e4);
  EXPECT_GT(cap_hi, 5e3);
  EXPECT_TRUE(slope_pos && slope_neg && slope_zero);
  EXPECT_TRUE(bias_inf);
  EXPECT_GE(sink_lo, -1e4);
  EXPECT_LT(sink_lo, -1e3);
  EXPECT_LE(sink_hi, 1e4);
  EXPECT_GT(sink_hi, 1e3);
}

// With a broken kernel given, each target reports a violation on some seed-like input.
TEST(FuzzTargets, EachTargetCatchesItsMutant) {
  const std::pair<Target, const char*> cases[] = {{Target::kMaskLeak, "mutant:masked_value_times_zero"},
                                                  {Target::kOverflow, "mutant:no_max_subtraction"},
                                                  {Target::kDecode, "mutant:decode_skips_self"},
                                                  {Target::kDifferential, "mutant:drop_partial_tile"}};
  Oracle oracle(32);
  for (auto [target, mutant] : cases) {
    Controls c = sample();
    c.qk_exponent = target == Target::kOverflow ? 12 : 0;
    if (target == Target::kDifferential) c.flags = 0;  // all 33 keys visible: the partial tile matters
    if (target == Target::kDecode) c.chunks = {3, 30};
    const std::vector<std::uint8_t> bytes = encode_input(c, {}, flavor_of(target));
    const auto v = run_target(target, bytes.data(), bytes.size(), kernels_named(mutant), oracle);
    ASSERT_TRUE(v) << target_name(target) << " missed " << mutant;
    EXPECT_EQ(v->kernel, mutant);
  }
}

// Two mutants one after the other in one process (as `attest mutants` and `attest fuzz` run
// them): each run uses the kernel it is given and reports that kernel's own violation. The
// kernel list was once fixed at first use from ATTEST_FUZZ_KERNEL, so the second run named the
// first mutant; the variable is set here to a correct kernel to show it is not read.
TEST(FuzzTargets, TwoMutantsInOneProcessEachGetTheirOwnViolation) {
  setenv("ATTEST_FUZZ_KERNEL", "loop", 1);
  Oracle oracle(32);
  std::vector<Violation> found;
  for (const char* mutant : {"mutant:causal_sees_next", "mutant:ignore_key_padding"}) {
    for (Target target : {Target::kMaskLeak, Target::kDifferential}) {
      const std::vector<std::uint8_t> bytes = encode_input(sample(), {}, flavor_of(target));
      const auto v = run_target(target, bytes.data(), bytes.size(), kernels_named(mutant), oracle);
      ASSERT_TRUE(v) << target_name(target) << " missed " << mutant;
      EXPECT_EQ(v->kernel, mutant) << target_name(target);
      found.push_back(*v);
    }
  }
  // Their own violations: different explanations, not the first mutant's repeated.
  EXPECT_NE(found[0].verdict.detail, found[2].verdict.detail);
  EXPECT_NE(found[1].verdict.detail, found[3].verdict.detail);
  // And the correct kernel passes the same input.
  for (Target target : {Target::kMaskLeak, Target::kDifferential}) {
    const std::vector<std::uint8_t> bytes = encode_input(sample(), {}, flavor_of(target));
    EXPECT_FALSE(run_target(target, bytes.data(), bytes.size(), kernels_named("loop"), oracle)) << target_name(target);
  }
  unsetenv("ATTEST_FUZZ_KERNEL");
}

}  // namespace
}  // namespace attest::fuzz

namespace attest::fuzz {
namespace {

// The table names every target and a file builds each: adding one to either alone is caught.
TEST(FuzzTargets, TableAndTargetFilesAgree) {
  namespace fs = std::filesystem;
  std::set<std::string> files, rows;
  for (const auto& entry : fs::directory_iterator(fs::path(ATTEST_SOURCE_DIR) / "fuzz/targets"))
    if (entry.path().extension() == ".cpp") files.insert(entry.path().stem().string());
  for (const TargetInfo& t : target_table()) {
    rows.insert(t.name);
    EXPECT_EQ(target_name(t.target), std::string(t.name));
    EXPECT_NO_THROW(find_mutant(t.mutant)) << t.name;
  }
  EXPECT_EQ(files, rows);
}

}  // namespace
}  // namespace attest::fuzz

namespace attest::fuzz {
namespace {

// builtin:tiled (128 x 64 tiles) with a bug past its first tiles, for the test below: keys past
// the second key tile dropped (a split-K loop that stops after two tiles), or, when Tq > 128, the
// rows of the last partial query tile never written (a grid of Tq / 128 query tiles, rounded down).
class BeyondFirstTiles final : public Kernel {
 public:
  enum class Bug { kThirdKeyTileDropped, kPartialQueryTileUnwritten };
  explicit BeyondFirstTiles(Bug bug) : inner_(make_kernel("tiled")), bug_(bug) {}
  std::string name() const override {
    return bug_ == Bug::kThirdKeyTileDropped ? "test:third_key_tile_dropped" : "test:partial_query_tile_unwritten";
  }
  Capabilities capabilities() const override { return inner_->capabilities(); }
  void forward(const Problem& p, std::span<float> o, std::span<float> lse) const override {
    const int tiles_q = inner_->capabilities().contract.query_tile, tiles_k = inner_->capabilities().contract.key_tile;
    if (bug_ == Bug::kThirdKeyTileDropped && p.shape.k_len > 2 * tiles_k) {
      Problem cut = p;
      if (cut.mask.kv_valid.empty()) cut.mask.kv_valid.assign(p.shape.batch, p.shape.k_len);
      for (int& n : cut.mask.kv_valid) n = std::min(n, 2 * tiles_k);
      return inner_->forward(cut, o, lse);
    }
    inner_->forward(p, o, lse);
    const Shape& s = p.shape;
    if (bug_ != Bug::kPartialQueryTileUnwritten || s.q_len <= tiles_q) return;
    for (int bh = 0; bh < s.batch * s.heads; ++bh)
      for (int i = s.q_len / tiles_q * tiles_q; i < s.q_len; ++i)
        std::fill_n(&o[(std::size_t(bh) * s.q_len + i) * s.value_dim], s.value_dim, 0.0f);
  }

 private:
  std::unique_ptr<Kernel> inner_;
  Bug bug_;
};

// Random inputs (as certify's fuzz stage draws them) until fuzz_differential reports a violation;
// with `basic_only`, inputs with the extension are passed over (the decoder before it). Returns
// how many inputs ran, or -1 when none of `budget` was caught.
int inputs_until_caught(const Kernel& kernel, bool basic_only, int budget) {
  std::mt19937_64 rng(3);
  Oracle oracle(4);
  for (int n = 1; n <= budget;) {
    std::vector<std::uint8_t> bytes(rng() % 512);
    for (auto& b : bytes) b = static_cast<std::uint8_t>(rng());
    if (basic_only && (decode_controls(bytes.data(), bytes.size(), Flavor::kGeneral).flags & kExtended)) continue;
    if (evaluate_target(Target::kDifferential, bytes.data(), bytes.size(), kernel, oracle).violation) return n;
    ++n;
  }
  return -1;
}

// Fuzzing reaches builtin:tiled's second tiles. A bug only in the third key tile, or only
// when Tq > 128, is out of reach of basic inputs (lengths up to 40) and caught by random inputs
// (with this seed after about 80 each: most inputs mask or pad the keys and rows in question, or stay small).
TEST(FuzzReach, BugsPastTheFirstTilesOfA128x64KernelAreCaught) {
  for (auto bug : {BeyondFirstTiles::Bug::kThirdKeyTileDropped, BeyondFirstTiles::Bug::kPartialQueryTileUnwritten}) {
    const BeyondFirstTiles kernel(bug);
    const int caught = inputs_until_caught(kernel, false, 1000);
    std::cout << kernel.name() << ": caught after " << caught << " random inputs\n";
    EXPECT_GT(caught, 0) << kernel.name();
    EXPECT_EQ(inputs_until_caught(kernel, true, 1000), -1) << kernel.name() << ": basic inputs reach it";
  }
}

}  // namespace
}  // namespace attest::fuzz
