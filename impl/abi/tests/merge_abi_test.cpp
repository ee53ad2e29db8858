// ABI 2.6: merging partial attention states crosses the C ABI (ATTEST_CAP_MERGE, the descriptor's
// merge) and the process protocol (MERGE / MERGE_RESULT) with the same result as the kernel's own
// merge, bf16 partial O included; what the merge cannot take is refused by name.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "attest/abi/abi_adapter.h"
#include "attest/kernels/builtin_kernels.h"
#include "attest/model/precision.h"

namespace attest {
namespace {

// Three parts of 4 rows, Dv 5: part 1 saw no key of row 2 (LSE -inf, O NaN), no part saw row 3.
struct States {
  std::vector<float> o, lse;
  MergeInputs inputs(Scalar storage) const { return {3, 4, 5, storage, o, lse}; }
};

States drawn_states(Scalar storage) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> value(-2.0f, 2.0f), logit(-3.0f, 120.0f);
  States s{std::vector<float>(3 * 4 * 5), std::vector<float>(3 * 4)};
  for (float& x : s.o) x = round_to(value(rng), storage);
  for (float& x : s.lse) x = logit(rng);
  const float nan = std::numeric_limits<float>::quiet_NaN(), minus_inf = -std::numeric_limits<float>::infinity();
  s.lse[1 * 4 + 2] = minus_inf;
  for (int part = 0; part < 3; ++part) s.lse[part * 4 + 3] = minus_inf;
  for (int part = 0; part < 3; ++part)
    for (int row : {2, 3})
      if (s.lse[part * 4 + row] == minus_inf)
        for (int c = 0; c < 5; ++c) s.o[(part * 4 + row) * 5 + c] = nan;
  return s;
}

void expect_equal(const std::vector<float>& got, const std::vector<float>& want, const std::string& label) {
  ASSERT_EQ(got.size(), want.size()) << label;
  for (std::size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i], want[i]) << label << " at " << i;
}

TEST(MergeAbi, TheAdapterServesTheKernelsMergeThroughTheDescriptor) {
  const AbiAdapter adapter(make_kernel("tiled"));
  const attest_kernel_v2* d = adapter.descriptor();
  ASSERT_TRUE(d->capabilities & ATTEST_CAP_MERGE);
  ASSERT_NE(d->merge, nullptr);
  for (Scalar storage : {Scalar::kF32, Scalar::kBF16}) {
    const States s = drawn_states(storage);
    std::vector<float> want_o(4 * 5), want_lse(4);
    merge_states(s.inputs(storage), want_o, want_lse);
    const protocol::WireMerge wire = to_wire(s.inputs(storage));
    EXPECT_EQ(wire.o.size(), s.o.size() * (storage == Scalar::kF32 ? 4 : 2));
    std::vector<float> o(4 * 5), lse(4);
    attest_merge_outputs out{};
    out.o = o.data(), out.lse = lse.data();
    const attest_merge_inputs in = wire.view();
    ASSERT_EQ(d->merge(d->user, &in, &out), ATTEST_OK) << d->last_error(d->user);
    expect_equal(o, want_o, to_string(storage));
    expect_equal(lse, want_lse, to_string(storage));
    EXPECT_EQ(lse[3], -std::numeric_limits<float>::infinity());
    EXPECT_EQ(std::string(out.path), "merge");
  }
}

TEST(MergeAbi, TheMergeMessageRoundTripsAndRefusesWhatDoesNotMatch) {
  const States s = drawn_states(Scalar::kBF16);
  protocol::Writer w;
  protocol::write_merge(w, to_wire(s.inputs(Scalar::kBF16)));
  protocol::Reader r(w.bytes());
  const protocol::WireMerge back = protocol::read_merge(r);
  EXPECT_EQ(back.parts, 3);
  EXPECT_EQ(back.storage, ATTEST_BF16);
  std::vector<float> o;
  const MergeInputs in = merge_inputs_of(back.view(), o);
  for (std::size_t i = 0; i < s.o.size(); ++i)
    if (!std::isnan(s.o[i])) EXPECT_EQ(in.o[i], s.o[i]) << i;

  protocol::WireMerge short_lse = to_wire(s.inputs(Scalar::kF32));
  short_lse.lse.pop_back();
  protocol::Writer bad;
  protocol::write_merge(bad, short_lse);
  protocol::Reader rb(bad.bytes());
  EXPECT_THROW(protocol::read_merge(rb), protocol::ProtocolError);

  protocol::WireMerge huge;  // 32 rows of 2^30 values: more than a message holds, refused before any product
  huge.parts = 1, huge.rows = 32, huge.value_dim = 1 << 30, huge.lse.assign(32, 0.0f);
  protocol::Writer hw;
  protocol::write_merge(hw, huge);
  protocol::Reader rh(hw.bytes());
  EXPECT_THROW(protocol::read_merge(rh), protocol::ProtocolError);

  attest_merge_inputs f16 = back.view();
  f16.storage = ATTEST_F16;
  EXPECT_THROW(merge_inputs_of(f16, o), ProblemError);
}

TEST(MergeAbi, TheCapabilityCrossesTheDescriptorBothWays) {
  Capabilities c = make_kernel("loop")->capabilities();
  EXPECT_FALSE(c.merge);
  c.merge = true;
  const protocol::Descriptor d = descriptor_from_capabilities(c, "merging");
  EXPECT_TRUE(d.capabilities & ATTEST_CAP_MERGE);
  EXPECT_TRUE(capabilities_from_descriptor(d).merge);
}

}  // namespace
}  // namespace attest
