// The model kernel serves each declared path under its name, with differently tiled but equally
// exact code: a "per-batch" path a batch entry at a time gives the whole problem's bits. It sums in
// the declared key tiles, so that its error stays within the bound that counts them.
#include "declared_model.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "attest/kernels/kernel.h"
#include "attest/kernels/packed.h"
#include "attest/kernels/path_predicate.h"
#include "attest/properties/compare.h"
#include "attest/properties/oracle.h"
#include "attest/reference/error_bound.h"
#include "certify.h"

namespace attest {
namespace {

// B = 3 with a per-batch key padding and bias: every per-batch input is sliced.
Problem batched() {
  Problem p;
  p.shape = {3, 2, 1, 4, 6, 8, 8};
  p.resize_buffers();
  std::mt19937_64 rng(4);
  std::uniform_real_distribution<float> unit(-2.0f, 2.0f);
  for (auto* v : {&p.q, &p.k, &p.v})
    for (float& x : *v) x = unit(rng);
  p.mask.kv_valid = {6, 3, 5};
  p.modifiers.bias.resize(std::size_t(3) * 2 * 4 * 6);
  for (float& x : p.modifiers.bias) x = unit(rng);
  return p;
}

TEST(DeclaredModel, ServesEachDeclaredPathUnderItsNameExactly) {
  Capabilities declaration;
  declaration.features.insert(Feature::kBias);
  const auto whole = make_declared_model(declaration, "whole");
  PathPredicate per_batch{.path = "per-batch"};
  per_batch.batch = {2, 64};
  PathPredicate short_q{.path = "short-q"};
  short_q.q_len = {1, 2};
  declaration.paths = {short_q, per_batch};
  const auto model = make_declared_model(declaration, "paths");

  const Problem p = batched();
  std::vector<float> o(p.o_size()), lse(p.lse_size()), o_whole(p.o_size()), lse_whole(p.lse_size());
  whole->forward(p, o_whole, lse_whole);
  model->forward(p, o, lse);
  EXPECT_EQ(model->last_path(), "per-batch");
  EXPECT_EQ(o, o_whole);
  EXPECT_EQ(lse, lse_whole);

  Problem one = p;
  one.shape.batch = 1;
  one.q.resize(one.q_size()), one.k.resize(one.k_size()), one.v.resize(one.v_size());
  one.mask.kv_valid = {6};
  one.modifiers.bias.resize(std::size_t(2) * 4 * 6);
  std::vector<float> o1(one.o_size()), lse1(one.lse_size());
  model->forward(one, o1, lse1);
  EXPECT_EQ(model->last_path(), "default");  // no predicate takes B = 1, Tq = 4
  EXPECT_EQ(std::vector<float>(o1.begin(), o1.end()), std::vector<float>(o_whole.begin(), o_whole.begin() + o1.size()));
}

// Seed 7 #185 of selfcheck: a bf16 weight sum over about 1000 keys, with a key tile of 64 declared.
// Summed in one pass it stagnates at 256 (LSE log 256 for log 1000), past the bound, which counts
// 64 keys and a rescale per tile; summed per tile, as the declaration says, it is within it.
TEST(DeclaredModel, SumsInTheDeclaredKeyTiles) {
  Capabilities declaration;
  declaration.precision.accumulator = Scalar::kBF16;
  declaration.contract.key_tile = 64;
  const auto model = make_declared_model(declaration, "bf16-sum");
  Problem p;
  p.shape = {1, 1, 1, 1, 1000, 8, 8};
  p.resize_buffers();  // Q = 0: every key weighs 1, the sum is Tk
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  for (float& x : p.v) x = unit(rng);
  std::vector<float> o(p.o_size()), lse(p.lse_size());
  model->forward(p, o, lse);
  Oracle oracle;
  const Reference& ref = oracle.reference(p);
  const KernelNumerics numerics = numerics_of(declaration, p);
  EXPECT_NEAR(ref.lse[0], std::log(1000.0), 1e-12);
  EXPECT_LE(std::fabs(lse[0] - ref.lse[0]), lse_bound(p, ref, 0, numerics));
  for (std::size_t e = 0; e < o.size(); ++e) EXPECT_LE(std::fabs(o[e] - ref.o[e]), output_bound(p, ref, e, numerics));
}

// Seed 7 #93 of selfcheck: merge_equals_whole calls no forward, yet its cases were credited to
// whichever forward path ran last, and it ended INSUFFICIENT, "path short-q: 0 of 3 cases". A
// check that calls no forward owes the forward's declared paths nothing.
TEST(DeclaredModel, MergeOwesTheForwardPathsNothing) {
  Capabilities declaration;
  declaration.merge = true;
  PathPredicate short_q{.path = "short-q"};
  short_q.q_len = {1, 8};
  PathPredicate per_batch{.path = "per-batch"};
  per_batch.batch = {2, 64};
  declaration.paths = {short_q, per_batch};
  const auto model = make_declared_model(declaration, "merge-paths");
  CertifyOptions options;
  options.property_cases = 10;
  options.seed = 7;
  options.progress = false;
  options.sized_stages = false;
  options.out_dir = ::testing::TempDir() + "/merge_paths";
  options.checks = CheckSelection({"merge_equals_whole"});
  const std::vector<CheckResult> results = run_property_stage(*model, options);
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].status(), CheckStatus::kPass) << results[0].first_failure;
  EXPECT_TRUE(results[0].path_shortfall.empty()) << results[0].path_shortfall.front();
}

