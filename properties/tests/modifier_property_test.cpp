// The score-modifier properties on fixed problems: every built-in kernel that declares the
// modifier passes with the case exercised, and the mutant each property is meant for fails it.
#include <gtest/gtest.h>

#include <random>

#include "attest/kernels/builtin_kernels.h"
#include "attest/mutants/mutants.h"
#include "attest/properties/oracle.h"
#include "attest/properties/properties.h"

namespace attest {
namespace {

// B x H (Hkv) x Tq x Tk, Dk = Dv = 8, uniform data in [-1, 1], causal (bottom-right).
Problem problem(int batch, int heads, int kv_heads, int q_len, int k_len, std::uint64_t seed = 1) {
  Problem p;
  p.shape = {batch, heads, kv_heads, q_len, k_len, 8, 8};
  p.mask.causal = true;
  p.resize_buffers();
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  for (auto* buffer : {&p.q, &p.k, &p.v})
    for (float& x : *buffer) x = unit(rng);
  return p;
}

// The correct kernels (the built-ins and the mutants' host) that declare what the property needs,
// the features in `also`, and take the problem.
std::vector<std::unique_ptr<Kernel>> correct_kernels(const std::string& property, const Problem& p, FeatureSet also) {
  std::vector<std::unique_ptr<Kernel>> out;
  auto keep = [&](std::unique_ptr<Kernel> k) {
    const Capabilities caps = k->capabilities();
    if (not_covered_because(find_property(property), caps).empty() && also.subset_of(caps.features) && caps.supports(p))
      out.push_back(std::move(k));
  };
  for (const KernelEntry& e : kernel_registry()) keep(e.make());
  keep(make_in_process_kernel("tiled-scalar"));
  return out;
}

void expect_holds(const std::string& property, const Problem& p, FeatureSet also = {}) {
  const PropertyInfo& info = find_property(property);
  const auto kernels = correct_kernels(property, p, also);
  EXPECT_GE(kernels.size(), 5u) << property;  // loop, blocked, tiled, decode, tiled-scalar
  for (const auto& kernel : kernels) {
    Oracle oracle;
    const Verdict v = info.check(p, *kernel, oracle);
    EXPECT_TRUE(v.passed) << property << " on " << kernel->name() << ": " << v.detail;
    EXPECT_TRUE(v.exercised) << property << " on " << kernel->name() << " exercised nothing: " << v.detail;
  }
}

// Fails on the mutant, with `words` in its explanation.
void expect_catches(const std::string& property, const std::string& mutant, const Problem& p,
                    const std::string& words) {
  const auto kernel = find_mutant(mutant).make();
  Oracle oracle;
  const Verdict v = find_property(property).check(p, *kernel, oracle);
  EXPECT_FALSE(v.passed) << property << " missed " << mutant;
  EXPECT_NE(v.detail.find(words), std::string::npos) << property << " on " << mutant << ": " << v.detail;
}

TEST(ModifierProperties, EachNeedsItsFeature) {
  const Capabilities none;  // declares no modifier
  EXPECT_EQ(not_covered_because(find_property("bias_minus_inf_equals_mask"), none), "the kernel does not declare bias");
  EXPECT_EQ(not_covered_because(find_property("alibi_matches_bias"), none),
            "the kernel does not declare alibi or bias");
  EXPECT_EQ(not_covered_because(find_property("softcap_saturates"), none), "the kernel does not declare softcap");
  EXPECT_EQ(not_covered_because(find_property("sink_takes_mass"), none), "the kernel does not declare sinks");
  for (const char* name : {"loop", "blocked", "tiled", "tiled_bf16", "decode"})
    for (const char* property :
         {"bias_minus_inf_equals_mask", "alibi_matches_bias", "softcap_saturates", "sink_takes_mass"})
      EXPECT_EQ(not_covered_because(find_property(property), make_kernel(name)->capabilities()), "")
          << property << " " << name;
}

TEST(ModifierProperties, BiasMinusInfEqualsMask) {
  Problem p = problem(2, 2, 2, 5, 40);
  p.mask.causal = false;
  expect_holds("bias_minus_inf_equals_mask", p);
  // A -inf bias turned into the lowest float: the row it empties attends uniformly instead.
  expect_catches("bias_minus_inf_equals_mask", "bias_inf_as_lowest", p, "empty row must output 0");
}

TEST(ModifierProperties, BiasMinusInfEqualsMaskSeesBatchBroadcastBugs) {
  // A per-batch bias (the property keeps the problem's own): batch 1 must not read batch 0's.
  Problem p = problem(2, 1, 1, 4, 9);
  p.modifiers.bias.assign(2 * 4 * 9, 0.0f);
  for (std::size_t e = 4 * 9; e < p.modifiers.bias.size(); ++e) p.modifiers.bias[e] = (e % 3) - 1.0f;
  expect_holds("bias_minus_inf_equals_mask", p);
  expect_catches("bias_minus_inf_equals_mask", "bias_batch0", p, "b=1");
}

TEST(ModifierProperties, AlibiMatchesBias) {
  const Problem p = problem(1, 4, 2, 6, 20);  // GQA 4:2, no slopes: the property draws them per query head
  expect_holds("alibi_matches_bias", p);
  expect_catches("alibi_matches_bias", "alibi_distance_flipped", p, "ALiBi slopes vs the same terms");
  expect_catches("alibi_matches_bias", "alibi_kv_head", p, "ALiBi slopes vs the same terms");
}

// A kernel taking its bias in f16 cannot be handed the slopes' terms exactly: each run is judged
// against its own reference. The correct one passes, the one with the distance flipped fails.
TEST(ModifierProperties, AlibiMatchesBiasForA16BitBias) {
  Problem p = problem(1, 4, 2, 6, 20);
  p.storage.bias = Scalar::kF16;
  Precision f16_bias;
  f16_bias.bias = Scalar::kF16;
  Oracle oracle;
  const auto correct = make_faulty_tiled_kernel({32, 32, f16_bias}, {.bias_in_f16 = true}, "f16-bias");
  const Verdict pass = alibi_matches_bias(p, *correct, oracle);
  EXPECT_TRUE(pass.passed) << pass.detail;
  EXPECT_TRUE(pass.exercised) << pass.detail;
  const auto flipped =
      make_faulty_tiled_kernel({32, 32, f16_bias}, {.alibi_distance_flipped = true}, "f16-bias-flipped");
  const Verdict fail = alibi_matches_bias(p, *flipped, oracle);
  EXPECT_FALSE(fail.passed);
}

TEST(ModifierProperties, AlibiWithZeroSlopesIsVacuous) {
  Problem p = problem(1, 2, 2, 3, 3);
  p.modifiers.alibi_slopes = {0.0f, 0.0f};
  const auto kernel = make_kernel("tiled");
  Oracle oracle;
  const Verdict v = alibi_matches_bias(p, *kernel, oracle);
  EXPECT_TRUE(v.passed);
  EXPECT_FALSE(v.exercised);
}

TEST(ModifierProperties, SoftcapSaturates) {
  Problem p = problem(1, 2, 1, 7, 40);
  p.modifiers.softcap = 5.0;
  expect_holds("softcap_saturates", p);
  // tanh through exp(2y): NaN once exp overflows (y > 44).
  expect_catches("softcap_saturates", "softcap_naive_tanh", p, "logits up to");
  // Masked scores capped to -c: the future keys of the diagonal tile get weight.
  expect_catches("softcap_saturates", "softcap_after_mask", p, "V = I");
}

// A kernel that declares softcap and ignores it: at large logits its weights collapse below the floor.
class SoftcapIgnored final : public Kernel {
 public:
  std::string name() const override { return "softcap-ignored"; }
  Capabilities capabilities() const override { return loop_->capabilities(); }
  void forward(const Problem& p, std::span<float> o, std::span<float> lse) const override {
    Problem uncapped = p;
    uncapped.modifiers.softcap.reset();
    loop_->forward(uncapped, o, lse);
  }

