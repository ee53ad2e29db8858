// A descriptor's fields are read with their ranges: a value outside them is refused with the
// field's name, never read as the nearest meaning.
#include <gtest/gtest.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "attest/abi/abi_adapter.h"

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

TEST(Descriptor, AFlagOtherThanZeroOrOneIsRefused) {
  protocol::Descriptor d = causal_descriptor();
  d.precision.flush_subnormals = -1;  // the byte 2.0 to 2.8 reserved
  expect_refused(d, "precision.flush_subnormals is -1", "precision.flush_subnormals");
}

// Every declaration ABI 2.1 added, through the wire and back into attest's model.
protocol::Descriptor descriptor_2_1() {
  protocol::Descriptor d = causal_descriptor();
  d.capabilities |= ATTEST_CAP_ALIBI;
  d.contract.self_attention_only = 1;
  d.contract.alibi_slopes = ATTEST_ALIBI_STANDARD;
  d.contract.alibi_max_bias = 4.0;
  d.contract.inputs = ATTEST_INPUTS_FINITE;
  d.contract.max_abs_value = 8;
  d.precision.k = d.precision.v = ATTEST_F16;
  d.precision.accumulator = ATTEST_F16;
  d.precision.weight_sum = ATTEST_IN(ATTEST_F32);
  d.precision.pv_unnormalised = 1;
  d.precision.q_entry = ATTEST_F16;
  d.precision.bias = ATTEST_F16;
  attest_precision_spec tiled = d.precision;
  tiled.accumulator = ATTEST_F32;
  tiled.weight_sum = 0;
  tiled.pv_unnormalised = 0;
  d.paths = {{"tiled", tiled}};
  return d;
}

TEST(Descriptor, VersionTwoOneDeclarationsCrossTheProtocolWhole) {
  protocol::Writer w;
  protocol::write_descriptor(w, descriptor_2_1());
  protocol::Reader r(w.bytes());
  const Capabilities c = capabilities_from_descriptor(protocol::read_descriptor(r));
  EXPECT_TRUE(c.contract.self_attention_only);
  EXPECT_EQ(c.contract.alibi_slopes, AlibiSlopes::kStandard);
  EXPECT_EQ(c.contract.alibi_max_bias, 4.0);
  EXPECT_EQ(c.inputs, InputDomain::kFinite);
  EXPECT_EQ(c.contract.max_abs_value, 8.0);
  EXPECT_EQ(c.precision.accumulator, Scalar::kF16);
  EXPECT_EQ(c.precision.weight_sum, Scalar::kF32);
  EXPECT_TRUE(c.precision.pv_unnormalised);
  EXPECT_EQ(c.precision.q_entry, Scalar::kF16);
  EXPECT_EQ(c.precision.k_entry, Scalar::kF32);
  EXPECT_EQ(c.precision.bias, Scalar::kF16);
  ASSERT_EQ(c.path_precision.count("tiled"), 1u);
  const Precision& tiled = c.path_precision.at("tiled");
  EXPECT_EQ(tiled.accumulator, Scalar::kF32);
  EXPECT_FALSE(tiled.weight_sum.has_value());
  EXPECT_EQ(tiled.q_entry, Scalar::kF16);
  // And back: attest's own kernels served through the ABI declare the same.
  const protocol::Descriptor again = descriptor_from_capabilities(c, "k");
  EXPECT_EQ(capabilities_from_descriptor(again).path_precision, c.path_precision);
  EXPECT_EQ(capabilities_from_descriptor(again).precision, c.precision);
  EXPECT_EQ(capabilities_from_descriptor(again).contract, c.contract);
}

// ABI 2.5: an additive-mask kernel's input domain crosses the protocol and comes back.
TEST(Descriptor, VersionTwoFiveMaskedScoredCrossesTheProtocol) {
  protocol::Descriptor d = descriptor_2_1();
  d.contract.inputs = ATTEST_INPUTS_MASKED_SCORED;
  protocol::Writer w;
  protocol::write_descriptor(w, d);
  protocol::Reader r(w.bytes());
  const Capabilities c = capabilities_from_descriptor(protocol::read_descriptor(r));
  EXPECT_EQ(c.inputs, InputDomain::kMaskedScored);
  EXPECT_EQ(descriptor_from_capabilities(c, "k").contract.inputs, ATTEST_INPUTS_MASKED_SCORED);
}

