// Flushed subnormals declared (ABI 2.9): the model kernel with FTZ and DAZ set in every call (how
// a wasm, GPU or -ffast-math build computes) is CERTIFIED when it declares it, NOT CERTIFIED when
// it does not, and a kernel declaring it that zeroes normal weights (below 2^-100) is NOT CERTIFIED.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "attest/builtin_kernels.h"
#include "attest/mutants.h"
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
