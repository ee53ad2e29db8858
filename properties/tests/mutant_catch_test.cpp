// A property is trusted only after it has caught a broken kernel: each property here fails on
// a mutant from impl/mutants/, its shrunk counterexample is saved, and the file replays.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "attest/kernels/builtin_kernels.h"
#include "attest/mutants/mutants.h"
#include "attest/properties/oracle.h"
#include "attest/properties/problem_file.h"
#include "attest/properties/properties.h"
#include "attest/properties/property_driver.h"

namespace attest {
namespace {

struct Catch {
  std::string property;
  std::string mutant;
};

void PrintTo(const Catch& c, std::ostream* os) { *os << c.property << " catches " << c.mutant; }

class PropertyCatchesMutant : public ::testing::TestWithParam<Catch> {};

TEST_P(PropertyCatchesMutant, FailsShrinksAndReplays) {
  const PropertyInfo& property = find_property(GetParam().property);
  const auto mutant = find_mutant(GetParam().mutant).make();
  DriveOptions options;
  options.cases = 300;
  options.seed = 20261129;
  options.counterexample_dir = "attest-out/mutant-counterexamples";
  const DriveResult r = drive_property(property, *mutant, options);
  ASSERT_FALSE(r.passed) << property.name << " missed " << mutant->name() << " in " << r.cases << " cases";
  ASSERT_TRUE(r.counterexample.has_value());
  std::cout << property.name << " caught " << mutant->name() << " after " << r.cases << " passing cases: " << r.message
            << "\nshrunk: Tq=" << r.counterexample->shape.q_len << " Tk=" << r.counterexample->shape.k_len << " file "
            << r.counterexample_path << "\n";

  // The saved file replays to a failing verdict: the same one, or for a property that transformed
  // the problem (overflow_safe), the transformed problem against the property it names.
  const ProblemFile saved = load_problem_file(r.counterexample_path);
  EXPECT_EQ(saved.kernel, mutant->name());
  Oracle oracle;
  const Verdict replayed = check_safely(find_property(saved.property), saved.problem, *mutant, oracle);
  EXPECT_FALSE(replayed.passed);
  if (property.declares.packed)  // a packed call's failure names the packed path, not a padded forward's
    EXPECT_NE(replayed.detail.find("[path: packed]"), std::string::npos) << replayed.detail;
  if (saved.property == property.name)
    EXPECT_EQ(replayed.detail, saved.verdict);
  else
    EXPECT_TRUE(property.name == "overflow_safe" || property.name == "gradient_overflow_safe")
        << "only the overflow properties save a transformed problem";
}

const Catch kCatches[] = {
    {"matches_reference", "drop_partial_tile"},
    {"precision_gate", "weights_fp16"},
    {"rows_sum_to_one", "no_rescale"},
    {"zero_masked_weight", "causal_tile_only"},
    {"masked_inputs_have_no_influence", "masked_value_times_zero"},
    {"permutation_equivariance", "drop_partial_tile"},
    {"empty_row_policy", "empty_row_nan"},
    {"decode_matches_prefill", "decode_skips_self"},
    {"decode_matches_prefill", "q8_scale_next_block"},
    {"decode_matches_prefill", "kv_drops_partial_page"},
    {"decode_matches_prefill", "kv_page_table_off_by_one"},
    {"decode_matches_prefill", "q4_nibbles_swapped"},
    {"decode_matches_prefill", "e4m3_saturated_as_inf"},
    {"decode_matches_prefill", "q8_head_scale_of_next_head"},
    {"eviction_matches_retained_set", "eviction_fencepost"},
    {"eviction_matches_retained_set", "ring_wrap_current_lap"},
    {"eviction_matches_retained_set", "sinks_evicted"},
    {"shared_prefix_equals_private", "kv_shared_page_written_through"},
    {"page_order_invariance", "kv_pages_assumed_contiguous"},
    {"ragged_batch_equals_single", "kv_batch_positions_of_first"},
    {"output_in_convex_hull", "no_rescale"},
    {"gqa_matches_repeated_heads", "gqa_modulo"},
    {"slices_are_independent", "batch0_padding"},
    {"rope_relative_position", "rope_query_at_zero"},
    {"overflow_safe", "no_max_subtraction"},
    {"deterministic_and_in_bounds", "write_past_output"},
    {"deterministic_and_in_bounds", "accumulate_into_output"},
    {"bias_minus_inf_equals_mask", "bias_inf_as_lowest"},
    {"alibi_matches_bias", "alibi_distance_flipped"},
    {"softcap_saturates", "softcap_naive_tanh"},
    {"softcap_saturates", "softcap_after_mask"},
    {"sink_takes_mass", "sink_outside_max"},
    {"sink_takes_mass", "sink_per_key_tile"},
    {"gqa_matches_repeated_heads", "alibi_kv_head"},
    {"slices_are_independent", "bias_batch0"},
    {"masked_inputs_have_no_influence", "bias_inf_as_lowest"},
    {"matches_reference", "bias_in_f16"},
    {"gradient_matches_reference", "backward_dk_unscaled"},
    {"gradient_matches_reference", "backward_sink_gradient_sign"},
    {"gradient_precision_gate", "backward_d_from_bf16_o"},
    {"gradient_masked_keys_zero", "backward_masked_ds_kept"},
    {"gradient_dv_is_pt_do", "backward_dv_unnormalised"},
    {"gradient_ds_rows_sum_to_zero", "backward_drops_d"},
    {"gradient_empty_rows_contribute_nothing", "backward_skipped_rows_unwritten"},
    {"gradient_gqa_matches_repeated_heads", "backward_gqa_last_head_wins"},
    {"gradient_permutation_equivariance", "backward_lse_wrong_row"},
    {"gradient_deterministic", "backward_dq_nondeterministic"},
    {"gradient_deterministic", "backward_dq_split_by_threads"},
    {"gradient_matches_finite_difference", "backward_softcap_no_derivative"},
    {"gradient_overflow_safe", "backward_d_from_bf16_o"},
    {"merge_equals_whole", "merge_empty_part_nan"},
    {"merge_equals_whole", "merge_without_max"},
    {"merge_equals_whole", "merge_lse_bf16"},
    {"packed_equals_padded", "packed_drops_last_sequence"},
    {"packed_equals_padded", "packed_next_offset"},
    {"sequences_do_not_interact", "packed_max_seqlen_as_length"},
    {"split_invariance", "split_lse_log2"},
};

INSTANTIATE_TEST_SUITE_P(Mutants, PropertyCatchesMutant, ::testing::ValuesIn(kCatches),
                         [](const auto& info) { return info.param.property + "__" + info.param.mutant; });

TEST(PropertyCatchesMutant, EveryPropertyHasAMutant) {
  for (const PropertyInfo& p : property_catalogue()) {
    bool found = false;
    for (const Catch& c : kCatches) found = found || c.property == p.name;
    EXPECT_TRUE(found) << p.name << " has not been shown to catch any mutant";
  }
}

// A tile-boundary bug shrinks to a problem no larger than one 32-key tile plus one.
TEST(Shrinking, TileBoundaryCounterexampleIsSmall) {
  const auto mutant = find_mutant("drop_partial_tile").make();
  for (std::uint64_t seed : {1ull, 2ull, 3ull}) {
    DriveOptions options;
    options.cases = 300;
    options.seed = seed;
    options.counterexample_dir = "attest-out/mutant-counterexamples";
    const DriveResult r = drive_property(find_property("matches_reference"), *mutant, options);
    ASSERT_FALSE(r.passed);
    EXPECT_LE(r.counterexample->shape.q_len, 33) << "seed " << seed;
    EXPECT_LE(r.counterexample->shape.k_len, 33) << "seed " << seed;
    EXPECT_EQ(r.counterexample->shape.batch, 1) << "seed " << seed;
  }
}

// K and V are poisoned separately: a kernel that zeroes its rows when a masked K row holds NaN
// (seen in a real CPU kernel) and one that lets a masked V row's NaN through are each caught,
// and the failure says which input was poisoned.
class PoisonReaction final : public Kernel {
 public:
  explicit PoisonReaction(bool keys) : inner_(make_kernel("loop")), keys_(keys) {}
  std::string name() const override { return keys_ ? "zeroes-on-nan-k" : "nan-on-nan-v"; }
  Capabilities capabilities() const override { return inner_->capabilities(); }
  void forward(const Problem& p, std::span<float> o, std::span<float> lse) const override {
    inner_->forward(p, o, lse);
    const std::vector<float>& input = keys_ ? p.k : p.v;
    if (std::none_of(input.begin(), input.end(), [](float x) { return std::isnan(x); })) return;
    for (float& x : o) x = keys_ ? 0.0f : std::numeric_limits<float>::quiet_NaN();
  }

