// Every invalid field is rejected with a message that names it.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "attest/model/problem.h"

namespace attest {
namespace {

Problem valid() {
  Problem p;
  p.shape = {.batch = 2, .heads = 4, .kv_heads = 2, .q_len = 3, .k_len = 5, .head_dim = 4, .value_dim = 3};
  p.resize_buffers();
  return p;
}

struct BadCase {
  const char* name;
  std::function<void(Problem&)> spoil;
  const char* field;  // must appear in the error message
};

class InvalidProblem : public ::testing::TestWithParam<BadCase> {};

TEST_P(InvalidProblem, IsRejectedNamingTheField) {
  Problem p = valid();
  ASSERT_NO_THROW(p.validate());
  GetParam().spoil(p);
  try {
    p.validate();
    FAIL() << "accepted an invalid problem";
  } catch (const ProblemError& e) {
    EXPECT_NE(std::string(e.what()).find(GetParam().field), std::string::npos) << e.what();
  }
}

const BadCase kBadCases[] = {
    {"zero_batch", [](Problem& p) { p.shape.batch = 0; }, "shape.batch"},
    {"negative_heads", [](Problem& p) { p.shape.heads = -1; }, "shape.heads"},
    {"zero_kv_heads", [](Problem& p) { p.shape.kv_heads = 0; }, "shape.kv_heads"},
    {"heads_not_multiple", [](Problem& p) { p.shape.kv_heads = 3; }, "shape.kv_heads"},
    {"zero_q_len", [](Problem& p) { p.shape.q_len = 0; }, "shape.q_len"},
    {"zero_k_len", [](Problem& p) { p.shape.k_len = 0; }, "shape.k_len"},
    {"zero_head_dim", [](Problem& p) { p.shape.head_dim = 0; }, "shape.head_dim"},
    {"zero_value_dim", [](Problem& p) { p.shape.value_dim = 0; }, "shape.value_dim"},
    {"overflowing_sizes", [](Problem& p) { p.shape.q_len = p.shape.k_len = 1 << 30; }, "2^32"},
    {"window_zero", [](Problem& p) { p.mask.window = 0; }, "mask.window"},
    {"window_negative", [](Problem& p) { p.mask.window = -3; }, "mask.window"},
    {"kv_valid_size", [](Problem& p) { p.mask.kv_valid = {5}; }, "mask.kv_valid"},
    {"kv_valid_range",
     [](Problem& p) {
       p.mask.kv_valid = {5, 6};
     },
     "mask.kv_valid[1]"},
    {"q_valid_size",
     [](Problem& p) {
       p.mask.q_valid = {1, 2, 3};
     },
     "mask.q_valid"},
    {"q_valid_negative",
     [](Problem& p) {
       p.mask.q_valid = {-1, 2};
     },
     "mask.q_valid[0]"},
    {"segment_without_partner", [](Problem& p) { p.mask.q_segment.assign(6, 0); }, "mask.k_segment"},
    {"q_segment_size",
     [](Problem& p) {
       p.mask.q_segment.assign(5, 0);
       p.mask.k_segment.assign(10, 0);
     },
     "mask.q_segment"},
    {"k_segment_size",
     [](Problem& p) {
       p.mask.q_segment.assign(6, 0);
       p.mask.k_segment.assign(9, 0);
     },
     "mask.k_segment"},
    {"explicit_mask_size", [](Problem& p) { p.mask.explicit_mask.assign(29, 1); }, "mask.explicit_mask"},
    {"scale_nan", [](Problem& p) { p.scale = std::nan(""); }, "scale"},
    {"scale_inf", [](Problem& p) { p.scale = INFINITY; }, "scale"},
    {"q_offset_huge", [](Problem& p) { p.q_offset = 1LL << 50; }, "q_offset"},
    {"rope_odd_width",
     [](Problem& p) {
       p.rope.enabled = true;
       p.shape.head_dim = 3;
       p.resize_buffers();
     },
     "rope"},
    {"rope_base",
     [](Problem& p) {
       p.rope.enabled = true;
       p.rope.base = 0.5;
     },
     "rope.base"},
    {"q_buffer", [](Problem& p) { p.q.pop_back(); }, "q has"},
    {"k_buffer", [](Problem& p) { p.k.push_back(0); }, "k has"},
    {"v_buffer", [](Problem& p) { p.v.clear(); }, "v has"},
    {"bf16_inputs",
     [](Problem& p) {
       p.storage.q = Scalar::kBF16;
       p.q[3] = 1.0f + 0x1p-10f;
     },
     "q[3]"},
    {"fp16_inputs",
     [](Problem& p) {
       p.storage.v = Scalar::kF16;
       p.v[2] = 1e-9f;
     },
     "v[2]"},
    {"fp16_bias",
     [](Problem& p) {
       p.modifiers.bias_per_batch = p.modifiers.bias_per_head = false;
       p.modifiers.bias.assign(std::size_t(p.shape.q_len) * p.shape.k_len, -INFINITY);  // -inf is an f16 value
       p.storage.bias = Scalar::kF16;
       p.modifiers.bias[4] = 1.0f + 0x1p-12f;
     },
     "modifiers.bias[4]"},
};

INSTANTIATE_TEST_SUITE_P(Fields, InvalidProblem, ::testing::ValuesIn(kBadCases),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(Problem, DefaultsAreBottomRightAndInverseSqrtScale) {
  Problem p = valid();
  EXPECT_EQ(p.effective_q_offset(), 2);
  EXPECT_EQ(p.query_position(0), 2);
  EXPECT_DOUBLE_EQ(p.effective_scale(), 0.5);
  EXPECT_EQ(p.kv_head_of(3), 1);  // h / (H / Hkv), not h % Hkv
  p.q_offset = 0;
  EXPECT_EQ(p.query_position(1), 1);
}

TEST(Problem, ReducedPrecisionRounding) {
  EXPECT_EQ(round_to(1.0f + 0x1p-9f, Scalar::kBF16), 1.0f);            // ties to even
  EXPECT_EQ(round_to(1.0f + 0x1p-7f, Scalar::kBF16), 1.0f + 0x1p-7f);  // representable
  EXPECT_EQ(round_to(65504.0f, Scalar::kF16), 65504.0f);
  EXPECT_TRUE(std::isinf(round_to(70000.0f, Scalar::kF16)));
  EXPECT_EQ(round_to(0x1p-24f, Scalar::kF16), 0x1p-24f);  // smallest subnormal
  EXPECT_EQ(round_to(0x1p-26f, Scalar::kF16), 0.0f);
  EXPECT_TRUE(representable(0.5f, Scalar::kF16));
  EXPECT_FALSE(representable(0.1f, Scalar::kF16));
}

}  // namespace
}  // namespace attest