 private:
  std::unique_ptr<Kernel> loop_ = make_loop_kernel();
};

TEST(ModifierProperties, SoftcapFloorCatchesAMissingCap) {
  Problem p = problem(1, 1, 1, 3, 12);
  p.modifiers.softcap = 30.0;
  SoftcapIgnored kernel;
  Oracle oracle;
  const Verdict v = softcap_saturates(p, kernel, oracle);
  EXPECT_FALSE(v.passed);
  EXPECT_NE(v.detail.find("below what the cap c = 30 allows"), std::string::npos) << v.detail;
}

TEST(ModifierProperties, SinkTakesMass) {
  Problem p = problem(2, 2, 2, 5, 70);  // three 32-key tiles on the scalar host
  p.modifiers.sinks = {0.0f, 100.0f};
  expect_holds("sink_takes_mass", p);
  // The sink outside the running max: exp(100 - m) overflows, and an empty row loses LSE = sigma.
  expect_catches("sink_takes_mass", "sink_outside_max", p, "LSE");
  expect_catches("sink_takes_mass", "sink_per_key_tile", p, "1 - exp(sigma - LSE)");
}

TEST(ModifierProperties, SinkRowWithoutKeysOutputsZeroAndSigma) {
  Problem p = problem(1, 1, 1, 3, 5);
  p.modifiers.sinks = {2.5f};
  p.mask.q_valid = {1};  // rows 1 and 2 see nothing but the sink
  expect_holds("sink_takes_mass", p);
  expect_catches("sink_takes_mass", "sink_outside_max", p, "not sigma = 2.5");
}

TEST(ModifierProperties, MaskLeakPoisonsKeysHiddenByABias) {
  // No mask term hides anything here: only the keys the property hides by a -inf bias are poisoned.
  Problem p = problem(1, 2, 2, 4, 9);
  p.mask.causal = false;
  expect_holds("masked_inputs_have_no_influence", p, {Feature::kBias});
  expect_catches("masked_inputs_have_no_influence", "bias_inf_as_lowest", p, "keys hidden by a -inf bias");
}

TEST(ModifierProperties, GqaComparesPerQueryHeadSlopes) {
  // Every other problem without slopes gets some (the choice follows the problem's seed): over a few
  // problems the slope-by-kv-head mutant is caught, the correct kernels never.
  int caught = 0;
  for (std::uint64_t seed = 1; seed <= 6; ++seed) {
    const Problem p = problem(1, 4, 2, 3, 10, seed);
    expect_holds("gqa_matches_repeated_heads", p);
    const auto mutant = find_mutant("alibi_kv_head").make();
    Oracle oracle;
    caught += !gqa_matches_repeated_heads(p, *mutant, oracle).passed;
  }
  EXPECT_GT(caught, 0);
}

}  // namespace
}  // namespace attest