// Seed 7 #91 of selfcheck: paths per-batch (B >= 2) and then short-q, no GQA declared. The
// per-path top-ups drew from shapes at the declared predicates' edges, all of them GQA 2:1, and
// discarded every one ("uses gqa, which the kernel does not declare"): slices_are_independent,
// whose draws reach short-q only with B = 1 and two heads, ended "path short-q: 2 of 3 cases".
TEST(DeclaredModel, SlicesReachAPathThatBatchesLeave) {
  Capabilities declaration;
  declaration.features = {};
  PathPredicate per_batch{.path = "per-batch"};
  per_batch.batch = {2, 64};
  PathPredicate short_q{.path = "short-q"};
  short_q.q_len = {1, 8};
  declaration.paths = {per_batch, short_q};
  const auto model = make_declared_model(declaration, "batch-then-short");
  CertifyOptions options;
  options.property_cases = 10;
  options.seed = 7;
  options.progress = false;
  options.sized_stages = false;
  options.out_dir = ::testing::TempDir() + "/slices_paths";
  options.checks = CheckSelection({"slices_are_independent"});
  const std::vector<CheckResult> results = run_property_stage(*model, options);
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].status(), CheckStatus::kPass) << results[0].first_failure;
  EXPECT_GE(results[0].paths.at("short-q").cases, kPathFloor);
}

// A packed declaration (selfcheck draws it): the model serves a packed call a sequence at a time,
// and each sequence's rows are the padded batch's bits, under the declared roundings and tiles, an
// empty sequence's rows the sink's. (Before, the model served no packed call at all.)
TEST(DeclaredModel, ServesAPackedCallAsThePaddedBatch) {
  Capabilities declaration;
  declaration.packed = true;
  declaration.features.insert(Feature::kCausal);
  declaration.features.insert(Feature::kSinks);
  declaration.empty_rows = EmptyRowPolicy::kNan;
  declaration.precision.q_entry = Scalar::kBF16;
  declaration.precision.accumulator = Scalar::kBF16;
  declaration.contract.key_tile = 2;
  const auto model = make_declared_model(declaration, "packed");
  Problem p;
  p.shape = {4, 2, 1, 5, 7, 8, 6};
  p.resize_buffers();
  std::mt19937_64 rng(6);
  std::uniform_real_distribution<float> unit(-2.0f, 2.0f);
  for (auto* v : {&p.q, &p.k, &p.v})
    for (float& x : *v) x = unit(rng);
  p.mask.causal = true;
  p.q_offset = 2;
  p.mask.q_valid = {5, 0, 3, 2};   // a sequence without queries
  p.mask.kv_valid = {7, 4, 0, 6};  // one without keys: its rows see only the sink
  p.modifiers.sinks = {0.5f, -1.0f};
  std::vector<float> o(p.o_size()), lse(p.lse_size());
  model->forward(p, o, lse);
  const PackedCall call = packed_call_of(p);
  std::vector<float> packed_o(call.o_size()), packed_lse(call.lse_size());
  model->forward_packed(call, packed_o, packed_lse);
  EXPECT_EQ(model->last_path(), kPackedPath);
  Outputs unpacked;
  unpack_outputs(p, call, packed_o, packed_lse, true, unpacked.o, unpacked.lse);
  for (int b = 0; b < p.shape.batch; ++b)
    for (int h = 0; h < p.shape.heads; ++h)
      for (int i = 0; i < p.mask.q_valid[b]; ++i) {
        const std::size_t row = (std::size_t(b) * p.shape.heads + h) * p.shape.q_len + i;
        EXPECT_EQ(unpacked.lse[row], lse[row]) << "b " << b << " h " << h << " i " << i;
        for (int r = 0; r < p.shape.value_dim; ++r)
          EXPECT_EQ(unpacked.o[row * 6 + r], o[row * 6 + r]) << "b " << b << " h " << h << " i " << i;
      }
}

}  // namespace
}  // namespace attest
