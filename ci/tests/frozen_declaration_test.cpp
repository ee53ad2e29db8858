// A kernel's declaration is read once per certification: an in-process kernel whose capabilities()
// narrow its contract after the first call (so that checks skip what it gets wrong) fails, and the
// checks keep to the declaration it first gave.
#include <gtest/gtest.h>

#include <algorithm>

#include "attest/kernels/builtin_kernels.h"
#include "certify.h"

namespace attest {
namespace {

// The loop kernel, 0.1% off past 8 keys, claiming Tk up to 4096 until its first call (or from its
// second reading of capabilities() on), then 8.
class Narrowing final : public Kernel {
 public:
  explicit Narrowing(bool after_first_read) : after_first_read_(after_first_read) {}
  std::string name() const override { return "narrowing"; }
  Capabilities capabilities() const override {
    Capabilities caps = inner_->capabilities();
    const bool narrow = after_first_read_ ? reads_++ > 0 : calls_ > 0;
    caps.contract.k_len = {1, narrow ? 8 : 4096};
    return caps;
  }
  void forward(const Problem& p, std::span<float> o, std::span<float> lse) const override {
    ++calls_;
    inner_->forward(p, o, lse);
    if (p.shape.k_len > 8)
      for (float& x : o) x *= 1.001f;
  }

 private:
  std::unique_ptr<Kernel> inner_ = make_loop_kernel();
  const bool after_first_read_;
  mutable int calls_ = 0, reads_ = 0;
};

class FrozenDeclarationTest : public ::testing::TestWithParam<bool> {};

TEST_P(FrozenDeclarationTest, ANarrowedContractFailsTheCall) {
  const Narrowing kernel(GetParam());
  Oracle oracle(64);
  CertifyOptions options;
  options.property_cases = 5;
  options.seed = 3;
  options.progress = false;
  options.sized_stages = false;
  options.out_dir = ::testing::TempDir() + "frozen-declaration";
  const std::vector<CheckResult> results = certify_kernel(kernel, oracle, options);
  ASSERT_FALSE(results.empty());
  EXPECT_TRUE(std::any_of(results.begin(), results.end(), [](const CheckResult& r) {
    return r.first_failure.find("capabilities() changed") != std::string::npos;
  }));
  EXPECT_FALSE(std::all_of(results.begin(), results.end(), [](const CheckResult& r) { return r.passed(); }));
}

INSTANTIATE_TEST_SUITE_P(FrozenDeclaration, FrozenDeclarationTest, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? "AfterItsFirstReading" : "AfterItsFirstCall"; });

}  // namespace
}  // namespace attest
