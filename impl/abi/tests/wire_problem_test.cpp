// A problem crosses the C ABI and the process protocol in the kernel's storage types: a bias
// declared 16-bit travels as 16-bit values (bias_stored, bias NULL) and comes back exactly.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "attest/abi_adapter.h"
#include "attest/process_protocol.hpp"

namespace attest {
namespace {

Problem biased_problem(Scalar bias_storage) {
  Problem p;
  p.shape = {2, 2, 1, 3, 4, 2, 2};
  p.modifiers.bias_per_batch = false;
  p.resize_buffers();
  p.modifiers.bias.resize(std::size_t(2) * 3 * 4);
  for (std::size_t i = 0; i < p.modifiers.bias.size(); ++i)
    p.modifiers.bias[i] = i % 5 == 0 ? -INFINITY : round_to(0.37f * float(i) - 2.0f, bias_storage);
  p.storage.bias = bias_storage;
  return p;
}

// Through the wire and back: what the kernel sees (the C view) and the problem rebuilt from it.
struct Trip {
  protocol::WireProblem wire;
  attest_problem_v2 view;
  Problem back;
};
Trip trip(const Problem& p, const Precision& precision) {
  protocol::Writer w;
  protocol::write_problem(w, to_wire(p, precision));
  protocol::Reader r(w.bytes());
  Trip t{protocol::read_problem(r, 4, 4, 4, protocol::storage_bytes(precision.bias == Scalar::kF32 ? ATTEST_F32 : ATTEST_F16)),
         {}, {}};
  t.view = t.wire.view();
  t.back = from_wire(t.view, precision);
  return t;
}

TEST(WireProblem, A16BitBiasTravelsAs16BitValues) {
  for (Scalar s : {Scalar::kF16, Scalar::kBF16}) {
    Precision precision;
    precision.bias = s;
    const Problem p = biased_problem(s);
    const Trip t = trip(p, precision);
    EXPECT_EQ(t.view.bias, nullptr) << to_string(s);
    ASSERT_NE(t.view.bias_stored, nullptr) << to_string(s);
    const auto* bits = static_cast<const std::uint16_t*>(t.view.bias_stored);
    EXPECT_EQ(bits[1], to_bits16(p.modifiers.bias[1], s));
    EXPECT_EQ(bits[0], s == Scalar::kF16 ? 0xFC00 : 0xFF80) << "-inf";
    EXPECT_EQ(t.back.modifiers.bias, p.modifiers.bias) << to_string(s);
    EXPECT_EQ(t.back.storage.bias, s);
    EXPECT_NO_THROW(t.back.validate());
  }
}

TEST(WireProblem, AnF32BiasIsTheSameBufferInBothFields) {
  const Problem p = biased_problem(Scalar::kF32);
  const Trip t = trip(p, Precision{});
  ASSERT_NE(t.view.bias, nullptr);
  EXPECT_EQ(static_cast<const void*>(t.view.bias), t.view.bias_stored);
  EXPECT_EQ(t.back.modifiers.bias, p.modifiers.bias);
  // No bias: both NULL.
  Problem plain = p;
  plain.modifiers.bias.clear();
  const Trip none = trip(plain, Precision{});
  EXPECT_EQ(none.view.bias, nullptr);
  EXPECT_EQ(none.view.bias_stored, nullptr);
}

TEST(WireProblem, ABiasOfTheWrongElementSizeIsRefused) {
  Precision f16;
  f16.bias = Scalar::kF16;
  protocol::Writer w;
  protocol::write_problem(w, to_wire(biased_problem(Scalar::kF16), f16));
  protocol::Reader r(w.bytes());
  // A reader expecting f32 elements finds half as many as the shape needs.
  EXPECT_THROW(protocol::read_problem(r), protocol::ProtocolError);
}

}  // namespace
}  // namespace attest
