// The quantized KV formats end to end: attest draws K and V in each format, the built-in
// quantized-cache decoder (correct) holds every session property in every format (and with an
// f16 cache), and the problems it is given really are in the format.
#include <gtest/gtest.h>

#include <cmath>

#include "attest/kernels/builtin_kernels.h"
#include "attest/model/quantized.h"
#include "attest/mutants/mutants.h"
#include "attest/properties/generators.h"
#include "attest/properties/properties.h"
#include "attest/properties/property_driver.h"

namespace attest {
namespace {

class QuantizedDecoder : public ::testing::TestWithParam<Scalar> {};

}  // namespace

void PrintTo(Scalar s, std::ostream* os) { *os << to_string(s); }

namespace {

TEST_P(QuantizedDecoder, HoldsEverySessionPropertyOnValuesInItsFormat) {
  const auto kernel = make_quantized_decode_kernel(GetParam());
  for (const char* property : {"decode_matches_prefill", "masked_inputs_have_no_influence", "overflow_safe"}) {
    DriveOptions options;
    options.cases = 60;
    options.seed = 20261203;
    const DriveResult r = drive_property(find_property(property), *kernel, options);
    EXPECT_TRUE(r.passed) << kernel->name() << " " << property << ": " << r.message;
    EXPECT_GT(r.effective, r.asked / 2) << kernel->name() << " " << property;
  }
}

TEST_P(QuantizedDecoder, DrawsKAndVInTheFormatWithItsSpecialGroups) {
  const auto kernel = make_quantized_decode_kernel(GetParam());
  const Capabilities caps = kernel->capabilities();
  const rc::Gen<ProblemSpec> gen = gen_spec(caps);
  int rows = 0, zero_groups = 0, largest = 0;
  for (int i = 0; i < 200; ++i) {
    const Problem p = build_problem(gen(rc::Random(1000 + i), 100).value(), caps);
    ASSERT_EQ(p.storage.k, GetParam());
    ASSERT_NO_THROW(p.validate());  // K and V representable, a group at a time
    ASSERT_TRUE(rows_representable(p.k, fit_width(GetParam(), p.shape.k_len, p.shape.head_dim), GetParam()));
    // Each row's first group (fp8: the row) is drawn all zero one time in 16.
    const int width = p.shape.value_dim, group = scaled(GetParam()) ? group_width(GetParam(), width) : width;
    for (std::size_t r = 0; r < p.v.size(); r += width, ++rows) {
      bool zero = true;
      for (int c = 0; c < group; ++c) zero = zero && p.v[r + c] == 0.0f;
      for (int c = 0; c < width; ++c)
        largest += !scaled(GetParam()) && std::fabs(p.v[r + c]) == float(info(GetParam()).max_finite);
      zero_groups += zero;
    }
  }
  if (GetParam() == Scalar::kF16) return;  // drawn as any 16-bit storage: no groups, no special values
  EXPECT_GT(zero_groups, rows / 100) << "zero groups drawn";
  if (!scaled(GetParam())) {
    EXPECT_GT(largest, 0) << "the format's largest value drawn";
  }
}

INSTANTIATE_TEST_SUITE_P(Formats, QuantizedDecoder,
                         ::testing::Values(Scalar::kQ8, Scalar::kQ8Token, Scalar::kQ8Head, Scalar::kQ4, Scalar::kE4M3,
                                           Scalar::kE5M2, Scalar::kF16),
                         [](const auto& info) { return std::string(to_string(info.param)); });

TEST(QuantizedDecoder, TheBuiltInIsQ8AndDecodeOnly) {
  const auto kernel = make_kernel("decode_q8");
  const Capabilities caps = kernel->capabilities();
  EXPECT_EQ(caps.precision.k, Scalar::kQ8);
  EXPECT_EQ(caps.precision.v, Scalar::kQ8);
  EXPECT_FALSE(caps.forward());
  EXPECT_TRUE(caps.decode());
}

}  // namespace
}  // namespace attest
