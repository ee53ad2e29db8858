// A descriptor's fields are read with their ranges: a value outside them is refused with the
// field's name, never read as the nearest meaning (issue 22).
#include <gtest/gtest.h>

#include <cstdint>
#include <stdexcept>

#include "attest/abi_adapter.h"

namespace attest {
namespace {

TEST(Descriptor, EmptyRowPolicyOutsideTheEnumIsRefused) {
  protocol::Descriptor d;
  d.abi_version = ATTEST_ABI_VERSION_2;
  d.capabilities = ATTEST_CAP_CAUSAL;
  for (int policy : {ATTEST_EMPTY_ZERO, ATTEST_EMPTY_NAN}) {
    d.empty_rows = policy;
    EXPECT_NO_THROW(capabilities_from_descriptor(d)) << policy;
  }
  for (int policy : {5, -1, 2}) {
    d.empty_rows = policy;
    try {
      capabilities_from_descriptor(d);
      ADD_FAILURE() << "empty_rows " << policy << " accepted";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("empty_rows"), std::string::npos) << e.what();
    }
  }
}

protocol::Descriptor causal_descriptor() {
  protocol::Descriptor d;
  d.abi_version = ATTEST_ABI_VERSION_2;
  d.capabilities = ATTEST_CAP_CAUSAL;
  return d;
}

void expect_refused(const protocol::Descriptor& d, const std::string& field, const std::string& label) {
  try {
    capabilities_from_descriptor(d);
    ADD_FAILURE() << label << " accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find(field), std::string::npos) << label << ": " << e.what();
  }
}

TEST(Descriptor, NonzeroReservedFieldsAreRefused) {
  for (int i : {0, 7}) {
    protocol::Descriptor d = causal_descriptor();
    d.contract.reserved[i] = 1;
    expect_refused(d, "contract.reserved[" + std::to_string(i) + "]", "contract.reserved");
  }
  protocol::Descriptor d = causal_descriptor();
  d.precision.reserved[3] = -1;
  expect_refused(d, "precision.reserved[3]", "precision.reserved");
}

// Each of these sized attest's own problems to gigabytes (or overflowed an int): refused.
TEST(Descriptor, ContractsAttestCannotDrawAreRefused) {
  struct Case {
    const char* field;
    void (*set)(attest_contract&);
  };
  const Case cases[] = {
      {"tiles", [](attest_contract& k) { k.key_tile = 1 << 30; }},
      {"tiles", [](attest_contract& k) { k.query_tile = 1000003; }},
      {"contract.batch", [](attest_contract& k) { k.batch = {1 << 20, 1 << 20}; }},
      {"contract.head_dim", [](attest_contract& k) { k.head_dim = {1 << 30, 1 << 30}; }},
      {"contract.heads", [](attest_contract& k) { k.heads = {1000, 1000}; }},
      {"contract.q_len", [](attest_contract& k) { k.q_len = {1 << 20, 1 << 21}; }},
      {"contract.k_len", [](attest_contract& k) { k.k_len = {1 << 20, 1 << 21}; }},
      {"contract.q_offset", [](attest_contract& k) { k.q_offset = {1LL << 41, 1LL << 42}; }},
      {"contract.q_offset", [](attest_contract& k) { k.q_offset = {-(1LL << 42), -(1LL << 41)}; }},
  };
  for (const Case& c : cases) {
    protocol::Descriptor d = causal_descriptor();
    c.set(d.contract);
    expect_refused(d, c.field, c.field);
  }
  protocol::Descriptor wide = causal_descriptor();
  wide.head_dims = {64, 1 << 30};
  expect_refused(wide, "contract.head_dims", "head_dims");
}

// An exp declared looser than any real one loosened the bound until a kernel that doubled every
// logit passed (issue 22): 128 ulp is the limit.
TEST(Descriptor, ImplausibleExpErrorIsRefused) {
  protocol::Descriptor d = causal_descriptor();
  d.precision.exp_ulps = kMaxExpUlps;
  EXPECT_NO_THROW(capabilities_from_descriptor(d));
  for (double ulps : {kMaxExpUlps + 1, 4096.0, 1e6}) {
    d.precision.exp_ulps = ulps;
    expect_refused(d, "precision.exp_ulps", std::to_string(ulps));
  }
}

TEST(Descriptor, WideContractsAreKeptWithinWhatAttestDraws) {
  protocol::Descriptor d = causal_descriptor();
  d.contract.batch = {1, 1 << 20};  // a large maximum is fine: attest draws small batches in it
  d.contract.key_tile = 128;
  d.contract.q_offset = {-(1LL << 50), 1LL << 50};
  const Capabilities c = capabilities_from_descriptor(d);
  EXPECT_EQ(c.contract.batch.max, 1 << 20);
  EXPECT_EQ(c.contract.q_offset.min, -kMaxContractOffset);
  EXPECT_EQ(c.contract.q_offset.max, kMaxContractOffset);
}

// The process protocol carries contract ranges as 64-bit integers; none is truncated on the way
// (issue 22 found "64-bit protocol ranges truncated"): what the kernel sent is what attest keeps.
TEST(Descriptor, SixtyFourBitRangesCrossTheProtocolWhole) {
  protocol::Descriptor d = causal_descriptor();
  d.contract.q_len = {1, (1LL << 40) + 7};
  d.contract.k_len = {1, INT64_MAX};
  d.contract.batch = {1, (1LL << 32) + 1};
  d.contract.q_offset = {-(1LL << 33), (1LL << 35) + 3};
  protocol::Writer w;
  protocol::write_descriptor(w, d);
  protocol::Reader r(w.bytes());
  const protocol::Descriptor back = protocol::read_descriptor(r);
  EXPECT_EQ(back.contract.q_len.max, (1LL << 40) + 7);
  EXPECT_EQ(back.contract.k_len.max, INT64_MAX);
  EXPECT_EQ(back.contract.batch.max, (1LL << 32) + 1);
  EXPECT_EQ(back.contract.q_offset.min, -(1LL << 33));
  const Capabilities c = capabilities_from_descriptor(back);
  EXPECT_EQ(c.contract.q_len.max, (1LL << 40) + 7);
  EXPECT_EQ(c.contract.k_len.max, INT64_MAX);
  EXPECT_EQ(c.contract.batch.max, (1LL << 32) + 1);
  EXPECT_TRUE(c.contract.q_len.contains(1LL << 36));
  EXPECT_EQ(c.contract.q_offset.max, (1LL << 35) + 3);
}

}  // namespace
}  // namespace attest
