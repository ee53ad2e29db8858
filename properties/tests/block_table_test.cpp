// Block tables (docs/design.md#serving-caches): the built-in quantized decoder holds ragged_batch_equals_single,
// page_order_invariance and shared_prefix_equals_private in every cache format; each block-table
// mutant fails its property; a call that writes a page holding none of its tokens fails with
// which page; a malformed step is refused with why; only a paged declaration brings the properties.
#include <gtest/gtest.h>

#include <cstring>

#include "attest/kernels/builtin_kernels.h"
#include "attest/mutants/mutants.h"
#include "attest/properties/properties.h"
#include "attest/properties/property_driver.h"

namespace attest {
namespace {

const char* const kBlockTableProperties[] = {"ragged_batch_equals_single", "page_order_invariance",
                                             "shared_prefix_equals_private"};

DriveResult drive(const std::string& property, const Kernel& kernel, int cases = 60) {
  DriveOptions options;
  options.cases = cases;
  options.seed = 20261203;
  return drive_property(find_property(property), kernel, options);
}

TEST(BlockTables, TheQuantizedDecoderHoldsThemInEveryFormat) {
  for (Scalar format : {Scalar::kQ8, Scalar::kQ4, Scalar::kQ8Token, Scalar::kE4M3, Scalar::kE5M2, Scalar::kF16}) {
    const auto kernel = make_quantized_decode_kernel(format);
    for (const char* property : kBlockTableProperties) {
      const DriveResult r = drive(property, *kernel, 24);
      EXPECT_TRUE(r.passed) << kernel->name() << " " << property << ": " << r.message;
      EXPECT_GT(r.effective, r.asked * 3 / 4) << kernel->name() << " " << property;
    }
  }
  // q8_head: its scales are a sequence's own, so its pages are never shared.
  const auto per_head = make_quantized_decode_kernel(Scalar::kQ8Head);
  EXPECT_TRUE(drive("ragged_batch_equals_single", *per_head, 40).passed);
  EXPECT_EQ(not_covered_because(find_property("shared_prefix_equals_private"), per_head->capabilities()),
            "q8_head scales are a sequence's own: its pages are not shared");
}

TEST(BlockTables, EachBlockTableMutantFailsItsProperty) {
  struct Case {
    const char* mutant;
    const char* property;
    const char* says;
  };
  for (const Case& c : {Case{"kv_shared_page_written_through", "shared_prefix_equals_private", "sharing a"},
                        Case{"kv_pages_assumed_contiguous", "page_order_invariance", "pages"},
                        Case{"kv_batch_positions_of_first", "ragged_batch_equals_single", "ragged batch"},
                        Case{"kv_one_token_steps_at_longest", "ragged_batch_equals_single", "ragged batch"}}) {
    const auto mutant = find_mutant(c.mutant).make();
    const DriveResult r = drive(c.property, *mutant);
    ASSERT_FALSE(r.passed) << c.mutant;
    EXPECT_NE(r.message.find(c.says), std::string::npos) << c.mutant << ": " << r.message;
  }
}

// The report's longest case is the one decoded: a long case (past 1024 tokens and a 64-entry
// table) is counted at its own length, not at the drawn problem's.
TEST(BlockTables, TheLongestCaseIsTheLengthDecoded) {
  const auto kernel = make_quantized_decode_kernel(Scalar::kQ8);
  const DriveResult r = drive("page_order_invariance", *kernel, 24);
  ASSERT_TRUE(r.passed) << r.message;
  EXPECT_GT(r.longest_k, 1024);
  EXPECT_GT(r.longest_q, 1024);
}

// decode_q8 that, after each block-table call, changes one byte of the pool's last page (one no
// sequence has taken).
class Scribbler final : public Kernel {
 public:
  std::string name() const override { return "scribbler"; }
  Capabilities capabilities() const override { return inner_->capabilities(); }
  void forward(const Problem&, std::span<float>, std::span<float>) const override {}
  std::unique_ptr<DecodeSession> open_decode(const DecodeConfig& c) const override { return inner_->open_decode(c); }
  std::size_t page_bytes(const DecodeConfig& c) const override { return inner_->page_bytes(c); }
  void decode_paged(const DecodeConfig& c, const PagedStep& step) const override {
    inner_->decode_paged(c, step);
    step.pool[step.pool.size() - 1] ^= std::byte{1};
  }

 private:
  std::unique_ptr<Kernel> inner_ = make_quantized_decode_kernel(Scalar::kQ8);
};

TEST(BlockTables, ACallThatWritesAPageHoldingNoneOfItsTokensFails) {
  const Scribbler kernel;
  for (const char* property : kBlockTableProperties) {
    const DriveResult r = drive(property, kernel, 10);
    ASSERT_FALSE(r.passed) << property;
    EXPECT_NE(r.message.find("holds none of its new tokens"), std::string::npos) << property << ": " << r.message;
  }
}

// decode_q8 with a page size of its own choosing, or a block-table call that throws a load error
// (the kernel host gone mid-run).
class Misdeclared final : public Kernel {
 public:
  Misdeclared(std::size_t page_bytes, bool host_gone) : page_bytes_(page_bytes), host_gone_(host_gone) {}
  std::string name() const override { return "misdeclared"; }
  Capabilities capabilities() const override { return inner_->capabilities(); }
  void forward(const Problem&, std::span<float>, std::span<float>) const override {}
  std::unique_ptr<DecodeSession> open_decode(const DecodeConfig& c) const override { return inner_->open_decode(c); }
  std::size_t page_bytes(const DecodeConfig& c) const override {
    return page_bytes_ ? page_bytes_ : inner_->page_bytes(c);
  }
  void decode_paged(const DecodeConfig& c, const PagedStep& step) const override {
    if (host_gone_) throw KernelLoadError("the kernel host stopped serving: a test's message");
    inner_->decode_paged(c, step);
  }

