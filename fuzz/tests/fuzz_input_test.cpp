// The fuzz decoder: bounded sizes, valid problems, seeds that decode as written, and
// controls that live apart from the data.
#include <gtest/gtest.h>

#include <filesystem>
#include <random>
#include <set>

#include "fuzz_input.h"
#include "fuzz_targets.h"
#include "attest/mutants.h"

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

TEST(FuzzInput, AnyBytesGiveABoundedValidProblem) {
  std::mt19937_64 rng(7);
  for (int n = 0; n < 2000; ++n) {
    std::vector<std::uint8_t> bytes(rng() % 300);
    for (auto& b : bytes) b = static_cast<std::uint8_t>(rng());
    for (Flavor f : {Flavor::kGeneral, Flavor::kMasks, Flavor::kOverflow, Flavor::kDecode}) {
      const FuzzCase c = decode_input(bytes.data(), bytes.size(), f);
      ASSERT_NO_THROW(c.problem.validate());
      EXPECT_LE(c.problem.shape.q_len, kMaxLength);
      EXPECT_LE(c.problem.shape.k_len, kMaxLength);
      if (f == Flavor::kDecode) {
        int total = 0;
        for (int k : c.chunks) total += k;
        EXPECT_EQ(total, c.problem.shape.k_len);
      }
    }
  }
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
