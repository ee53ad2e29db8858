// A forward (not decode-only) kernel with quantized K/V: every problem attest builds or edits for it
// is one its storage holds, and the exact kernel of that declaration is certified by each property.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include "attest/kernels/builtin_kernels.h"
#include "attest/properties/generators.h"
#include "attest/properties/properties.h"
#include "attest/properties/property_driver.h"

namespace attest {
namespace {

Capabilities quantized_forward(Scalar format) {
  Precision declared;
  declared.k = declared.v = format;
  Capabilities caps = make_model_kernel(declared)->capabilities();
  caps.contract.dk_equals_dv = true;
  return caps;
}

TEST(QuantizedForward, PoisonedValueClassBuildsValidProblems) {
  for (Scalar format : {Scalar::kQ8, Scalar::kQ4}) {
    const Capabilities caps = quantized_forward(format);
    ProblemNeeds needs;
    needs.masked = true;
    needs.force = {"values: poison"};
    const rc::Gen<ProblemSpec> gen = gen_spec(caps, needs);
    int invalid = 0;
    std::string first;
    for (int seed = 0; seed < 200; ++seed) {
      const Problem p = build_problem(gen(rc::Random(seed), 100).value(), caps, needs);
      try {
        p.validate();
      } catch (const std::exception& e) {
        if (!invalid++) first = e.what();
      }
    }
    EXPECT_EQ(invalid, 0) << to_string(format) << ": " << first;
  }
}

// The exact kernel of a q8 (q4) K/V forward declaration with mask terms passes every property it
// is held to: V = 1 and V = I probes included (1.0 has no exact q8 encoding: its nearest is sent).
class QuantizedModel final : public Kernel {
 public:
  explicit QuantizedModel(Scalar format) : caps_(quantized_forward(format)) {
    Precision declared;
    declared.k = declared.v = format;
    inner_ = make_model_kernel(declared);
  }
  std::string name() const override { return "quantized-model"; }
  Capabilities capabilities() const override { return caps_; }
  void forward(const Problem& p, std::span<float> o, std::span<float> lse) const override {
    inner_->forward(p, o, lse);
  }

 private:
  Capabilities caps_;
  std::unique_ptr<Kernel> inner_;
};

TEST(QuantizedForward, ExactKernelPassesEveryProperty) {
  for (Scalar format : {Scalar::kQ8, Scalar::kQ4}) {
    const QuantizedModel kernel(format);
    int driven = 0;
    for (const PropertyInfo& property : property_catalogue()) {
      if (!not_covered_because(property, kernel.capabilities()).empty()) continue;
      DriveOptions options;
      options.cases = 40;
      options.seed = 20261203;
      const DriveResult r = drive_property(property, kernel, options);
      EXPECT_TRUE(r.passed) << to_string(format) << " " << property.name << ": " << r.message;
      ++driven;
    }
    EXPECT_GE(driven, 15) << to_string(format);
  }
}

}  // namespace
}  // namespace attest
