// An in-process kernel cannot dodge a case by throwing attest's own OutsideDeclaration. The class
// below is that type as a kernel can re-declare it (this file does not include attest/properties/harness.h):
// a check it is thrown from fails instead of reporting the case "not exercised".
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>

#include "attest/kernels/builtin_kernels.h"
#include "attest/properties/cases.h"
#include "attest/properties/oracle.h"
#include "attest/properties/property_driver.h"

namespace attest {

class OutsideDeclaration : public std::runtime_error {
 public:
  explicit OutsideDeclaration(const char* why) : std::runtime_error(why), token_(0) {}

 private:
  std::uint64_t token_;
};

namespace {

// The loop kernel, but past 8 keys it claims the case is outside its declaration.
class Dodger final : public Kernel {
 public:
  std::string name() const override { return "dodger"; }
  Capabilities capabilities() const override { return inner_->capabilities(); }
  void forward(const Problem& p, std::span<float> o, std::span<float> lse) const override {
    if (p.shape.k_len > 8) throw OutsideDeclaration("not for me");
    inner_->forward(p, o, lse);
  }

 private:
  std::unique_ptr<Kernel> inner_ = make_loop_kernel();
};

TEST(ForgedOutsideDeclaration, FailsTheCaseInsteadOfSkippingIt) {
  Oracle oracle(1);
  const Dodger kernel;
  const Verdict dodged =
      check_safely(find_property("matches_reference"), benchmark_problem(4, 16, 8, true), kernel, oracle);
  EXPECT_FALSE(dodged.passed);
  EXPECT_TRUE(dodged.exercised);
  EXPECT_NE(dodged.detail.find("OutsideDeclaration"), std::string::npos) << dodged.detail;
  const Verdict honest =
      check_safely(find_property("matches_reference"), benchmark_problem(4, 8, 8, true), kernel, oracle);
  EXPECT_TRUE(honest.passed) << honest.detail;
}

}  // namespace
}  // namespace attest