 private:
  std::unique_ptr<Kernel> inner_;
  bool keys_;
};

// A small problem with fixed, varied inputs in every buffer.
Problem patterned(const Shape& shape) {
  Problem p;
  p.shape = shape;
  p.resize_buffers();
  for (std::size_t i = 0; i < p.q.size(); ++i) p.q[i] = 0.1f * float(i % 7) - 0.3f;
  for (std::size_t i = 0; i < p.k.size(); ++i) p.k[i] = 0.2f * float(i % 5) - 0.4f;
  for (std::size_t i = 0; i < p.v.size(); ++i) p.v[i] = 0.3f * float(i % 3) - 0.2f;
  return p;
}

TEST(MaskedInputs, KAndVPoisonedSeparately) {
  Problem p = patterned({1, 1, 1, 8, 8, 4, 4});
  p.mask.causal = true;
  Oracle oracle;
  EXPECT_TRUE(masked_inputs_have_no_influence(p, *make_kernel("loop"), oracle).passed);
  const Verdict k = masked_inputs_have_no_influence(p, PoisonReaction(true), oracle);
  EXPECT_FALSE(k.passed);
  EXPECT_NE(k.detail.find("masked K rows poisoned (V clean)"), std::string::npos) << k.detail;
  const Verdict v = masked_inputs_have_no_influence(p, PoisonReaction(false), oracle);
  EXPECT_FALSE(v.passed);
  EXPECT_NE(v.detail.find("masked V rows poisoned (K clean)"), std::string::npos) << v.detail;
}

// Poisoning follows the declared input domain: masked V rows times weight 0 (0 * NaN) is a bug for
// a kernel whose masked cache slots may hold NaN, and none for one whose users keep them finite.
// Under that promise masked keys get +-1e30, which still exposes a kernel that lets them in.
TEST(MaskedInputs, PoisoningFollowsTheInputDomain) {
  class FiniteInputs final : public Kernel {
   public:
    explicit FiniteInputs(std::unique_ptr<Kernel> inner) : inner_(std::move(inner)) {}
    std::string name() const override { return inner_->name(); }
    Capabilities capabilities() const override {
      Capabilities c = inner_->capabilities();
      c.inputs = InputDomain::kFinite;
      return c;
    }
    void forward(const Problem& p, std::span<float> o, std::span<float> lse) const override {
      inner_->forward(p, o, lse);
    }

   private:
    std::unique_ptr<Kernel> inner_;
  };
  DriveOptions options;
  options.cases = 200;
  options.seed = 20261129;
  options.counterexample_dir = "attest-out/input-domain";
  const PropertyInfo& property = find_property("masked_inputs_have_no_influence");
  EXPECT_FALSE(drive_property(property, *find_mutant("masked_value_times_zero").make(), options).passed);
  const DriveResult promised =
      drive_property(property, FiniteInputs(find_mutant("masked_value_times_zero").make()), options);
  EXPECT_TRUE(promised.passed) << promised.message;
  EXPECT_GT(promised.effective, 100);
  for (const char* leak : {"causal_sees_next", "max_over_masked"})
    EXPECT_FALSE(drive_property(property, FiniteInputs(find_mutant(leak).make()), options).passed) << leak;
}

// rope_relative_position keeps a chunk (a term fixed in absolute position) by shifting whole
// chunks: a correct kernel passes with odd chunk sizes, and a chunk too long to shift is vacuous,
// not a problem of millions of keys.
TEST(RopeRelativePosition, ShiftsByWholeChunks) {
  Problem p = patterned({1, 1, 1, 9, 13, 4, 4});
  p.rope.enabled = true;
  Oracle oracle;
  for (int chunk : {3, 5, 7}) {
    p.mask.chunk = chunk;
    const Verdict v = rope_relative_position(p, *make_kernel("loop"), oracle);
    EXPECT_TRUE(v.passed && v.exercised) << chunk << ": " << v.detail;
  }
  p.mask.chunk = 100000;
  const Verdict v = rope_relative_position(p, *make_kernel("loop"), oracle);
  EXPECT_TRUE(v.passed && !v.exercised) << v.detail;
}

// A kernel taking one far q_offset only (2^40, the largest a problem may have): no shift of
// positions fits its contract, so the property is not covered, with the reason; run on such a
// problem anyway, the check is vacuous, never a failure blamed on the kernel.
TEST(RopeRelativePosition, NoRoomToShiftIsNotTheKernelsFault) {
  class FarOffsetOnly final : public Kernel {
   public:
    std::string name() const override { return "far-offset-only"; }
    Capabilities capabilities() const override {
      Capabilities c = inner_->capabilities();
      c.contract.q_offset = {kMaxContractOffset, kMaxContractOffset};
      return c;
    }
    void forward(const Problem& p, std::span<float> o, std::span<float> lse) const override {
      inner_->forward(p, o, lse);
    }

   private:
    std::unique_ptr<Kernel> inner_ = make_kernel("loop");
  };
  const FarOffsetOnly kernel;
  const PropertyInfo& property = find_property("rope_relative_position");
  EXPECT_NE(not_covered_because(property, kernel.capabilities()).find("q_offset takes 1099511627776 only"),
            std::string::npos)
      << not_covered_because(property, kernel.capabilities());
  Problem p = patterned({1, 1, 1, 3, 5, 4, 4});
  p.rope.enabled = true;
  p.q_offset = kMaxContractOffset;
  Oracle oracle;
  const Verdict v = check_safely(property, p, kernel, oracle);
  EXPECT_TRUE(v.passed && !v.exercised) << v.detail;
  EXPECT_NE(v.detail.find("no shift of positions fits"), std::string::npos) << v.detail;
  // Near the end of an open contract's range, the shift is drawn within it.
  class OpenLoop final : public Kernel {
   public:
    std::string name() const override { return "open-loop"; }
    Capabilities capabilities() const override { return inner_->capabilities(); }
    void forward(const Problem& p, std::span<float> o, std::span<float> lse) const override {
      inner_->forward(p, o, lse);
    }

   private:
    std::unique_ptr<Kernel> inner_ = make_kernel("loop");
  };
  p.q_offset = kMaxContractOffset - 2;
  const Verdict near = check_safely(property, p, OpenLoop(), oracle);
  EXPECT_TRUE(near.passed && near.exercised) << near.detail;
}

// A computed NaN is called that, never printed as "-nan outside [...]".
TEST(Reports, ComputedNanIsNamed) {
  class NanAtZero final : public Kernel {
   public:
    std::string name() const override { return "nan-at-zero"; }
    Capabilities capabilities() const override { return inner_->capabilities(); }
    void forward(const Problem& p, std::span<float> o, std::span<float> lse) const override {
      inner_->forward(p, o, lse);
      o[0] = -std::numeric_limits<float>::quiet_NaN();
    }
    std::unique_ptr<Kernel> inner_ = make_kernel("loop");
  };
  Problem p;
  p.shape = {1, 1, 1, 2, 3, 2, 2};
  p.resize_buffers();
  for (std::size_t i = 0; i < p.v.size(); ++i) p.v[i] = float(i) - 2.0f;
  Oracle oracle;
  const Verdict v = output_in_convex_hull(p, NanAtZero(), oracle);
  EXPECT_FALSE(v.passed);
  EXPECT_NE(v.detail.find("NaN computed"), std::string::npos) << v.detail;
  EXPECT_EQ(v.detail.find("nan"), std::string::npos) << v.detail;
}

}  // namespace
}  // namespace attest
