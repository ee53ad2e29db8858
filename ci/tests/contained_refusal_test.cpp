// A declaration the C ABI refuses reaches the caller of attest::api::certify as one line, the same
// whether the kernel runs contained (a forked child, the default) or in process. In process it was
// not refused at all: certify judged the kernel against a declaration no plugin could make.
#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <string>

#include "attest/certify_api.h"
#include "attest/kernels/builtin_kernels.h"

namespace attest {
namespace {

// The loop kernel with one field of its declaration changed.
class Declares final : public Kernel {
 public:
  explicit Declares(std::function<void(Capabilities&)> change) : change_(std::move(change)) {}
  std::string name() const override { return "declares"; }
  Capabilities capabilities() const override {
    Capabilities c = inner_->capabilities();
    change_(c);
    return c;
  }
  void forward(const Problem& p, std::span<float> o, std::span<float> lse) const override {
    inner_->forward(p, o, lse);
  }
  void backward(const Problem& p, const BackwardInputs& in, const GradientSpans& out) const override {
    inner_->backward(p, in, out);
  }
  void forward_packed(const PackedCall& call, std::span<float> o, std::span<float> lse) const override {
    inner_->forward_packed(call, o, lse);  // the loop kernel declares the packed layout too
  }

 private:
  std::function<void(Capabilities&)> change_;
  std::unique_ptr<Kernel> inner_ = make_loop_kernel();
};

// What certify throws, or why it threw nothing.
std::string refusal(const Kernel& kernel, bool in_process) {
  api::CertifyOptions o;
  o.size_stages = false;
  o.in_process = in_process;
  o.timeout_seconds = 5;
  o.out_dir = ::testing::TempDir() + "refused";
  try {
    return "no refusal: " + api::certify(kernel, o).verdict;
  } catch (const KernelLoadError& e) {
    return e.what();
  }
}

struct Case {
  const char* name;
  std::function<void(Capabilities&)> change;
  const char* needle;  // the ABI's words for the field
};

class ContainedRefusalTest : public ::testing::TestWithParam<Case> {};

TEST_P(ContainedRefusalTest, IsOneLineAndTheSameInProcessAndContained) {
  const Declares kernel(GetParam().change);
  const std::string contained = refusal(kernel, false), in_process = refusal(kernel, true);
  EXPECT_EQ(contained, in_process);
  EXPECT_NE(contained.find(GetParam().needle), std::string::npos) << contained;
  EXPECT_EQ(contained.find("the in-process kernel declares: descriptor: "), 0u) << contained;
  EXPECT_EQ(contained.find('\n'), std::string::npos) << contained;
}

INSTANTIATE_TEST_SUITE_P(
    Declarations, ContainedRefusalTest,
    ::testing::Values(Case{"ValueRangeBelowOne", [](Capabilities& c) { c.contract.max_abs_value = 0.5; },
                           "contract.max_abs_value is 0.5"},
                      Case{"NegativeTile", [](Capabilities& c) { c.contract.query_tile = -1; }, "contract tiles"},
                      Case{"HeadWidthZero", [](Capabilities& c) { c.contract.head_dims = {0}; },
                           "contract.head_dims holds 0"},
                      Case{"EmptyRange",
                           [](Capabilities& c) {
                             c.contract.k_len = {5, 2};
                           },
                           "min > max"},
                      Case{"PagesWithoutDecode", [](Capabilities& c) { c.page_tokens = 16; },
                           "page_tokens without ATTEST_CAP_DECODE"}),
    [](const auto& info) { return std::string(info.param.name); });

// A declaration the ABI takes is certified as before, both ways.
TEST(ContainedRefusal, AnAcceptedDeclarationIsCertified) {
  const Declares kernel([](Capabilities&) {});
  EXPECT_EQ(refusal(kernel, false).find("no refusal: CERTIFIED declares"), 0u);
  EXPECT_EQ(refusal(kernel, true).find("no refusal: CERTIFIED declares"), 0u);
}

}  // namespace
}  // namespace attest
