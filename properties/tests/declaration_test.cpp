// A kernel's declaration (features and contract) bounds what it is sent: generated problems,
// fitted golden/grid/fuzz problems, and the reasons a property is not covered.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <cmath>
#include <map>

#include "attest/kernels/builtin_kernels.h"
#include "attest/properties/cases.h"
#include "attest/properties/declaration_fit.h"
#include "attest/properties/generators.h"
#include "attest/properties/properties.h"

namespace attest {
namespace {

Capabilities causal_loop() {  // the contract of ci/examples' causal loop: Dk == Dv, default scale, causal only
  Capabilities c;
  c.features = {Feature::kCausal, Feature::kGqa};
  c.contract.dk_equals_dv = true;
  c.contract.default_scale_only = true;
  c.contract.causal_required = true;
  return c;
}

TEST(Contract, NamesWhatIsOutside) {
  Contract c;
  c.head_dims = {64, 128};
  Problem p = benchmark_problem(4, 4, 48, false);
  EXPECT_NE(c.violation(p).find("Dk = 48"), std::string::npos) << c.violation(p);
  p = benchmark_problem(4, 4, 64, false);
  EXPECT_EQ(c.violation(p), "");
  c.causal_required = true;
  EXPECT_NE(c.violation(p).find("causal"), std::string::npos);
  c.q_len = {1, 2};
  EXPECT_EQ(c.summary(), "Dk in {64, 128}, causal only, Tq in [1, 2]");
}

// ABI 2.7: Dv apart from Dk. A list names the only widths (ggml's q4_0 V: whole blocks of 32); an
// unlimited range means Dk's, as before; dk_equals_dv still ties them.
TEST(Contract, ValueWidthsApartFromDk) {
  Contract c;
  c.head_dim = {1, 48};
  Problem p = benchmark_problem(4, 4, 40, false);
  p.shape.value_dim = 64;
  EXPECT_NE(c.violation(p).find("Dv = 64 is outside"), std::string::npos) << c.violation(p);
  c.value_dims = {32, 64, 128};
  c.value_dim = {16, 256};
  EXPECT_EQ(c.violation(p), "");
  p.shape.value_dim = 40;
  EXPECT_NE(c.violation(p).find("Dv = 40 is not accepted (Dv in {32, 64, 128})"), std::string::npos) << c.violation(p);
  EXPECT_EQ(c.fit_value_dim(40, 40), 32);
  EXPECT_EQ(c.fit_value_dim(100, 40), 128);  // 28 away, 64 is 36
  EXPECT_EQ(c.summary(), "Dk in [1, 48], Dv in {32, 64, 128}");
  Contract range_only;
  range_only.value_dim = {64, 64};
  EXPECT_TRUE(range_only.accepts_value_dim(64, 8));
  EXPECT_FALSE(range_only.accepts_value_dim(8, 8));
  EXPECT_EQ(range_only.fit_value_dim(8, 8), 64);
  EXPECT_EQ(range_only.summary(), "Dv = 64");
  Contract tied;
  tied.dk_equals_dv = true;
  EXPECT_EQ(tied.fit_value_dim(100, 40), 40);
}

// ABI 2.7: "ALiBi or a bias, not both" refuses a problem with both, and fitting keeps the one asked for.
TEST(Contract, AlibiExcludesBias) {
  Contract c;
  c.alibi_excludes_bias = true;
  Problem p = benchmark_problem(4, 4, 8, false);
  p.modifiers.alibi_slopes.assign(std::size_t(p.shape.heads), 0.5f);
  EXPECT_EQ(c.violation(p), "");
  p.modifiers.bias.assign(std::size_t(p.shape.q_len) * p.shape.k_len, 1.0f);
  EXPECT_NE(c.violation(p).find("ALiBi and a bias together"), std::string::npos);
  EXPECT_EQ(c.summary(), "ALiBi or bias, not both");
  Problem keeps_bias = p, keeps_alibi = p;
  c.fit_alibi_or_bias(keeps_bias, true);
  c.fit_alibi_or_bias(keeps_alibi, false);
  EXPECT_TRUE(keeps_bias.modifiers.alibi_slopes.empty() && !keeps_bias.modifiers.bias.empty());
  EXPECT_TRUE(!keeps_alibi.modifiers.alibi_slopes.empty() && keeps_alibi.modifiers.bias.empty());
  EXPECT_EQ(c.violation(keeps_bias), "");
  EXPECT_EQ(c.violation(keeps_alibi), "");
}

// Generated problems under "ALiBi or bias" still draw each of them alone, and Dv from its own list.
TEST(Declaration, GenerationDrawsAlibiAndBiasApartAndDvFromItsList) {
  Capabilities caps;
  caps.features = {Feature::kAlibi, Feature::kBias, Feature::kLse};
  caps.contract.alibi_excludes_bias = true;
  caps.contract.value_dims = {32, 64};
  caps.contract.value_dim = {16, 256};
  caps.contract.head_dim = {1, 48};
  int alibi = 0, bias = 0;
  std::map<int, int> widths;
  const PropertyInfo& property = find_property("matches_reference");
  const rc::Gen<ProblemSpec> gen = gen_spec(caps, property.needs);
  for (std::uint64_t seed = 0; seed < 200; ++seed) {
    const Problem p = build_problem(gen(rc::Random(seed), 100).value(), caps, property.needs);
    ASSERT_EQ(caps.unsupported_because(p), "") << "seed " << seed;
    alibi += !p.modifiers.alibi_slopes.empty();
    bias += !p.modifiers.bias.empty();
    ++widths[p.shape.value_dim];
  }
  EXPECT_GT(alibi, 20);
  EXPECT_GT(bias, 20);
  EXPECT_EQ(widths.size(), 2u);
}

TEST(Declaration, GoldenAndGridFitACausalLoopContract) {
  const Capabilities caps = causal_loop();
  for (const NamedProblem& named : grid_problems()) {
    std::string why;
    const std::optional<Problem> fitted = fit_to_declaration(named.problem, caps, &why);
    ASSERT_TRUE(fitted) << named.name << ": " << why;
    EXPECT_TRUE(caps.supports(*fitted)) << named.name << ": " << caps.unsupported_because(*fitted);
    EXPECT_TRUE(fitted->mask.causal && !fitted->q_offset && !fitted->scale) << named.name;
    EXPECT_EQ(fitted->shape.head_dim, fitted->shape.value_dim) << named.name;
  }
}

TEST(Declaration, FittingLeavesAFullDeclarationAlone) {
  const Capabilities all;  // a built-in kernel's: every feature but decode, no contract
  for (const NamedProblem& named : grid_problems()) {
    const std::optional<Problem> fitted = fit_to_declaration(named.problem, all);
    ASSERT_TRUE(fitted);
    EXPECT_EQ(fingerprint(*fitted), fingerprint(named.problem)) << named.name;
  }
}

RC_GTEST_PROP(Declaration, GeneratedProblemsLieInsideRandomContracts, ()) {
  Capabilities caps;
  const auto all = FeatureSet::all().members();
  for (Feature f : all)
    if (*rc::gen::inRange(0, 3) == 0) caps.features.erase(f);
  Contract& c = caps.contract;
  if (*rc::gen::arbitrary<bool>())
    c.head_dims = {*rc::gen::inRange(1, 40), *rc::gen::inRange(1, 40)};
  else if (*rc::gen::arbitrary<bool>())
    c.head_dim = {*rc::gen::inRange(1, 8), *rc::gen::inRange(8, 40)};
  c.dk_equals_dv = *rc::gen::arbitrary<bool>();
  c.default_scale_only = *rc::gen::arbitrary<bool>();
  c.causal_required = caps.declares(Feature::kCausal) && *rc::gen::arbitrary<bool>();
  c.self_attention_only = *rc::gen::arbitrary<bool>();
  if (*rc::gen::arbitrary<bool>())
    c.alibi_slopes = AlibiSlopes::kStandard, c.alibi_max_bias = *rc::gen::element(8.0, 16.0);
  if (*rc::gen::arbitrary<bool>()) c.q_len = {*rc::gen::inRange(1, 5), *rc::gen::inRange(5, 80)};
  if (*rc::gen::arbitrary<bool>()) c.k_len = {*rc::gen::inRange(1, 5), *rc::gen::inRange(5, 80)};
  if (*rc::gen::arbitrary<bool>()) c.batch = {1, 1};
  if (*rc::gen::arbitrary<bool>()) c.heads = {1, *rc::gen::inRange(1, 8)};
  // ABI 2.7: Dv's own widths (a list of whole blocks, or a range) and ALiBi excluding a bias.
  if (!c.dk_equals_dv && *rc::gen::arbitrary<bool>()) {
    c.value_dim = {*rc::gen::inRange(1, 8), *rc::gen::inRange(8, 40)};
    if (*rc::gen::arbitrary<bool>()) c.value_dims = {8, 16, 32};
  }
  c.alibi_excludes_bias = *rc::gen::arbitrary<bool>();
  for (const PropertyInfo& property : property_catalogue()) {
    if (!not_covered_because(property, caps).empty()) continue;
    const Problem p = build_problem(*gen_spec(caps, property.needs), caps, property.needs);
    RC_ASSERT(caps.unsupported_because(p) == std::string());
  }
}

TEST(NotCovered, NamesTheReason) {
  const Capabilities caps = causal_loop();
  EXPECT_NE(not_covered_because(find_property("permutation_equivariance"), caps).find("causal"), std::string::npos);
  EXPECT_NE(not_covered_because(find_property("decode_matches_prefill"), caps).find("decode"), std::string::npos);
  EXPECT_NE(not_covered_because(find_property("rope_relative_position"), caps).find("rope"), std::string::npos);
  EXPECT_EQ(not_covered_because(find_property("gqa_matches_repeated_heads"), caps), "");
  Capabilities decode_only = caps;
  decode_only.features.insert(Feature::kDecode);
  decode_only.contract.decode_only = true;
  EXPECT_NE(not_covered_because(find_property("matches_reference"), decode_only).find("decode-only"),
            std::string::npos);
  EXPECT_EQ(not_covered_because(find_property("decode_matches_prefill"), decode_only), "");
  Capabilities self_attention;
  self_attention.contract.self_attention_only = true;
  EXPECT_NE(not_covered_because(find_property("rope_relative_position"), self_attention).find("self-attention"),
            std::string::npos);
}

// The standard ALiBi set is the paper's 2^(-8(h+1)/H) for a power-of-two H, interpolated as the
// reference implementation does otherwise (H = 6: 2^-2, 2^-4, 2^-6, 2^-8, then 2^-1, 2^-3); a
// contract that accepts only it refuses other slopes, and fitting a problem gives it exactly.
TEST(Contract, StandardAlibiSlopes) {
  const std::vector<float> eight = standard_alibi_slopes(8);
  for (int h = 0; h < 8; ++h) EXPECT_EQ(eight[h], std::exp2(-(h + 1.0f))) << h;
  EXPECT_EQ(standard_alibi_slopes(6), (std::vector<float>{0.25f, 0.0625f, 0.015625f, 0.00390625f, 0.5f, 0.125f}));
  EXPECT_EQ(standard_alibi_slopes(4, 16.0),
            (std::vector<float>{0.0625f, 0.00390625f, 0.000244140625f, 0.0000152587890625f}));
  Capabilities caps;
  caps.features.insert(Feature::kAlibi);
  caps.contract.alibi_slopes = AlibiSlopes::kStandard;
  EXPECT_NE(caps.contract.summary().find("standard ALiBi slopes (max_bias 8)"), std::string::npos);
  Problem p;
  p.shape = {1, 6, 6, 4, 4, 8, 8};
  p.resize_buffers();
  p.modifiers.alibi_slopes = {1, 1, 1, 1, 1, 1};
  EXPECT_NE(caps.unsupported_because(p).find("standard set for H = 6"), std::string::npos);
  const std::optional<Problem> fitted = fit_to_declaration(p, caps);
  ASSERT_TRUE(fitted);
  EXPECT_EQ(fitted->modifiers.alibi_slopes, standard_alibi_slopes(6));
}

// A self-attention contract admits Tq == Tk with q_offset 0 only, says so, and every problem
// fitted to it is square with the default offset.
TEST(Contract, SelfAttentionOnly) {
  Contract c;
  c.self_attention_only = true;
  EXPECT_FALSE(c.open());
  EXPECT_NE(c.summary().find("self-attention only (Tq == Tk, q_offset 0)"), std::string::npos);
  Problem p;
  p.shape = {1, 2, 2, 5, 9, 8, 8};
  p.resize_buffers();
  EXPECT_NE(c.violation(p).find("Tq == Tk"), std::string::npos);
  p.shape.q_len = 9;
  p.resize_buffers();
  EXPECT_EQ(c.violation(p), "");
  p.q_offset = 3;
  EXPECT_NE(c.violation(p).find("q_offset 0"), std::string::npos);
  Capabilities caps;
  caps.contract = c;
  p.shape.q_len = 5;
  const std::optional<Problem> fitted = fit_to_declaration(p, caps);
  ASSERT_TRUE(fitted);
  EXPECT_EQ(fitted->shape.q_len, 5);
  EXPECT_EQ(fitted->shape.k_len, 5);
  EXPECT_EQ(caps.unsupported_because(*fitted), "");
}

// A value range (|V| of a visible key) bounds what is drawn and fitted; keys no query sees may hold
// anything (poisoned masked keys stay inside the declaration).
TEST(Contract, ValueRange) {
  Capabilities caps;
  caps.contract.max_abs_value = 8;
  EXPECT_NE(caps.contract.summary().find("|V| <= 8"), std::string::npos);
  Problem p;
  p.shape = {1, 1, 1, 2, 4, 2, 2};
  p.resize_buffers();
  p.v[0] = 9;
  EXPECT_NE(caps.contract.violation(p).find("V = 9 of a visible key is beyond the contract's |V| <= 8"),
            std::string::npos);
  p.mask.kv_valid = {3};
  p.v.assign(p.v.size(), 1);
  p.v[3 * 2] = 1e30f;  // key 3, padded away
  EXPECT_EQ(caps.contract.violation(p), "");
  p.v[0] = 20;
  const std::optional<Problem> fitted = fit_to_declaration(p, caps);
  ASSERT_TRUE(fitted);
  EXPECT_EQ(fitted->v[0], 8.0f);
  const rc::Gen<ProblemSpec> gen = gen_spec(caps);
  for (int seed = 0; seed < 200; ++seed) {
    const Problem drawn = build_problem(gen(rc::Random(seed), 100).value(), caps);
    EXPECT_EQ(caps.contract.violation(drawn), "") << "seed " << seed;
  }
}

// Under an open contract every width is drawn now and then, not only the listed classes: a kernel
// wrong at Dk = 48 alone (between 32 and 64) was never sent one.
TEST(Generators, DrawUnlistedHeadWidths) {
  const Capabilities caps = make_tiled_kernel()->capabilities();
  const rc::Gen<ProblemSpec> gen = gen_spec(caps);
  std::map<int, int> widths;
  for (int seed = 0; seed < 6000; ++seed)
    ++widths[build_problem(gen(rc::Random(seed), 100).value(), caps).shape.head_dim];
  EXPECT_GE(widths[48], 2);
  int unlisted = 0;
  for (const auto& [d, n] : widths) unlisted += d > 32 && d % 16 != 0;
  EXPECT_GE(unlisted, 20) << "distinct widths past 32 that are no multiple of 16";
}

// With tiles declared, drawn problems span three tiles in both dimensions now and then (a backward
// once got at most one tile and a key: 65 x 65 with 64 x 64 tiles).
TEST(Generators, DrawThreeTilesPerDimension) {
  Capabilities caps = make_loop_kernel()->capabilities();
  caps.contract.query_tile = caps.contract.key_tile = 64;
  const rc::Gen<ProblemSpec> gen = gen_spec(caps);
  int queries = 0, keys = 0, both = 0;
  for (int seed = 0; seed < 3000; ++seed) {
    const Shape s = build_problem(gen(rc::Random(seed), 100).value(), caps).shape;
    queries += s.q_len > 128, keys += s.k_len > 128, both += s.q_len > 128 && s.k_len > 128;
  }
  EXPECT_GE(queries, 60);
  EXPECT_GE(keys, 60);
  EXPECT_GE(both, 3);
}

}  // namespace
}  // namespace attest
