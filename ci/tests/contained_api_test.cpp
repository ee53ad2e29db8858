// attest::api::certify runs a caller's in-process kernel in a forked child by default: an exit(0), a
// crash or a hang in the kernel fails a check with a message saying so, and the caller's process
// (a GoogleTest binary, whose exit 0 ctest would count as a pass) runs on. in_process = true keeps
// the kernel in the caller's process, and the verdict line says so.
#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>

#include "attest/certify_api.h"
#include "attest/gtest.h"
#include "attest/kernels/builtin_kernels.h"
#include "quick_api_options.h"

namespace attest {
namespace {

enum class Misdeed { kNone, kExit0, kCrash, kHang };

// The loop kernel, misbehaving on its 40th forward call. The count lives in memory shared with the
// children, so the misdeed happens once, not in every fresh child.
class Misbehaving final : public Kernel {
 public:
  explicit Misbehaving(Misdeed misdeed) : misdeed_(misdeed) {
    void* shared = ::mmap(nullptr, sizeof(int), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    calls_ = static_cast<int*>(shared == MAP_FAILED ? nullptr : shared);
  }
  ~Misbehaving() override {
    if (calls_) ::munmap(calls_, sizeof(int));
  }
  std::string name() const override { return "misbehaving"; }
  Capabilities capabilities() const override { return inner_->capabilities(); }
  void backward(const Problem& p, const BackwardInputs& in, const GradientSpans& out) const override {
    inner_->backward(p, in, out);
  }
  void forward_packed(const PackedCall& call, std::span<float> o, std::span<float> lse) const override {
    inner_->forward_packed(call, o, lse);  // the loop kernel declares the packed layout too
  }
  void forward(const Problem& p, std::span<float> o, std::span<float> lse) const override {
    if (calls_ && ++*calls_ == 40) {
      if (misdeed_ == Misdeed::kExit0) std::exit(0);
      if (misdeed_ == Misdeed::kCrash) std::abort();
      if (misdeed_ == Misdeed::kHang)
        for (;;) ::pause();
    }
    inner_->forward(p, o, lse);
  }

 private:
  std::unique_ptr<Kernel> inner_ = make_loop_kernel();
  const Misdeed misdeed_;
  int* calls_ = nullptr;
};

api::CertifyOptions quick(const std::string& out) { return quick_api_options(out, 5); }

struct Case {
  Misdeed misdeed;
  const char* name;
  const char* needle;  // in the first failure's explanation
};

class ContainedApiTest : public ::testing::TestWithParam<Case> {};

TEST_P(ContainedApiTest, TheKernelsMisdeedFailsACheckAndTheCallerRunsOn) {
  const api::Certificate c = api::certify(Misbehaving(GetParam().misdeed), quick(GetParam().name));
  EXPECT_FALSE(c.certified) << c.verdict;
  ASSERT_FALSE(c.failed().empty()) << c.report;
  bool named = false;
  for (const api::Check* check : c.failed()) named |= check->first_failure.find(GetParam().needle) != std::string::npos;
  EXPECT_TRUE(named) << "no failure mentions '" << GetParam().needle << "':\n" << c.report;
}

INSTANTIATE_TEST_SUITE_P(Misdeeds, ContainedApiTest,
                         ::testing::Values(Case{Misdeed::kExit0, "Exit0", "exit"},
                                           Case{Misdeed::kCrash, "Crash", "crashed with signal 6"},
                                           Case{Misdeed::kHang, "Hang", "did not answer"}),
                         [](const auto& info) { return std::string(info.param.name); });

// The same through the GoogleTest macro a kernel's suite uses: the kernel's exit(0) is a failed
// assertion of this test, and the suite runs on.
TEST(ContainedApi, ExpectCertifiedFailsOnAKernelThatExits) {
  EXPECT_NONFATAL_FAILURE(EXPECT_CERTIFIED(Misbehaving(Misdeed::kExit0), quick("expect-exit0")), "exited with code 0");
}

TEST(ContainedApi, ACorrectKernelIsCertifiedContained) {
  const api::Certificate c = api::certify(Misbehaving(Misdeed::kNone), quick("correct"));
  EXPECT_TRUE(c.certified) << c.report;
  EXPECT_EQ(c.verdict.find("in process"), std::string::npos) << c.verdict;
}

// A per-call limit of 0 would call every kernel hung: refused, like --timeout 0.
TEST(ContainedApi, ATimeoutOfZeroIsRefused) {
  api::CertifyOptions o = quick("zero-timeout");
  o.timeout_seconds = 0;
  EXPECT_THROW(api::certify(Misbehaving(Misdeed::kNone), o), std::invalid_argument);
}

TEST(ContainedApi, InProcessIsNamedInTheVerdict) {
  api::CertifyOptions o = quick("in-process");
  o.in_process = true;
  const api::Certificate c = api::certify(Misbehaving(Misdeed::kNone), o);
  EXPECT_TRUE(c.certified) << c.report;
  EXPECT_NE(c.verdict.find("; in process, not contained"), std::string::npos) << c.verdict;
}

}  // namespace
}  // namespace attest
