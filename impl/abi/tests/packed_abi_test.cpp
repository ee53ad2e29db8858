// ABI 2.8: a padded batch packed into the varlen layout (packed.h) and the built-in packed forward
// give the padded forward's outputs; the call crosses the C ABI (ATTEST_CAP_PACKED, the
// descriptor's forward_packed) unchanged; broken offsets are refused by name.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "attest/abi/abi_adapter.h"
#include "attest/kernels/builtin_kernels.h"
#include "attest/kernels/packed.h"

namespace attest {
namespace {

// Three sequences: 5 queries over 6 keys, none over 3 keys, 2 queries over no key; causal with a
// window, GQA, softcap and sinks, so that every term reaches the packed call.
Problem padded_batch() {
  Problem p;
  p.shape = {3, 4, 2, 5, 6, 8, 3};
  p.mask.causal = true, p.mask.window = 4;
  p.mask.q_valid = {5, 0, 2}, p.mask.kv_valid = {6, 3, 0};
  p.modifiers.softcap = 20.0, p.modifiers.sinks = {0.5f, -1.0f, 0.0f, 2.0f};
  p.resize_buffers();
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> value(-1.0f, 1.0f);
  for (auto* buffer : {&p.q, &p.k, &p.v})
    for (float& x : *buffer) x = value(rng);
  return p;
}

TEST(PackedCall, PacksTheValidTokensAndUnpacksToThePaddedForward) {
  const Problem p = padded_batch();
  const PackedCall call = packed_call_of(p);
  EXPECT_EQ(call.cu_seqlens_q, (std::vector<std::int32_t>{0, 5, 5, 7}));
  EXPECT_EQ(call.cu_seqlens_k, (std::vector<std::int32_t>{0, 6, 9, 9}));
  EXPECT_EQ(call.max_seqlen_q, 5);
  EXPECT_EQ(call.max_seqlen_k, 6);
  EXPECT_EQ(call.q.size(), 7u * 4 * 8);
  EXPECT_EQ(call.k.size(), 9u * 2 * 8);
  // Token 6 is sequence 2's second query: padded q[2][h][1].
  EXPECT_EQ(call.q[(6 * 4 + 3) * 8 + 5], p.q[((2 * 4 + 3) * 5 + 1) * 8 + 5]);

  std::vector<float> o(call.o_size()), lse(call.lse_size());
  check_packed_call(call, o, lse);
  packed_forward(call, o, lse);
  std::vector<float> padded_o, padded_lse;
  unpack_outputs(p, call, o, lse, false, padded_o, padded_lse);
  const Outputs want = run_forward(*make_kernel("loop"), p);
  ASSERT_EQ(padded_o.size(), want.o.size());
  for (std::size_t e = 0; e < want.o.size(); ++e) EXPECT_NEAR(padded_o[e], want.o[e], 1e-6) << "o " << e;
  for (std::size_t r = 0; r < want.lse.size(); ++r) EXPECT_NEAR(padded_lse[r], want.lse[r], 1e-6) << "lse " << r;
}

// The tiled kernel's packed forward reads the packed rows in place, tiles gathered by their strides:
// tiles of 2 x 2 make every sequence span several, a partial one last.
TEST(PackedCall, TheTiledKernelsPackedForwardIsItsPaddedForward) {
  const Problem p = padded_batch();
  const PackedCall call = packed_call_of(p);
  const auto tiled = make_tiled_kernel({.block_q = 2, .block_k = 2});  // declared by the built-in "tiled" only
  std::vector<float> o(call.o_size(), std::numeric_limits<float>::quiet_NaN()), lse(call.lse_size());
  tiled->forward_packed(call, o, lse);
  std::vector<float> padded_o, padded_lse;
  unpack_outputs(p, call, o, lse, false, padded_o, padded_lse);
  const Outputs want = run_forward(*tiled, p);
  for (std::size_t e = 0; e < want.o.size(); ++e) EXPECT_NEAR(padded_o[e], want.o[e], 1e-6) << "o " << e;
  for (std::size_t r = 0; r < want.lse.size(); ++r) EXPECT_NEAR(padded_lse[r], want.lse[r], 1e-6) << "lse " << r;
}

TEST(PackedCall, BrokenOffsetsAndTermsAreRefusedByName) {
  const PackedCall good = packed_call_of(padded_batch());
  std::vector<float> o(good.o_size()), lse(good.lse_size());
  auto refused = [&](PackedCall c, const std::string& words) {
    try {
      check_packed_call(c, o, lse);
      ADD_FAILURE() << "accepted; expected: " << words;
    } catch (const ProblemError& e) {
      EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
    }
  };
  PackedCall c = good;
  c.cu_seqlens_k = {0, 6, 4, 9};
  refused(c, "must not decrease");
  c = good, c.max_seqlen_k = 5;
  refused(c, "longest sequence");
  c = good, c.terms.mask.kv_valid = {1, 1, 1};
  refused(c, "no padding");
  c = good, c.cu_seqlens_q.pop_back();
  refused(c, "batch + 1 offsets");
  Problem segmented = padded_batch();
  segmented.mask.q_segment.assign(3 * 5, 0), segmented.mask.k_segment.assign(3 * 6, 0);
  EXPECT_THROW(packed_call_of(segmented), ProblemError);
}

TEST(PackedAbi, TheAdapterServesThePackedForwardThroughTheDescriptor) {
  const AbiAdapter adapter(make_kernel("loop"));
  const attest_kernel_v2* d = adapter.descriptor();
  ASSERT_EQ(d->struct_size, ATTEST_KERNEL_V2_8_SIZE);
  ASSERT_TRUE(d->capabilities & ATTEST_CAP_PACKED);
  ASSERT_NE(d->forward_packed, nullptr);
  const PackedCall call = packed_call_of(padded_batch());
  std::vector<float> want_o(call.o_size()), want_lse(call.lse_size());
  packed_forward(call, want_o, want_lse);

  const attest_packed_problem problem = packed_problem_view(call, call.cu_seqlens_q.data(), call.cu_seqlens_k.data());
  EXPECT_EQ(packed_call_of(problem).cu_seqlens_k, call.cu_seqlens_k);
  std::vector<float> o(call.o_size(), std::numeric_limits<float>::quiet_NaN()), lse(call.lse_size());
  attest_packed_outputs out{};
  out.o = o.data(), out.lse = lse.data();
  ASSERT_EQ(d->forward_packed(d->user, &problem, &out), ATTEST_OK) << d->last_error(d->user);
  EXPECT_EQ(o, want_o);
  EXPECT_EQ(lse, want_lse);
  EXPECT_STREQ(out.path, kPackedPath);

  attest_packed_problem broken = problem;
  const std::int32_t decreasing[] = {0, 6, 4, 9};
  broken.cu_seqlens_k = decreasing;
  EXPECT_EQ(d->forward_packed(d->user, &broken, &out), ATTEST_INVALID_ARGUMENT);
  EXPECT_NE(std::string(d->last_error(d->user)).find("not decrease"), std::string::npos) << d->last_error(d->user);

  // ABI 2.10: the same call with int64 offsets (the int32 pointers NULL) gives the same outputs.
  const std::vector<std::int64_t> q64(call.cu_seqlens_q.begin(), call.cu_seqlens_q.end()),
      k64(call.cu_seqlens_k.begin(), call.cu_seqlens_k.end());
  attest_packed_problem wide = packed_problem_view(call, nullptr, nullptr);
  wide.cu_seqlens_q64 = q64.data(), wide.cu_seqlens_k64 = k64.data();
  EXPECT_EQ(packed_call_of(wide).cu_seqlens_q, call.cu_seqlens_q);
  std::fill(o.begin(), o.end(), std::numeric_limits<float>::quiet_NaN());
  ASSERT_EQ(d->forward_packed(d->user, &wide, &out), ATTEST_OK) << d->last_error(d->user);
  EXPECT_EQ(o, want_o);
  wide.cu_seqlens_k64 = nullptr;  // one width or the other, whole
  EXPECT_EQ(d->forward_packed(d->user, &wide, &out), ATTEST_INVALID_ARGUMENT);
  const std::int64_t past_int32[] = {0, std::int64_t{1} << 31, std::int64_t{1} << 31, std::int64_t{1} << 31};
  wide.cu_seqlens_k64 = past_int32;
  EXPECT_EQ(d->forward_packed(d->user, &wide, &out), ATTEST_INVALID_ARGUMENT);
  EXPECT_NE(std::string(d->last_error(d->user)).find("past 2^31"), std::string::npos) << d->last_error(d->user);
}

TEST(PackedAbi, ThePackedBitCrossesTheDescriptorBothWaysAndIsNoFeature) {
  Capabilities c = make_kernel("loop")->capabilities();
  ASSERT_TRUE(c.packed);
  const protocol::Descriptor d = descriptor_from_capabilities(c, "packed");
  EXPECT_TRUE(d.capabilities & ATTEST_CAP_PACKED);
  EXPECT_TRUE(capabilities_from_descriptor(d).packed);
  EXPECT_EQ(capabilities_from_descriptor(d).features, c.features);
  c.packed = false;
  EXPECT_FALSE(capabilities_from_descriptor(descriptor_from_capabilities(c, "padded")).packed);
  // ABI 2.10: int64 offsets cross with packed, and alone are refused.
  c.packed = true, c.packed_int64 = true;
  protocol::Descriptor wide = descriptor_from_capabilities(c, "wide");
  EXPECT_TRUE(wide.capabilities & ATTEST_CAP_PACKED_INT64);
  EXPECT_TRUE(capabilities_from_descriptor(wide).packed_int64);
  EXPECT_EQ(capabilities_from_descriptor(wide).features, c.features);
  wide.capabilities &= ~ATTEST_CAP_PACKED;
  EXPECT_THROW(capabilities_from_descriptor(wide), std::invalid_argument);
  EXPECT_TRUE(make_kernel("tiled")->capabilities().packed);  // its packed forward reads the packed rows in place
  // ... but not make_tiled_kernel(), which wrappers copy (mutants): they would inherit an unserved layout.
  EXPECT_FALSE(make_tiled_kernel({128, 64})->capabilities().packed);
  EXPECT_FALSE(make_kernel("blocked")->capabilities().packed);
}

}  // namespace
}  // namespace attest
