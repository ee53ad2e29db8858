// Declared cache eviction (docs/design.md#serving-caches): the built-in sinks + recent cache holds
// eviction_matches_retained_set under its rule and when it reports its positions instead
// (explicit), a report that leaves out a position the session attended or names a future one
// fails, and only an evicting declaration brings the property.
#include <gtest/gtest.h>

#include "attest/kernels/builtin_kernels.h"
#include "attest/mutants/mutants.h"
#include "attest/properties/properties.h"
#include "attest/properties/property_driver.h"

namespace attest {
namespace {

DriveResult drive(const std::string& property, const Kernel& kernel, int cases = 60) {
  DriveOptions options;
  options.cases = cases;
  options.seed = 20261203;
  return drive_property(find_property(property), kernel, options);
}

TEST(CachePolicy, RetainsWhatItsRuleNames) {
  const CachePolicy streaming{CachePolicy::Kind::kSinksRecent, 4, 32};
  EXPECT_TRUE(streaming.retains(3, 1000));     // a sink
  EXPECT_FALSE(streaming.retains(4, 1000));    // past the sinks, far from the query
  EXPECT_FALSE(streaming.retains(968, 1000));  // p - j = 32: one past the recent 32
  EXPECT_TRUE(streaming.retains(969, 1000));
  EXPECT_EQ(streaming.exact_up_to(), 36);
  EXPECT_EQ(streaming.summary(), "sinks 4 + recent 32");
  const CachePolicy window{CachePolicy::Kind::kWindow, 0, 8};
  EXPECT_FALSE(window.retains(0, 8));
  EXPECT_TRUE(window.retains(1, 8));
  EXPECT_EQ(window.exact_up_to(), 8);
  EXPECT_THROW((CachePolicy{CachePolicy::Kind::kSinksRecent, 0, 32}.validate()), std::invalid_argument);
  EXPECT_THROW((CachePolicy{CachePolicy::Kind::kWindow, 2, 8}.validate()), std::invalid_argument);
  EXPECT_THROW((CachePolicy{CachePolicy::Kind::kExplicit, 0, 8}.validate()), std::invalid_argument);
}

TEST(Eviction, TheCacheKeepsWhatItDeclares) {
  // sinks + recent, a window (no sinks), and both reporting their positions instead (explicit).
  for (const int sinks : {4, 0})
    for (const bool reported : {false, true}) {
      const auto kernel = make_sinks_recent_decode_kernel(sinks, 32, reported);
      const DriveResult r = drive("eviction_matches_retained_set", *kernel);
      EXPECT_TRUE(r.passed) << kernel->name() << ": " << r.message;
      EXPECT_EQ(r.effective, r.asked) << kernel->name();
    }
  EXPECT_EQ(make_sinks_recent_decode_kernel(0, 32)->capabilities().cache.summary(), "window 32");
}

TEST(Eviction, BelowItsFirstEvictionTheCacheIsExactAttention) {
  for (const int sinks : {4, 0}) {
    const auto kernel = make_sinks_recent_decode_kernel(sinks, 32);
    for (const char* property : {"decode_matches_prefill", "masked_inputs_have_no_influence", "overflow_safe"}) {
      const DriveResult r = drive(property, *kernel);
      EXPECT_TRUE(r.passed) << kernel->name() << " " << property << ": " << r.message;
      EXPECT_GT(r.effective, r.asked * 3 / 4) << kernel->name() << " " << property;
    }
  }
}

TEST(Eviction, EachEvictionMutantFailsOnTheRetainedSet) {
  for (const char* name : {"eviction_fencepost", "ring_wrap_current_lap", "sinks_evicted"}) {
    const auto mutant = find_mutant(name).make();
    const DriveResult r = drive("eviction_matches_retained_set", *mutant);
    ASSERT_FALSE(r.passed) << name;
    EXPECT_NE(r.message.find("decode of"), std::string::npos) << name << ": " << r.message;
    EXPECT_NE(r.message.find("sinks 4 + recent 32"), std::string::npos) << name << ": " << r.message;
  }
}

TEST(Eviction, OnlyAnEvictingDeclarationBringsTheProperty) {
  const PropertyInfo& property = find_property("eviction_matches_retained_set");
  EXPECT_EQ(not_covered_because(property, make_decode_kernel()->capabilities()),
            "the kernel declares no cache eviction");
  EXPECT_EQ(not_covered_because(property, make_sinks_recent_decode_kernel()->capabilities()), "");
  // An explicit cache has no rule to compare a full prefill with.
  EXPECT_NE(not_covered_because(find_property("decode_matches_prefill"),
                                make_sinks_recent_decode_kernel(4, 32, true)->capabilities()),
            "");
}

// The explicit sinks + recent cache with its reports edited: `edit` changes query t's positions.
template <typename Edit>
class EditedReports final : public Kernel {
 public:
  explicit EditedReports(Edit edit) : inner_(make_sinks_recent_decode_kernel(4, 32, true)), edit_(edit) {}
  std::string name() const override { return "edited-reports"; }
  Capabilities capabilities() const override { return inner_->capabilities(); }
  void forward(const Problem&, std::span<float>, std::span<float>) const override {}
  std::unique_ptr<DecodeSession> open_decode(const DecodeConfig& c) const override {
    return std::make_unique<Session>(inner_->open_decode(c), edit_);
  }

 private:
  class Session final : public DecodeSession {
   public:
    Session(std::unique_ptr<DecodeSession> inner, Edit edit) : inner_(std::move(inner)), edit_(edit) {}
    void step(int n, std::span<const float> q, std::span<const float> k, std::span<const float> v, std::span<float> o,
              std::span<float> lse) override {
      inner_->step(n, q, k, v, o, lse);
    }
    long long length() const override { return inner_->length(); }
    std::size_t cache_bytes() const override { return inner_->cache_bytes(); }
    std::vector<long long> retained_positions(int b, int t) const override {
      std::vector<long long> kept = inner_->retained_positions(b, t);
      edit_(kept, inner_->length());
      return kept;
    }

   private:
    std::unique_ptr<DecodeSession> inner_;
    Edit edit_;
  };
  std::unique_ptr<Kernel> inner_;
  Edit edit_;
};

TEST(Eviction, AReportThatLeavesOutAnAttendedPositionFails) {
  // The oldest recent position (after the sinks) is attended but not reported.
  const EditedReports kernel([](std::vector<long long>& kept, long long) {
    if (kept.size() > 5) kept.erase(kept.begin() + 4);
  });
  const DriveResult r = drive("eviction_matches_retained_set", kernel);
  ASSERT_FALSE(r.passed);
  EXPECT_NE(r.message.find("explicit"), std::string::npos) << r.message;
}

TEST(Eviction, AReportNamingAFuturePositionFailsWithWhy) {
  const EditedReports kernel([](std::vector<long long>& kept, long long length) { kept.push_back(length + 3); });
  const DriveResult r = drive("eviction_matches_retained_set", kernel);
  ASSERT_FALSE(r.passed);
  EXPECT_NE(r.message.find("reported retained position"), std::string::npos) << r.message;
}

}  // namespace
}  // namespace attest