// A 2.0 kernel's descriptor ends before the 2.1 section: it loads, meaning what it meant.
TEST(Descriptor, VersionTwoZeroDescriptorsLoadAsBefore) {
  protocol::Descriptor d = causal_descriptor();
  d.precision.accumulator = ATTEST_F16;
  protocol::Writer w;
  protocol::write_descriptor(w, d);
  // The contract's new fields, the precision's, the path count; then 2.2's declared path count.
  const std::size_t section = 3 * 4 + 2 * 8 + 6 * 4 + 4 + 4;
  const std::string old_bytes = w.bytes().substr(0, w.bytes().size() - section);
  protocol::Reader r(old_bytes);
  const Capabilities c = capabilities_from_descriptor(protocol::read_descriptor(r));
  EXPECT_EQ(c.precision.sum_precision(), Scalar::kF16);  // one accumulator, as 2.0 said
  EXPECT_FALSE(c.contract.self_attention_only);
  EXPECT_EQ(c.contract.alibi_slopes, AlibiSlopes::kArbitrary);
  EXPECT_EQ(c.inputs, InputDomain::kMaskedMayBeNonFinite);
  EXPECT_TRUE(c.path_precision.empty());
}

// ABI 2.2: declared paths cross the protocol whole and come back from attest's own kernels; a 2.1
// descriptor (ending before their section) declares none; unusable ones are refused.
TEST(Descriptor, VersionTwoTwoDeclaredPathsCrossTheProtocolWhole) {
  protocol::Descriptor d = causal_descriptor();
  attest_path_predicate split{};
  split.batch = {1, 1}, split.q_len = {1, 4}, split.k_len = {512, 1LL << 40};
  split.value_dim_multiple = 16, split.k_len_multiple = 256, split.k_len_not_multiple = 1;
  split.required = ATTEST_CAP_CAUSAL, split.excluded = ATTEST_CAP_WINDOW;
  attest_path_predicate rest{};
  rest.no_mask = 1;
  d.declared_paths = {{"split_kv", split}, {"unmasked", rest}};
  protocol::Writer w;
  protocol::write_descriptor(w, d);
  protocol::Reader r(w.bytes());
  const Capabilities c = capabilities_from_descriptor(protocol::read_descriptor(r));
  ASSERT_EQ(c.paths.size(), 2u);
  EXPECT_EQ(c.paths[0].summary(),
            "split_kv: B = 1, Tq <= 4, Tk >= 512, Dv % 16 = 0, Tk % 256 != 0, with causal, without window");
  EXPECT_EQ(c.paths[1].summary(), "unmasked: no mask");
  EXPECT_EQ(capabilities_from_descriptor(descriptor_from_capabilities(c, "k")).paths, c.paths);
  // The same descriptor cut before the 2.2 section: a 2.1 kernel, no declared paths.
  protocol::Descriptor older = causal_descriptor();
  protocol::Writer w21;
  protocol::write_descriptor(w21, older);
  const std::string bytes_2_1 = w21.bytes().substr(0, w21.bytes().size() - 4);
  protocol::Reader r21(bytes_2_1);
  EXPECT_TRUE(capabilities_from_descriptor(protocol::read_descriptor(r21)).paths.empty());

  auto refused = [&](std::vector<protocol::PathDeclaration> paths, const char* why) {
    protocol::Descriptor bad = causal_descriptor();
    bad.declared_paths = std::move(paths);
    try {
      capabilities_from_descriptor(bad);
      ADD_FAILURE() << "accepted: " << why;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
    }
  };
  refused({{"split_kv", split}, {"split_kv", rest}}, "declared twice");
  refused({{"", split}}, "1 to 31 characters");
  attest_path_predicate unknown = split;
  unknown.required = 1u << 30;
  refused({{"x", unknown}}, "capability bits this attest does not know");
  attest_path_predicate empty = split;
  empty.q_len = {5, 4};
  refused({{"x", empty}}, "an empty or negative range");
  attest_path_predicate both = split;
  both.excluded = ATTEST_CAP_CAUSAL;
  refused({{"x", both}}, "both required and excluded");
  attest_path_predicate flag = split;
  flag.no_mask = 2;
  refused({{"x", flag}}, "no_mask is 2");
}

