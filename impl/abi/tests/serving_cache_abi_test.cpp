// ABI 2.4 (docs/design.md#serving-caches): quantized K/V storage travels as attest_precision's row layouts and
// comes back exactly, q8_head's static scales travel with the decode configuration, and a cache
// policy crosses the descriptor; what the ABI cannot mean is refused with the field's name.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "attest/abi/abi_adapter.h"
#include "attest/model/quantized.h"

namespace attest {
namespace {

Problem quantized_problem(Scalar format) {
  Problem p;
  p.shape = {2, 2, 1, 3, 5, 40, 7};  // B, H, Hkv, Tq, Tk, Dk (two q8 groups, the second short), Dv (odd)
  p.storage.k = p.storage.v = format;
  p.resize_buffers();
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> unit(-3.0f, 3.0f);
  for (auto* x : {&p.q, &p.k, &p.v})
    for (float& e : *x) e = unit(rng);
  std::fill_n(p.k.begin() + 40, 40, 0.0f);  // a row of zeros: scale 0
  p.fit_to_storage();
  return p;
}

void expect_same(const std::vector<float>& a, const std::vector<float>& b, const std::string& label) {
  ASSERT_EQ(a.size(), b.size()) << label;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (!(std::isnan(a[i]) && std::isnan(b[i]))) {
      ASSERT_EQ(a[i], b[i]) << label << " at " << i;
    }
}

TEST(ServingCacheAbi, QuantizedKAndVTravelExactly) {
  for (Scalar format : {Scalar::kE4M3, Scalar::kE5M2, Scalar::kQ8, Scalar::kQ4, Scalar::kQ8Token, Scalar::kQ8Head}) {
    const Problem p = quantized_problem(format);
    Precision precision;
    precision.k = precision.v = format;
    protocol::Writer w;
    protocol::write_problem(w, to_wire(p, precision));
    protocol::Reader r(w.bytes());
    const protocol::WireProblem wire = protocol::read_problem(r, ATTEST_F32, abi_code(format), abi_code(format));
    const Shape& s = p.shape;
    EXPECT_EQ(wire.k.size(), protocol::stored_kv_size(abi_code(format), s.batch * s.kv_heads, s.k_len, s.head_dim));
    const Problem back = from_wire(wire.view(), precision);
    expect_same(back.k, p.k, std::string(to_string(format)) + " K");
    expect_same(back.v, p.v, std::string(to_string(format)) + " V");
  }
}

TEST(ServingCacheAbi, AKBufferOfTheWrongLengthIsRefused) {
  const Problem p = quantized_problem(Scalar::kQ8);
  Precision precision;
  precision.k = precision.v = Scalar::kQ8;
  protocol::WireProblem wire = to_wire(p, precision);
  wire.k.pop_back();
  protocol::Writer w;
  protocol::write_problem(w, wire);
  protocol::Reader r(w.bytes());
  EXPECT_THROW(protocol::read_problem(r, ATTEST_F32, ATTEST_Q8, ATTEST_Q8), protocol::ProtocolError);
}

TEST(ServingCacheAbi, Q8HeadScalesTravelWithTheDecodeConfiguration) {
  DecodeConfig c{.batch = 2, .heads = 2, .kv_heads = 1, .head_dim = 4, .value_dim = 4, .scale = 0.5};
  c.k_scales = {0.5f, 0.25f}, c.v_scales = {1.0f, 2.0f};
  protocol::Writer w;
  protocol::write_decode_config(w, to_wire(c));
  protocol::Reader r(w.bytes());
  const protocol::WireDecodeConfig back = protocol::read_decode_config(r);
  const attest_decode_config_v2 view = back.view();
  ASSERT_NE(view.reserved[0], nullptr);
  EXPECT_EQ(static_cast<const float*>(view.reserved[0])[1], 0.25f);
  EXPECT_EQ(static_cast<const float*>(view.reserved[1])[1], 2.0f);
  // A step's q8_head rows are the codes of those scales: 1.25 = 0.25 x 5 in sequence 1.
  Precision precision;
  precision.k = precision.v = Scalar::kQ8Head;
  const std::vector<float> q(16, 1.0f), k = {0, 0, 0, 0.5f, 0, 0, 0, 1.25f}, v(8, 2.0f);
  const StoredStep step = stored_step(c, precision, 1, q, k, v);
  ASSERT_EQ(step.k.size(), 8u);
  EXPECT_EQ(static_cast<std::int8_t>(step.k[3]), 1);
  EXPECT_EQ(static_cast<std::int8_t>(step.k[7]), 5);
  // Scales of the wrong count are refused.
  protocol::WireDecodeConfig wrong = to_wire(c);
  wrong.v_scales.pop_back();
  protocol::Writer ww;
  protocol::write_decode_config(ww, wrong);
  protocol::Reader rr(ww.bytes());
  EXPECT_THROW(protocol::read_decode_config(rr), protocol::ProtocolError);
}

protocol::Descriptor decoder(std::int32_t policy, std::int32_t sinks, std::int32_t recent, std::int32_t reports) {
  protocol::Descriptor d;
  d.abi_version = ATTEST_ABI_VERSION_2;
  d.capabilities = ATTEST_CAP_CAUSAL | ATTEST_CAP_DECODE;
  d.contract.decode_only = 1;
  d.cache_policy = policy, d.cache_sinks = sinks, d.cache_recent = recent, d.reports_retained = reports;
  return d;
}

Capabilities through_the_wire(const protocol::Descriptor& d) {
  protocol::Writer w;
  protocol::write_descriptor(w, d);
  protocol::Reader r(w.bytes());
  return capabilities_from_descriptor(protocol::read_descriptor(r));
}

TEST(ServingCacheAbi, ACachePolicyCrossesTheDescriptor) {
  const Capabilities streaming = through_the_wire(decoder(ATTEST_CACHE_SINKS_RECENT, 4, 32, 0));
  EXPECT_EQ(streaming.cache.summary(), "sinks 4 + recent 32");
  EXPECT_EQ(through_the_wire(decoder(ATTEST_CACHE_WINDOW, 0, 8, 0)).cache.summary(), "window 8");
  EXPECT_EQ(through_the_wire(decoder(ATTEST_CACHE_EXPLICIT, 0, 0, 1)).cache.kind, CachePolicy::Kind::kExplicit);
  // And back: attest's own declaration as a descriptor.
  const protocol::Descriptor d = descriptor_from_capabilities(streaming, "streaming");
  EXPECT_EQ(d.cache_policy, ATTEST_CACHE_SINKS_RECENT);
  EXPECT_EQ(d.cache_sinks, 4);
  // A full cache writes no 2.4 section: a 2.3 reader still loads the descriptor.
  protocol::Writer full, older;
  protocol::write_descriptor(full, decoder(ATTEST_CACHE_FULL, 0, 0, 0));
  protocol::Descriptor without = decoder(ATTEST_CACHE_FULL, 0, 0, 0);
  protocol::write_descriptor(older, without);
  EXPECT_EQ(full.bytes().size(), older.bytes().size());
}

void expect_refused(const protocol::Descriptor& d, const std::string& says) {
  try {
    capabilities_from_descriptor(d);
    ADD_FAILURE() << "accepted; expected: " << says;
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
  }
}

TEST(ServingCacheAbi, WhatTheAbiCannotMeanIsRefusedWithTheField) {
  expect_refused(decoder(7, 0, 0, 0), "cache_policy is 7");
  expect_refused(decoder(ATTEST_CACHE_EXPLICIT, 0, 0, 0), "decode_retained");
  expect_refused(decoder(ATTEST_CACHE_WINDOW, 0, 8, 1), "decode_retained");
  expect_refused(decoder(ATTEST_CACHE_WINDOW, 2, 8, 0), "window");
  expect_refused(decoder(ATTEST_CACHE_SINKS_RECENT, 0, 32, 0), "sinks_recent");
  protocol::Descriptor q_quantized = decoder(ATTEST_CACHE_FULL, 0, 0, 0);
  q_quantized.precision.q = ATTEST_Q8;
  expect_refused(q_quantized, "precision.q");
  protocol::Descriptor unknown = decoder(ATTEST_CACHE_FULL, 0, 0, 0);
  unknown.precision.k = ATTEST_Q4_0 + 1;  // the first code past the table's last
  expect_refused(unknown, "precision.k = 10");
  protocol::Descriptor per_head_forward = decoder(ATTEST_CACHE_FULL, 0, 0, 0);
  per_head_forward.contract.decode_only = 0;
  per_head_forward.precision.k = per_head_forward.precision.v = ATTEST_Q8_HEAD;
  expect_refused(per_head_forward, "q8_head");
  protocol::Descriptor forward_policy = decoder(ATTEST_CACHE_WINDOW, 0, 8, 0);
  forward_policy.capabilities = ATTEST_CAP_CAUSAL;
  forward_policy.contract.decode_only = 0;
  expect_refused(forward_policy, "without ATTEST_CAP_DECODE");
}

TEST(ServingCacheAbi, BlockTablesCrossTheDescriptorAndAMalformedStepIsRefused) {
  protocol::Descriptor d = decoder(ATTEST_CACHE_FULL, 0, 0, 0);
  d.page_tokens = 16;
  EXPECT_EQ(through_the_wire(d).page_tokens, 16);
  protocol::Descriptor negative = d;
  negative.page_tokens = -1;
  expect_refused(negative, "page_tokens is -1");
  protocol::Descriptor evicting = decoder(ATTEST_CACHE_WINDOW, 0, 8, 0);
  evicting.page_tokens = 16;
  expect_refused(evicting, "page_tokens with an evicting cache policy");

  // One sequence of one token in a pool of two 64-byte pages, through the wire and back.
  attest_decode_config_v2 c{};
  c.batch = 1, c.heads = 1, c.kv_heads = 1, c.head_dim = 4, c.value_dim = 4;
  protocol::WirePagedStep step;
  step.page_bytes = 64;
  const std::vector<std::uint8_t> pages(128, 0xFF);
  step.pool = pages;
  step.table_width = 1;
  step.tables = {1}, step.lengths = {0}, step.counts = {1};
  step.q.assign(16, 0), step.k.assign(16, 0), step.v.assign(16, 0);
  auto read_back = [&](const protocol::WirePagedStep& s) {
    protocol::Writer w;
    protocol::write_paged_step(w, s);
    protocol::Reader r(w.bytes());
    return protocol::read_paged_step(r, c, 16, ATTEST_F32, ATTEST_F32, ATTEST_F32);
  };
  EXPECT_EQ(read_back(step).tables, step.tables);
  auto refused = [&](protocol::WirePagedStep s, const std::string& says) {
    try {
      read_back(s);
      ADD_FAILURE() << "accepted; expected: " << says;
    } catch (const protocol::ProtocolError& e) {
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
    }
  };
  protocol::WirePagedStep outside = step;
  outside.tables = {2};
  refused(outside, "outside the pool");
  protocol::WirePagedStep torn = step;
  torn.pool = torn.pool.first(100);
  refused(torn, "whole number of pages");
  protocol::WirePagedStep narrow = step;
  narrow.lengths = {16};
  refused(narrow, "narrower than its sequence");
  protocol::WirePagedStep short_k = step;
  short_k.k.resize(12);
  refused(short_k, "does not match the counts");
}

}  // namespace
}  // namespace attest
