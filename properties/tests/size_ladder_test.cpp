#include "attest/properties/size_ladder.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "attest/kernels/builtin_kernels.h"
#include "attest/kernels/faults.h"
#include "attest/mutants/mutants.h"

namespace attest {
namespace {

bool has(const std::vector<int>& v, int x) { return std::find(v.begin(), v.end(), x) != v.end(); }

// Lengths sit on both sides of 1, 2 and 3 times each tile and on the powers of two up to the maximum.
TEST(SizeLadder, LengthsSurroundEachTileAndClimbInPowersOfTwo) {
  const auto tiled = make_tiled_kernel({128, 64});
  const std::vector<int> lengths = ladder_lengths(tiled->capabilities(), {.max_len = 4096});
  for (int t : {63, 64, 65, 127, 128, 129, 191, 192, 193, 255, 256, 257, 383, 384, 385, 1, 2, 512, 4096})
    EXPECT_TRUE(has(lengths, t)) << t;
  EXPECT_FALSE(has(lengths, 8192));
  EXPECT_TRUE(std::is_sorted(lengths.begin(), lengths.end()));
  const auto decode = make_decode_kernel(16);
  EXPECT_TRUE(has(ladder_lengths(decode->capabilities(), {.max_len = 64}), 47));  // 3 pages - 1
  EXPECT_EQ(ladder_lengths(decode->capabilities(), {.max_len = 64, .lengths = {5, 70, 9}}), (std::vector<int>{5, 9}));
}

// What attest builds for the long stage stays small even for a kernel that takes only a dense
// mask and a bias: its cases carry mask terms or nothing, never a Tq x Tk mask or bias,
// and each case's inputs fit 1 GiB at the thorough budget's 65536 keys.
TEST(SizeLadder, LongCasesNeverBuildDenseMasksOrBiases) {
  Capabilities dense_only;
  dense_only.features = {Feature::kExplicitMask, Feature::kBias, Feature::kKeyPadding, Feature::kGqa, Feature::kLse};
  const SizeOptions thorough{.max_len = 65536, .square_limit = 16384, .sampled_rows = 128};
  const std::vector<SizedCase> cases = long_cases(dense_only, thorough);
  ASSERT_FALSE(cases.empty());
  for (const SizedCase& c : cases) {
    const Problem& p = c.problem;
    EXPECT_TRUE(p.mask.explicit_mask.empty()) << c.name;
    EXPECT_TRUE(p.modifiers.bias.empty()) << c.name;
    const std::size_t bytes = 4 * (p.q.size() + p.k.size() + p.v.size() + p.o_size());
    EXPECT_LE(bytes, std::size_t{1} << 30) << c.name;
  }
}

// A sample keeps the first and last rows and both sides of the tile edges.
TEST(SizeLadder, SampledRowsHoldTheEdges) {
  const auto tiled = make_tiled_kernel({128, 64});
  const std::vector<SizedCase> cases = long_cases(tiled->capabilities(), {.max_len = 4096, .sampled_rows = 64});
  ASSERT_FALSE(cases.empty());
  for (const SizedCase& c : cases) {
    if (c.problem.shape.q_len <= 64) {
      EXPECT_TRUE(c.rows.empty()) << c.name;
      continue;
    }
    EXPECT_GE(c.rows.size(), 64u) << c.name;
    EXPECT_TRUE(std::is_sorted(c.rows.begin(), c.rows.end()));
    const int tq = c.problem.shape.q_len;
    for (int i : {0, tq - 1, 127, 128, 255, 256}) EXPECT_TRUE(has(c.rows, i)) << c.name << " row " << i;
  }
}

// The built-in kernels pass every ladder case and the long ones, decode sessions included.
TEST(SizeLadder, BuiltInKernelsPassLadderAndLongCases) {
  const SizeOptions options{
      .max_len = 2048, .full_rows_limit = 256, .square_limit = 1024, .sampled_rows = 16, .jobs = 2};
  for (const auto& kernel : {make_tiled_kernel({128, 64}), make_decode_kernel(16)}) {
    std::vector<SizedCase> cases = ladder_cases(kernel->capabilities(), options);
    const std::vector<SizedCase> longer = long_cases(kernel->capabilities(), options);
    cases.insert(cases.end(), longer.begin(), longer.end());
    int sessions = 0, sampled = 0;
    for (const SizedCase& c : cases) {
      const Verdict v = check_sized_case(c, *kernel, options.jobs);
      EXPECT_TRUE(v.passed && v.exercised) << kernel->name() << " " << c.name << ": " << v.detail;
      sessions += !c.decode_chunks.empty();
      sampled += !c.rows.empty();
    }
    EXPECT_GT(sampled, 0);
    if (kernel->capabilities().decode()) {
      EXPECT_GT(sessions, 0);
    }
  }
}

// Bugs beyond the first tiles of a 128 x 64 kernel are found by the ladder: the last partial key
// tile dropped, the third key tile reading a stale buffer, rows past the first query tile
// masked from their index within the tile. Lengths up to 72 (the generators') never show them.
TEST(SizeLadder, LadderFindsBugsPastTheFirstTiles) {
  for (const char* name : {"mutant:third_key_tile_stale", "mutant:query_tile_local_positions"}) {
    const auto broken = make_in_process_kernel(name);
    int failures = 0, short_failures = 0;
    for (const SizedCase& c : ladder_cases(broken->capabilities(), {.max_len = 512})) {
      const bool failed = !check_sized_case(c, *broken, 1).passed;
      failures += failed;
      short_failures += failed && c.problem.shape.q_len <= 72 && c.problem.shape.k_len <= 72;
    }
    EXPECT_GT(failures, 0) << name;
    EXPECT_EQ(short_failures, 0) << name;
  }
  const auto dropped = make_faulty_tiled_kernel({128, 64}, {.drop_partial_tile = true}, "drop_partial_tile");
  int failures = 0;
  for (const SizedCase& c : ladder_cases(dropped->capabilities(), {.max_len = 256}))
    failures += !check_sized_case(c, *dropped, 1).passed;
  EXPECT_GT(failures, 0);
}

// The model kernel on a sample of rows computes those rows bit for bit as the whole run does.
TEST(SizeLadder, ModelRowsEqualTheWholeRun) {
  Precision f16;
  f16.scores = f16.accumulator = Scalar::kF16;
  for (const SizedCase& c :
       long_cases(make_model_kernel(f16)->capabilities(),
                  {.max_len = 1024, .full_rows_limit = 256, .square_limit = 512, .sampled_rows = 8})) {
    if (c.rows.empty()) continue;
    const Outputs whole = run_forward(*make_model_kernel(f16), c.problem);
    const Outputs rows = run_model_rows(f16, c.problem, c.rows);
    const Shape& s = c.problem.shape;
    for (int bh = 0; bh < s.batch * s.heads; ++bh)
      for (int i = 0; i < s.q_len; ++i) {
        const std::size_t row = std::size_t(bh) * s.q_len + i;
        const bool sampled = has(c.rows, i);
        for (int col = 0; col < s.value_dim; ++col) {
          const float a = whole.o[row * s.value_dim + col], b = rows.o[row * s.value_dim + col];
          if (sampled)
            ASSERT_TRUE(a == b || (std::isnan(a) && std::isnan(b))) << c.name << " row " << i;
          else
            ASSERT_TRUE(std::isnan(b)) << c.name << " row " << i << " was not asked for";
        }
      }
  }
}

// A kernel rounding to bf16 everywhere (scores, P, the accumulator) has a vacuous bound on long
// rows; gate 2 then judges each sampled case against the model kernel on the same rows: the
// correct kernel's cases are evidence (it was INSUFFICIENT by construction), and one
// that adds 100 to O[0] fails there.
TEST(SizeLadder, LongCasesWithAVacuousBoundAreJudgedByGateTwo) {
  class Bf16Everywhere final : public Kernel {
   public:
    explicit Bf16Everywhere(float offset) : offset_(offset) {
      precision_.q = precision_.k = precision_.v = precision_.o = Scalar::kBF16;
      precision_.scores = precision_.p = precision_.accumulator = Scalar::kBF16;
      inner_ = make_model_kernel(precision_);
    }
    std::string name() const override { return "bf16-everywhere"; }
    Capabilities capabilities() const override { return inner_->capabilities(); }
    void forward(const Problem& p, std::span<float> o, std::span<float> lse) const override {
      inner_->forward(p, o, lse);
      o[0] += offset_;
    }

   private:
    Precision precision_;
    std::unique_ptr<Kernel> inner_;
    float offset_;
  };
  const SizeOptions options{
      .max_len = 2048, .full_rows_limit = 256, .square_limit = 512, .sampled_rows = 16, .jobs = 2};
  const Bf16Everywhere correct(0.0f), shifted(100.0f);
  int judged_by_gate_two = 0, caught = 0;
  for (const SizedCase& c : long_cases(correct.capabilities(), options)) {
    const Verdict good = check_sized_case(c, correct, options.jobs);
    EXPECT_TRUE(good.passed && good.exercised) << c.name << ": " << good.detail;
    judged_by_gate_two += good.detail.find("gate 2") != std::string::npos;
    const Verdict bad = check_sized_case(c, shifted, options.jobs);
    caught += !bad.passed;
  }
  EXPECT_GT(judged_by_gate_two, 0);
  EXPECT_GT(caught, 0);
}

}  // namespace
}  // namespace attest
