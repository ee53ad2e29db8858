// The integer mask terms of the feature table travel through the C ABI and the process protocol
// by ATTEST_INTEGER_MASK_TERMS alone: the list must match the table, and every term must survive
// a trip over the wire (problems and decode sessions).
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "attest/abi/abi_adapter.h"
#include "attest/abi/process_protocol.hpp"
#include "attest/model/features.h"

namespace attest {
namespace {

TEST(IntegerTerms, HeaderListMatchesTheFeatureTable) {
  std::vector<std::pair<std::string, std::uint32_t>> header;
#define ATTEST_TERM_ENTRY(name, cap) header.emplace_back(#name, cap);
  ATTEST_INTEGER_MASK_TERMS(ATTEST_TERM_ENTRY)
#undef ATTEST_TERM_ENTRY
  std::vector<std::pair<std::string, std::uint32_t>> table;
  for (const FeatureInfo* term : integer_mask_terms()) table.emplace_back(term->name, term->abi_bit);
  EXPECT_EQ(header, table);
}

TEST(IntegerTerms, EveryTermCrossesTheWire) {
  Problem p;
  p.shape = {1, 1, 1, 3, 5, 2, 2};
  p.mask.causal = true;
  int value = 2;
  for (const FeatureInfo* term : integer_mask_terms()) p.mask.*term->parameter = value++;
  p.resize_buffers();
  const Precision f32{};
  protocol::Writer w;
  protocol::write_problem(w, to_wire(p, f32));
  protocol::Reader r(w.bytes());
  const Problem back = from_wire(protocol::read_problem(r).view(), f32);
  DecodeConfig config;
  config.mask = integer_mask_terms_of(p.mask);
  protocol::Writer dw;
  protocol::write_decode_config(dw, to_wire(config));
  protocol::Reader dr(dw.bytes());
  const attest_decode_config_v2 decoded = protocol::read_decode_config(dr).view();
  for (const FeatureInfo* term : integer_mask_terms()) {
    EXPECT_EQ(back.mask.*term->parameter, p.mask.*term->parameter) << term->name;
    int on_wire = 0;
#define ATTEST_TERM_VALUE(field, cap) \
  if (std::string(#field) == term->name) on_wire = decoded.field;
    ATTEST_INTEGER_MASK_TERMS(ATTEST_TERM_VALUE)
#undef ATTEST_TERM_VALUE
    EXPECT_EQ(on_wire, *(p.mask.*term->parameter)) << term->name << " in a decode configuration";
  }
}

TEST(IntegerTerms, AVersion1KernelCannotDeclareThem) {
  protocol::Descriptor d;
  d.abi_version = ATTEST_ABI_VERSION_1;
  d.capabilities = ATTEST_CAP_CAUSAL | ATTEST_CAP_WINDOW;
  EXPECT_NO_THROW(capabilities_from_descriptor(d));
  for (const FeatureInfo* term : integer_mask_terms()) {
    if (term->abi_bit < (1u << 10)) continue;  // window is version 1's
    d.capabilities = ATTEST_CAP_CAUSAL | term->abi_bit;
    EXPECT_THROW(capabilities_from_descriptor(d), std::invalid_argument) << term->name;
  }
}

TEST(IntegerTerms, AnOlderFrameLeavesLaterTermsOff) {
  protocol::Writer w;
  w.array(std::vector<std::int32_t>{5});  // a frame from a build that knew only the window
  protocol::Reader r(w.bytes());
  attest_decode_config_v2 c{};
  c.chunk = 9;
  protocol::read_integer_terms(r, c);
  EXPECT_EQ(c.window, 5);
  EXPECT_EQ(c.chunk, 0);
}

TEST(IntegerTerms, ALaterTermNotSetIsReadAndASetOneIsRefused) {
  // A frame from a build that knows one more term: 0 there reads; a value there is an error.
  for (int extra : {0, 7}) {
    protocol::Writer w;
    std::vector<std::int32_t> terms(integer_mask_terms().size() + 1, 0);
    terms.back() = extra;
    w.array(terms);
    protocol::Reader r(w.bytes());
    attest_decode_config_v2 c{};
    if (extra == 0)
      EXPECT_NO_THROW(protocol::read_integer_terms(r, c));
    else
      EXPECT_THROW(protocol::read_integer_terms(r, c), protocol::ProtocolError);
  }
}

}  // namespace
}  // namespace attest
