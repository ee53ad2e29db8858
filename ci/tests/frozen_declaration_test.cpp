// A kernel's declaration is read once per certification: an in-process kernel whose capabilities()
// narrow its contract after the first call (so that checks skip what it gets wrong) fails, and the
// checks keep to the declaration it first gave.
#include <gtest/gtest.h>

#include <algorithm>

#include "attest/builtin_kernels.h"
#include "certify.h"

namespace attest {
namespace {

// The loop kernel, 0.1% off past 8 keys, claiming Tk up to 4096 until its first call, then 8.
class Narrowing final : public Kernel {
 public:
  std::string name() const override { return "narrowing"; }
  Capabilities capabilities() const override {
    Capabilities caps = inner_->capabilities();
    caps.contract.k_len = {1, calls_ > 0 ? 8 : 4096};
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
  mutable int calls_ = 0;
};

TEST(FrozenDeclaration, ANarrowedContractFailsTheCall) {
  const Narrowing kernel;
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

}  // namespace
}  // namespace attest