// ABI 2.3: a backward and its determinism cross the protocol whole; a 2.2 descriptor (ending before
// the section) promises nothing; a 16-bit backward, or determinism without a backward, is refused.
TEST(Descriptor, VersionTwoThreeBackwardCrossesTheProtocolWhole) {
  protocol::Descriptor d = causal_descriptor();
  d.capabilities |= ATTEST_CAP_BACKWARD;
  d.contract.deterministic_backward = 1;
  d.precision.pv_unnormalised = 1;  // where the forward normalises does not concern its backward
  protocol::Writer w;
  protocol::write_descriptor(w, d);
  protocol::Reader r(w.bytes());
  const Capabilities c = capabilities_from_descriptor(protocol::read_descriptor(r));
  EXPECT_TRUE(c.backward());
  EXPECT_TRUE(c.deterministic_backward);
  const Capabilities again = capabilities_from_descriptor(descriptor_from_capabilities(c, "k"));
  EXPECT_TRUE(again.backward() && again.deterministic_backward);
  const std::string bytes_2_2 = w.bytes().substr(0, w.bytes().size() - 4);
  protocol::Reader r22(bytes_2_2);
  EXPECT_FALSE(capabilities_from_descriptor(protocol::read_descriptor(r22)).deterministic_backward);
  // Without the promise the section is not written: a 2.2 attest still loads the descriptor.
  protocol::Descriptor plain = d;
  plain.contract.deterministic_backward = 0;
  protocol::Writer w_plain;
  protocol::write_descriptor(w_plain, plain);
  EXPECT_EQ(w_plain.bytes().size() + 4, w.bytes().size());

  protocol::Descriptor bad = d;
  bad.contract.deterministic_backward = 2;
  expect_refused(bad, "contract.deterministic_backward is 2", "deterministic_backward 2");
  bad = d;
  bad.capabilities &= ~ATTEST_CAP_BACKWARD;
  expect_refused(bad, "deterministic_backward without ATTEST_CAP_BACKWARD", "determinism without a backward");
  bad = d;
  bad.precision.k = ATTEST_BF16;
  expect_refused(bad, "ATTEST_CAP_BACKWARD with precision not float32", "a bf16 backward");
  bad = d;
  attest_precision_spec f16_path = d.precision;
  f16_path.accumulator = ATTEST_F16;
  bad.paths = {{"fast", f16_path}};
  expect_refused(bad, "paths[fast].precision not float32", "a path accumulating in f16");
}

