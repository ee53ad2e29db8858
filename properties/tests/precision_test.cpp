// Precision is declared, not assumed: the bound and gate 2 follow what a kernel says about where
// it rounds, stay meaningful at long sequences, and catch a kernel that rounds elsewhere.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "attest/kernels/builtin_kernels.h"
#include "attest/properties/oracle.h"
#include "attest/properties/property_driver.h"

namespace attest {
namespace {

Precision storage_only(Scalar s) {
  Precision p;
  p.q = p.k = p.v = p.o = s;
  return p;
}

// A kernel computing with `inner`, declaring `declared`, and adding `offset` to O[0].
class Wrapped final : public Kernel {
 public:
  Wrapped(std::unique_ptr<Kernel> inner, Precision declared, float offset)
      : inner_(std::move(inner)), declared_(declared), offset_(offset) {}
  std::string name() const override { return "wrapped"; }
  Capabilities capabilities() const override {
    Capabilities c = inner_->capabilities();
    c.precision = declared_;
    return c;
  }
  void forward(const Problem& p, std::span<float> o, std::span<float> lse) const override {
    inner_->forward(p, o, lse);
    o[0] += offset_;
  }

 private:
  std::unique_ptr<Kernel> inner_;
  Precision declared_;
  float offset_;
};

// One head, two queries against tk keys, values uniform in [-1, 1], stored in `s`.
Problem long_problem(int tk, Scalar s) {
  Problem p;
  p.shape = {1, 1, 1, 2, tk, 16, 16};
  p.storage = {s, s, s};
  p.resize_buffers();
  std::mt19937_64 rng(tk);
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  for (auto* v : {&p.q, &p.k, &p.v})
    for (float& x : *v) x = round_to(unit(rng), s);
  return p;
}

TEST(Precision, CorrectBf16TiledKernelPasses) {
  Precision bf16 = storage_only(Scalar::kBF16);
  bf16.p = Scalar::kBF16;
  const auto kernel = make_faulty_tiled_kernel({32, 32, bf16}, {}, "tiled-scalar-bf16");
  for (const char* property : {"matches_reference", "precision_gate", "masked_inputs_have_no_influence"}) {
    DriveOptions options;
    options.cases = 150;
    options.seed = 20261130;
    const DriveResult r = drive_property(find_property(property), *kernel, options);
    EXPECT_TRUE(r.passed) << property << ": " << r.message;
    EXPECT_GT(r.effective, r.asked / 2) << property;
  }
}

TEST(Precision, OnePercentOffsetFailsAtLongSequencesInEveryStorage) {
  for (Scalar s : {Scalar::kF32, Scalar::kBF16, Scalar::kF16})
    for (int tk : {2048, 16384}) {
      const Problem p = long_problem(tk, s);
      Oracle oracle;
      const Precision declared = storage_only(s);
      const Wrapped correct(make_model_kernel(declared), declared, 0.0f);
      const Wrapped shifted(make_model_kernel(declared), declared, 0.02f);  // 1% of the range [-1, 1]
      const Verdict good = matches_reference(p, correct, oracle);
      EXPECT_TRUE(good.passed && good.exercised) << to_string(s) << " Tk=" << tk << ": " << good.detail;
      const Verdict bad = matches_reference(p, shifted, oracle);
      EXPECT_FALSE(bad.passed) << to_string(s) << " Tk=" << tk << ": the +1% kernel passed (" << bad.detail << ")";
    }
}

TEST(Precision, F16AccumulatorFailsGateTwoUnlessDeclared) {
  Precision f16_acc;
  f16_acc.accumulator = Scalar::kF16;
  const Problem p = long_problem(256, Scalar::kF32);
  Oracle oracle;
  const Wrapped lying(make_model_kernel(f16_acc), Precision{}, 0.0f);  // accumulates in f16, declares f32
  const Wrapped honest(make_model_kernel(f16_acc), f16_acc, 0.0f);
  const Verdict lie = precision_gate(p, lying, oracle);
  EXPECT_FALSE(lie.passed) << lie.detail;
  EXPECT_NE(lie.detail.find("its error pattern is reproduced by a model with the accumulator in f16 (declared f32)"),
            std::string::npos)
      << lie.detail;
  const Verdict truth = precision_gate(p, honest, oracle);
  EXPECT_TRUE(truth.passed && truth.exercised) << truth.detail;
  EXPECT_TRUE(matches_reference(p, honest, oracle).passed);
}

// Gate 2 names the rounding its evidence points at: the model kernels that reproduce the error
// and those that do not. P rounded to bf16, or the inputs rounded to f16 on entry, behind an f32
// declaration: each is named; the accumulator (a different error) is not.
TEST(Precision, GateTwoNamesTheRoundingBehindTheError) {
  class RoundsOnEntry final : public Kernel {
   public:
    std::string name() const override { return "rounds-on-entry"; }
    Capabilities capabilities() const override { return inner_->capabilities(); }
    void forward(const Problem& p, std::span<float> o, std::span<float> lse) const override {
      Problem rounded = p;
      for (auto* buffer : {&rounded.q, &rounded.k, &rounded.v})
        for (float& x : *buffer) x = round_to(x, Scalar::kF16);
      inner_->forward(rounded, o, lse);
    }

   private:
    std::unique_ptr<Kernel> inner_ = make_faulty_tiled_kernel({32, 32}, KernelFaults{}, "tiled-scalar");
  } on_entry;
  // The tiled kernel (online softmax over 32-key tiles: another summation order than the model's).
  Precision p_bf16;
  p_bf16.p = Scalar::kBF16;
  const Wrapped rounds_p(make_faulty_tiled_kernel({32, 32, p_bf16}, KernelFaults{}, "tiled-scalar"), Precision{}, 0.0f);
  const Problem p = long_problem(256, Scalar::kF32);
  Oracle oracle;
  const Verdict entry = precision_gate(p, on_entry, oracle);
  EXPECT_FALSE(entry.passed) << entry.detail;
  EXPECT_NE(entry.detail.find("its error pattern is reproduced by a model with Q, K and V rounded to f16 on entry"),
            std::string::npos)
      << entry.detail;
  EXPECT_EQ(entry.detail.find("accumulator"), std::string::npos) << entry.detail;
  // Online softmax rounds P before normalising, against another running max: the pattern differs,
  // the size does not; the bf16 accumulator (an error 35x larger) is not named.
  const Verdict weights = precision_gate(p, rounds_p, oracle);
  EXPECT_FALSE(weights.passed) << weights.detail;
  EXPECT_NE(weights.detail.find("of the same size (within 2x): "), std::string::npos) << weights.detail;
  EXPECT_NE(weights.detail.find("P in bf16 (declared f32)"), std::string::npos) << weights.detail;
  EXPECT_EQ(weights.detail.find("the accumulator in bf16"), std::string::npos) << weights.detail;
}

// A kernel that accumulates in bf16 over 2048 keys has an infinite bound: the check is not a
// pass (it says "bound vacuous"), even for a kernel adding +100 to an output in [-1, 1]; gate 2
// still runs and catches the +100.
TEST(Precision, VacuousBoundNeverPassesByItself) {
  Precision bf16_everywhere = storage_only(Scalar::kBF16);
  bf16_everywhere.scores = bf16_everywhere.p = bf16_everywhere.accumulator = Scalar::kBF16;
  const Problem p = long_problem(2048, Scalar::kBF16);
  Oracle oracle;
  for (float offset : {0.0f, 100.0f}) {
    const Wrapped kernel(make_model_kernel(bf16_everywhere), bf16_everywhere, offset);
    const Verdict v = matches_reference(p, kernel, oracle);
    EXPECT_FALSE(v.passed && v.exercised) << "offset " << offset << ": " << v.detail;
    EXPECT_NE(v.detail.find("bound vacuous"), std::string::npos) << v.detail;
  }
  const Wrapped shifted(make_model_kernel(bf16_everywhere), bf16_everywhere, 100.0f);
  EXPECT_FALSE(precision_gate(p, shifted, oracle).passed);
}

// Replay on a vacuous bound: never "PASS (err/bound 0)"; it says what it did not check and gate 2
// decides (the +100 kernel fails, the correct one passes).
TEST(Precision, ReplayOfAVacuousBoundAsksGateTwo) {
  Precision bf16_everywhere = storage_only(Scalar::kBF16);
  bf16_everywhere.scores = bf16_everywhere.p = bf16_everywhere.accumulator = Scalar::kBF16;
  const Problem p = long_problem(2048, Scalar::kBF16);
  Oracle oracle;
  const Wrapped correct(make_model_kernel(bf16_everywhere), bf16_everywhere, 0.0f);
  const Wrapped shifted(make_model_kernel(bf16_everywhere), bf16_everywhere, 100.0f);
  for (const Wrapped* kernel : {&correct, &shifted}) {
    const ReplayOutcome r = replay_check(find_property("matches_reference"), p, *kernel, oracle);
    EXPECT_NE(r.text.find("not checked by matches_reference: bound vacuous"), std::string::npos) << r.text;
    EXPECT_EQ(r.text.find("PASS (err/bound"), std::string::npos) << r.text;
    EXPECT_EQ(r.exit_code, kernel == &correct ? 0 : 1) << r.text;
    EXPECT_NE(r.text.find(kernel == &correct ? "gate 2 (precision_gate): PASS" : "gate 2 (precision_gate): FAIL"),
              std::string::npos)
        << r.text;
  }
}

// A saved problem that uses a feature the kernel does not declare is not replayed (exit 2): a
// kernel that ignores softcap would otherwise "pass" a check that never ran.
TEST(Precision, ReplayRefusesAProblemOutsideTheDeclaration) {
  class NoSoftcap final : public Kernel {
   public:
    std::string name() const override { return "no-softcap"; }
    Capabilities capabilities() const override {
      Capabilities c = inner_->capabilities();
      c.features.erase(Feature::kSoftcap);
      return c;
    }
    void forward(const Problem& p, std::span<float> o, std::span<float> lse) const override {
      Problem plain = p;
      plain.modifiers.softcap.reset();
      inner_->forward(plain, o, lse);
    }

   private:
    std::unique_ptr<Kernel> inner_ = make_loop_kernel();
  } kernel;
  Problem p = long_problem(64, Scalar::kF32);
  p.modifiers.softcap = 5.0;
  Oracle oracle;
  const ReplayOutcome r = replay_check(find_property("matches_reference"), p, kernel, oracle);
  EXPECT_EQ(r.exit_code, 2) << r.text;
  EXPECT_NE(r.text.find("not replayed: the problem uses softcap, which the kernel does not declare"), std::string::npos)
      << r.text;
  // A property that does not apply to the kernel (decode, for one without sessions) checks nothing either.
  p.modifiers.softcap.reset();
  const ReplayOutcome decode = replay_check(find_property("decode_matches_prefill"), p, kernel, oracle);
  EXPECT_EQ(decode.exit_code, 2) << decode.text;
  EXPECT_NE(decode.text.find("nothing was checked"), std::string::npos) << decode.text;
}

}  // namespace
}  // namespace attest
