// Flushed subnormals declared (ABI 2.9): the model kernel with FTZ and DAZ set in every call (how
// a wasm, GPU or -ffast-math build computes) is CERTIFIED when it declares it, NOT CERTIFIED when
// it does not, and a kernel declaring it that zeroes normal weights (below 2^-100) is NOT CERTIFIED.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "attest/kernels/builtin_kernels.h"
#include "attest/mutants/mutants.h"
#include "attest/properties/compare.h"
#include "attest/properties/oracle.h"
#include "attest/properties/precision_gate.h"
#include "attest/reference/error_bound.h"
#include "quick_certification.h"

namespace attest {
namespace {

Precision flushing() {
  Precision p;
  p.flush_subnormals = true;
  return p;
}

// Computes with FTZ/DAZ (the model kernel of a flushing precision) and declares `declared`.
class Flushing final : public Kernel {
 public:
  explicit Flushing(bool declared) : inner_(make_model_kernel(flushing())), declared_(declared) {}
  std::string name() const override { return declared_ ? "ftz-declared" : "ftz-undeclared"; }
  Capabilities capabilities() const override {
    Capabilities c = inner_->capabilities();
    c.precision.flush_subnormals = declared_;
    return c;
  }
  void forward(const Problem& p, std::span<float> o, std::span<float> lse) const override {
    inner_->forward(p, o, lse);
  }

 private:
  std::unique_ptr<Kernel> inner_;
  bool declared_;
};

// Two keys 90 apart in logit: the exact output is e^-90 (8.2e-40, subnormal). A flushing kernel's 0
// is within the bound only when it declares the flush; an error of 1e-30 (a normal weight zeroed)
// is not, declared or not.
TEST(FlushSubnormals, TheBoundChargesAFlushAndNothingNormal) {
  Problem p;
  p.shape = {1, 1, 1, 1, 2, 1, 1};
  p.resize_buffers();
  p.scale = 1.0;
  p.q = {1.0f};
  p.k = {0.0f, -90.0f};
  p.v = {0.0f, 1.0f};
  Oracle oracle;
  const Reference& ref = oracle.reference(p);
  ASSERT_GT(ref.o[0], 0.0);
  ASSERT_LT(ref.o[0], 0x1p-126);
  Capabilities kept, flushed;
  flushed.precision = flushing();
  const double kept_bound = output_bound(p, ref, 0, numerics_of(kept, p));
  const double flushed_bound = output_bound(p, ref, 0, numerics_of(flushed, p));
  EXPECT_LT(kept_bound, ref.o[0]);
  EXPECT_GE(flushed_bound, ref.o[0]);
  EXPECT_LT(flushed_bound, 1e-30);
  // Gate 2's relative measure: the flushed output reads as no error once the flush is declared.
  Outputs zero;
  zero.o = {0.0f};
  zero.lse = {0.0f};
  const auto declared = precision_gate_errors_of(p, ref, zero, zero, flushing());
  const auto undeclared = precision_gate_errors_of(p, ref, zero, zero, Precision{});
  ASSERT_TRUE(declared && undeclared);
  EXPECT_EQ(declared->kernel, 0.0);
  EXPECT_GT(undeclared->kernel, 1e6);
}

TEST(FlushSubnormals, AFlushingKernelDeclaringItIsCertified) {
  const Flushing kernel(true);
  const std::vector<std::string> names = blocking_checks(certify_quick(kernel, "ftz-declared"));
  EXPECT_TRUE(names.empty()) << ::testing::PrintToString(names);
}

TEST(FlushSubnormals, AFlushingKernelNotDeclaringItIsNotCertified) {
  const Flushing kernel(false);
  const std::vector<std::string> names = blocking_checks(certify_quick(kernel, "ftz-undeclared"));
  EXPECT_FALSE(names.empty());
}

// The mutant's host with its switch off: the tiled kernel under FTZ/DAZ, declaring it.
TEST(FlushSubnormals, TheTiledKernelFlushingAndDeclaringItIsCertified) {
  const std::unique_ptr<Kernel> kernel = make_faulty_tiled_kernel({32, 32, flushing()}, {}, "tiled-ftz");
  const std::vector<std::string> names = blocking_checks(certify_quick(*kernel, "tiled-ftz"));
  EXPECT_TRUE(names.empty()) << ::testing::PrintToString(names);
}

TEST(FlushSubnormals, ZeroingNormalWeightsIsNotCoveredByTheDeclaration) {
  const std::unique_ptr<Kernel> kernel = find_mutant("flush_above_subnormals").make();
  ASSERT_TRUE(kernel->capabilities().precision.flush_subnormals);
  const std::vector<std::string> names = blocking_checks(certify_quick(*kernel, "ftz-too-high"));
  EXPECT_FALSE(names.empty());
}

}  // namespace
}  // namespace attest