TEST(Descriptor, VersionTwoOneValuesOutsideTheirEnumsAreRefused) {
  struct Case {
    const char* field;
    void (*set)(protocol::Descriptor&);
  };
  const Case cases[] = {
      {"contract.self_attention_only", [](protocol::Descriptor& d) { d.contract.self_attention_only = 2; }},
      {"contract.alibi_slopes", [](protocol::Descriptor& d) { d.contract.alibi_slopes = 7; }},
      {"contract.alibi_max_bias", [](protocol::Descriptor& d) { d.contract.alibi_max_bias = -1; }},
      {"contract.inputs", [](protocol::Descriptor& d) { d.contract.inputs = 3; }},
      {"contract.max_abs_value", [](protocol::Descriptor& d) { d.contract.max_abs_value = 0.5; }},
      {"precision.bias", [](protocol::Descriptor& d) { d.precision.bias = 3; }},
      {"paths[tiled].precision: its storage differs",
       [](protocol::Descriptor& d) { d.paths[0].precision.bias = ATTEST_BF16; }},
      {"precision.weight_sum", [](protocol::Descriptor& d) { d.precision.weight_sum = 9; }},
      {"precision.pv_unnormalised", [](protocol::Descriptor& d) { d.precision.pv_unnormalised = 5; }},
      {"precision.q_entry", [](protocol::Descriptor& d) { d.precision.q_entry = 4; }},
      {"paths[tiled].precision: its storage differs",
       [](protocol::Descriptor& d) { d.paths[0].precision.o = ATTEST_BF16; }},
      {"declared twice", [](protocol::Descriptor& d) { d.paths.push_back(d.paths[0]); }},
      {"path name", [](protocol::Descriptor& d) { d.paths[0].path.clear(); }},
      {"without ATTEST_CAP_ALIBI", [](protocol::Descriptor& d) { d.capabilities &= ~ATTEST_CAP_ALIBI; }},
  };
  EXPECT_NO_THROW(capabilities_from_descriptor(descriptor_2_1()));
  for (const Case& c : cases) {
    protocol::Descriptor d = descriptor_2_1();
    c.set(d);
    expect_refused(d, c.field, c.field);
  }
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
      {"contract.batch",
       [](attest_contract& k) {
         k.batch = {1 << 20, 1 << 20};
       }},
      {"contract.head_dim",
       [](attest_contract& k) {
         k.head_dim = {1 << 30, 1 << 30};
       }},
      {"contract.heads",
       [](attest_contract& k) {
         k.heads = {1000, 1000};
       }},
      {"contract.q_len",
       [](attest_contract& k) {
         k.q_len = {1 << 20, 1 << 21};
       }},
      {"contract.k_len",
       [](attest_contract& k) {
         k.k_len = {1 << 20, 1 << 21};
       }},
      {"contract.q_offset",
       [](attest_contract& k) {
         k.q_offset = {1LL << 41, 1LL << 42};
       }},
      {"contract.q_offset",
       [](attest_contract& k) {
         k.q_offset = {-(1LL << 42), -(1LL << 41)};
       }},
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
// logit passed: 128 ulp is the limit.
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
// (an early protocol truncated them): what the kernel sent is what attest keeps.
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

// ABI 2.7: Dv's own widths and ALiBi-or-bias cross the wire (after 2.4's section, written with zeros)
// into the contract, and come back out of attest's own declaration; a contradiction is refused by name.
TEST(Descriptor, ValueWidthsAndAlibiOrBiasCrossTheWire) {
  protocol::Descriptor d = causal_descriptor();
  d.capabilities |= ATTEST_CAP_ALIBI | ATTEST_CAP_BIAS;
  d.value_dims = {32, 64};
  d.value_dim = {16, 256};
  d.alibi_excludes_bias = 1;
  protocol::Writer w;
  protocol::write_descriptor(w, d);
  protocol::Reader r(w.bytes());
  const Capabilities c = capabilities_from_descriptor(protocol::read_descriptor(r));
  EXPECT_EQ(c.contract.value_dims, (std::vector<int>{32, 64}));
  EXPECT_EQ(c.contract.value_dim, (Range{16, 256}));
  EXPECT_TRUE(c.contract.alibi_excludes_bias);
  const protocol::Descriptor back = descriptor_from_capabilities(c, "ggml-like");
  EXPECT_EQ(back.value_dims, d.value_dims);
  EXPECT_EQ(back.value_dim.max, 256);
  EXPECT_EQ(back.alibi_excludes_bias, 1);

  protocol::Descriptor tied = d;
  tied.contract.dk_equals_dv = 1;
  expect_refused(tied, "with contract.dk_equals_dv", "value widths beside dk_equals_dv");
  protocol::Descriptor outside = d;
  outside.value_dim = {100, 200};
  expect_refused(outside, "value_dims holds no width within value_dim", "value_dims outside value_dim");
  protocol::Descriptor wide = d;
  wide.value_dims = {4096};
  wide.value_dim = {};
  expect_refused(wide, "value_dims holds 4096", "a width beyond attest's");
  protocol::Descriptor flag = d;
  flag.alibi_excludes_bias = 2;
  expect_refused(flag, "alibi_excludes_bias is 2", "a flag of 2");
}

// ABI 2.9: flushing subnormals is declared once, by the kernel, and every path inherits it; a
// descriptor written before 2.9 (no section) keeps them.
TEST(Descriptor, FlushSubnormalsCrossesTheWireAndPathsInheritIt) {
  protocol::Descriptor d = causal_descriptor();
  d.precision.flush_subnormals = 1;
  d.paths.push_back({"fast", d.precision});
  d.paths.back().precision.flush_subnormals = 0;
  protocol::Writer w;
  protocol::write_descriptor(w, d);
  protocol::Reader r(w.bytes());
  const Capabilities c = capabilities_from_descriptor(protocol::read_descriptor(r));
  EXPECT_TRUE(c.precision.flush_subnormals);
  EXPECT_TRUE(c.path_precision.at("fast").flush_subnormals);
  EXPECT_NE(c.precision.summary().find("subnormals flushed"), std::string::npos) << c.precision.summary();
  EXPECT_EQ(descriptor_from_capabilities(c, "ftz").precision.flush_subnormals, 1);

  protocol::Descriptor kept = causal_descriptor();
  protocol::Writer before;
  protocol::write_descriptor(before, kept);
  protocol::Reader old(before.bytes());
  EXPECT_FALSE(capabilities_from_descriptor(protocol::read_descriptor(old)).precision.flush_subnormals);

  protocol::Descriptor path_only = causal_descriptor();
  path_only.paths.push_back({"fast", path_only.precision});
  path_only.paths.back().precision.flush_subnormals = 1;
  expect_refused(path_only, "only the kernel's precision declares it", "a path flushing alone");
}

}  // namespace
}  // namespace attest