 private:
  std::unique_ptr<Kernel> inner_ = make_quantized_decode_kernel(Scalar::kQ8);
  std::size_t page_bytes_;
  bool host_gone_;
};

TEST(BlockTables, AHugePageSizeIsRefusedWithTheNumbersNotAllocated) {
  const Misdeclared kernel(std::size_t{1} << 29, false);
  const DriveResult r = drive("ragged_batch_equals_single", kernel, 5);
  ASSERT_FALSE(r.passed);
  EXPECT_NE(r.message.find("pool limit"), std::string::npos) << r.message;
}

TEST(BlockTables, AKernelThatStopsServingKeepsItsMessageAndNamesNoFile) {
  const Misdeclared kernel(0, true);
  const DriveResult r = drive("page_order_invariance", kernel, 5);
  ASSERT_FALSE(r.passed);
  EXPECT_NE(r.message.find("a test's message"), std::string::npos) << r.message;
  EXPECT_EQ(r.counterexample_path, "");  // no problem file holds this failure
}

// decode_q8 whose contract takes one sequence a call: the properties that add a second do not apply.
class OneSequence final : public Kernel {
 public:
  std::string name() const override { return "one-sequence"; }
  Capabilities capabilities() const override {
    Capabilities c = inner_->capabilities();
    c.contract.batch = {1, 1};
    return c;
  }
  void forward(const Problem&, std::span<float>, std::span<float>) const override {}
  std::unique_ptr<DecodeSession> open_decode(const DecodeConfig& c) const override { return inner_->open_decode(c); }
  std::size_t page_bytes(const DecodeConfig& c) const override { return inner_->page_bytes(c); }
  void decode_paged(const DecodeConfig& c, const PagedStep& step) const override {
    if (c.batch != 1) throw ProblemError("one sequence a call");
    inner_->decode_paged(c, step);
  }

 private:
  std::unique_ptr<Kernel> inner_ = make_quantized_decode_kernel(Scalar::kQ8);
};

TEST(BlockTables, ACallOutsideTheContractsBatchIsNeverMade) {
  const OneSequence kernel;
  for (const char* property : {"ragged_batch_equals_single", "shared_prefix_equals_private"}) {
    const DriveResult r = drive(property, kernel, 10);
    EXPECT_TRUE(r.passed) << property << ": " << r.message;
    EXPECT_EQ(r.effective, 0) << property;
  }
  const DriveResult order = drive("page_order_invariance", kernel, 10);
  EXPECT_TRUE(order.passed) << order.message;
  EXPECT_EQ(order.effective, order.asked);
}

TEST(BlockTables, AMalformedStepIsRefusedWithWhy) {
  const auto kernel = make_quantized_decode_kernel(Scalar::kQ8);
  const DecodeConfig config{.batch = 1, .heads = 1, .kv_heads = 1, .head_dim = 4, .value_dim = 4, .scale = 0.5};
  const std::size_t bytes = kernel->page_bytes(config);
  alignas(64) static std::byte pool[1 << 16];
  ASSERT_LE(2 * bytes, sizeof pool);
  std::vector<float> q(4, 1.0f), k(4, 1.0f), v(4, 1.0f), o(4);
  std::vector<std::int64_t> lengths{0};
  std::vector<std::int32_t> counts{1}, table{0};
  auto step = [&] {
    return PagedStep{.pool = {pool, 2 * bytes},
                     .tables = table,
                     .table_width = 1,
                     .lengths = lengths,
                     .counts = counts,
                     .q = q,
                     .k = k,
                     .v = v,
                     .o = o,
                     .lse = {}};
  };
  EXPECT_NO_THROW(kernel->decode_paged(config, step()));
  auto refused = [&](const std::string& why) {
    try {
      kernel->decode_paged(config, step());
    } catch (const ProblemError& e) {
      return std::string(e.what()).find(why) != std::string::npos;
    }
    return false;
  };
  table = {2};
  EXPECT_TRUE(refused("outside the pool"));
  table = {0}, lengths = {16};  // token 16 needs a second page
  EXPECT_TRUE(refused("narrower than its tokens"));
  lengths = {0}, o.resize(3);
  EXPECT_TRUE(refused("sizes do not match"));
  EXPECT_THROW(make_decode_kernel()->decode_paged(config, step()), std::logic_error);
}

TEST(BlockTables, OnlyAPagedDeclarationBringsThem) {
  for (const char* name : kBlockTableProperties) {
    const PropertyInfo& property = find_property(name);
    EXPECT_EQ(not_covered_because(property, make_decode_kernel()->capabilities()),
              "the kernel declares no block-table cache");
    EXPECT_EQ(not_covered_because(property, make_quantized_decode_kernel(Scalar::kQ8)->capabilities()), "");
    const auto decode_only_session = make_decode_kernel();
    const DriveResult r = drive(name, *decode_only_session, 5);
    EXPECT_TRUE(r.passed);
    EXPECT_EQ(r.effective, 0) << name;
  }
}

}  // namespace
}  // namespace attest
