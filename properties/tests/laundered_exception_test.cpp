// An in-process kernel cannot dodge a case by rethrowing a genuine OutsideDeclaration (one attest
// raised, caught by the kernel from a call of its own) from a decode session or a block-table
// call: those calls fail the case as a forward call does, never report it "not exercised".
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "attest/kernels/builtin_kernels.h"
#include "attest/properties/harness.h"
#include "attest/properties/property_driver.h"

namespace attest {
namespace {

// A genuine OutsideDeclaration: decode_q8 takes no forward call, so attest refuses to make one.
[[noreturn]] void rethrow_attests_own() {
  const auto decode_only = make_quantized_decode_kernel(Scalar::kQ8);
  Problem p;
  p.shape = {.batch = 1, .heads = 1, .kv_heads = 1, .q_len = 1, .k_len = 1, .head_dim = 4, .value_dim = 4};
  p.resize_buffers();
  try {
    run_guarded(*decode_only, p);
  } catch (const OutsideDeclaration&) {
    throw;
  }
  throw std::logic_error("attest ran a forward call on a decode-only kernel");
}

class LaunderedSession final : public DecodeSession {
 public:
  explicit LaunderedSession(std::unique_ptr<DecodeSession> inner) : inner_(std::move(inner)) {}
  void step(int n, std::span<const float> q, std::span<const float> k, std::span<const float> v, std::span<float> o,
            std::span<float> lse) override {
    if (inner_->length() + n > 8) rethrow_attests_own();
    inner_->step(n, q, k, v, o, lse);
  }
  long long length() const override { return inner_->length(); }
  std::size_t cache_bytes() const override { return inner_->cache_bytes(); }

 private:
  std::unique_ptr<DecodeSession> inner_;
};

// decode_q8, but past 8 tokens in a session, and on every block-table call, it rethrows attest's own.
class Launderer final : public Kernel {
 public:
  std::string name() const override { return "launderer"; }
  Capabilities capabilities() const override { return inner_->capabilities(); }
  void forward(const Problem&, std::span<float>, std::span<float>) const override {}
  std::unique_ptr<DecodeSession> open_decode(const DecodeConfig& c) const override {
    return std::make_unique<LaunderedSession>(inner_->open_decode(c));
  }
  std::size_t page_bytes(const DecodeConfig& c) const override { return inner_->page_bytes(c); }
  void decode_paged(const DecodeConfig&, const PagedStep&) const override { rethrow_attests_own(); }

 private:
  std::unique_ptr<Kernel> inner_ = make_quantized_decode_kernel(Scalar::kQ8);
};

DriveResult drive(const std::string& property, const Kernel& kernel) {
  DriveOptions options;
  options.cases = 20;
  options.seed = 20261206;
  options.shrink = false;
  return drive_property(find_property(property), kernel, options);
}

TEST(LaunderedOutsideDeclaration, FailsADecodeSessionCase) {
  const DriveResult r = drive("decode_matches_prefill", Launderer());
  EXPECT_FALSE(r.passed) << r.effective << " of " << r.asked << " cases exercised";
  EXPECT_NE(r.message.find("OutsideDeclaration"), std::string::npos) << r.message;
}

TEST(LaunderedOutsideDeclaration, FailsABlockTableCase) {
  const DriveResult r = drive("page_order_invariance", Launderer());
  EXPECT_FALSE(r.passed) << r.effective << " of " << r.asked << " cases exercised";
  EXPECT_NE(r.message.find("OutsideDeclaration"), std::string::npos) << r.message;
}

}  // namespace
}  // namespace attest
