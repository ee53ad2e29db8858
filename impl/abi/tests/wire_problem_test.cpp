// A problem crosses the C ABI and the process protocol in the kernel's storage types: a bias
// declared 16-bit travels as 16-bit values (bias_stored, bias NULL) and comes back exactly.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "attest/abi/abi_adapter.h"
#include "attest/abi/process_protocol.hpp"

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
  Trip t{protocol::read_problem(r, abi_code(precision.q), abi_code(precision.k), abi_code(precision.v),
                                abi_code(precision.bias)),
         {},
         {}};
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

// ABI 2.3: a backward request carries the problem, the thread hint, O, LSE and dO whole; arrays that
// disagree with the shape are refused before a kernel sees them; gradients come back into spans
// only when every size matches.
TEST(WireProblem, ABackwardRequestCrossesTheProtocolWhole) {
  const Problem p = biased_problem(Scalar::kF32);
  std::vector<float> o(p.o_size()), lse(p.lse_size()), d_o(p.o_size());
  for (std::size_t i = 0; i < o.size(); ++i) o[i] = 0.25f * float(i), d_o[i] = -1.5f + float(i);
  for (std::size_t i = 0; i < lse.size(); ++i) lse[i] = i == 1 ? -INFINITY : float(i);
  const protocol::WireBackward sent = to_wire(p, BackwardInputs{o, lse, d_o, 3}, Precision{});
  protocol::Writer w;
  protocol::write_backward(w, sent);
  protocol::Reader r(w.bytes());
  const protocol::WireBackward got = protocol::read_backward(r, ATTEST_F32, ATTEST_F32, ATTEST_F32, ATTEST_F32, 4);
  const attest_backward_inputs in = got.view();
  EXPECT_EQ(in.threads, 3);
  EXPECT_EQ(std::vector<float>(static_cast<const float*>(in.o), static_cast<const float*>(in.o) + o.size()), o);
  EXPECT_EQ(std::vector<float>(in.lse, in.lse + lse.size()), lse);
  EXPECT_EQ(std::vector<float>(static_cast<const float*>(in.d_o), static_cast<const float*>(in.d_o) + o.size()), d_o);
  EXPECT_EQ(from_wire(got.problem.view(), Precision{}).modifiers.bias, p.modifiers.bias);

  protocol::WireBackward short_lse = sent;
  short_lse.lse.pop_back();
  protocol::Writer bad;
  protocol::write_backward(bad, short_lse);
  protocol::Reader rb(bad.bytes());
  EXPECT_THROW(protocol::read_backward(rb, ATTEST_F32, ATTEST_F32, ATTEST_F32, ATTEST_F32, 4), protocol::ProtocolError);

  std::vector<float> dq(p.q_size()), dk(p.k_size()), dv(p.v_size()), dsinks;
  const GradientSpans out{dq, dk, dv, dsinks};
  std::vector<std::uint8_t> bytes_q = stored(std::vector<float>(p.q_size(), 2.0f), Scalar::kF32),
                            bytes_k = stored(std::vector<float>(p.k_size(), 3.0f), Scalar::kF32),
                            bytes_v = stored(std::vector<float>(p.v_size(), 4.0f), Scalar::kF32);
  EXPECT_TRUE(gradients_from_storage(bytes_q, bytes_k, bytes_v, {}, Precision{}, out));
  EXPECT_EQ(dq[0], 2.0f);
  EXPECT_EQ(dv.back(), 4.0f);
  bytes_k.resize(bytes_k.size() - 4);
  std::fill(dq.begin(), dq.end(), 0.0f);
  EXPECT_FALSE(gradients_from_storage(bytes_q, bytes_k, bytes_v, {}, Precision{}, out));
  EXPECT_EQ(dq[0], 0.0f) << "nothing written when a size is wrong";
}

// The adapter refuses a backward call with a NULL input before reading it: a status, not a crash.
TEST(WireProblem, ABackwardWithANullInputIsRefused) {
  const AbiAdapter adapter(make_kernel("loop"));
  const attest_kernel_v2* k = adapter.descriptor();
  ASSERT_NE(k->backward, nullptr);
  const Problem p = biased_problem(Scalar::kF32);
  const protocol::WireProblem wire = to_wire(p, Precision{});
  const attest_problem_v2 view = wire.view();
  std::vector<float> lse(p.lse_size()), d_o(p.o_size()), dq(p.q_size()), dk(p.k_size()), dv(p.v_size());
  attest_backward_inputs in{};
  in.lse = lse.data(), in.d_o = d_o.data();  // o left NULL
  attest_gradients out{};
  out.dq = dq.data(), out.dk = dk.data(), out.dv = dv.data();
  EXPECT_EQ(k->backward(k->user, &view, &in, &out), ATTEST_INVALID_ARGUMENT);
  EXPECT_NE(std::string(k->last_error(k->user)).find("NULL"), std::string::npos) << k->last_error(k->user);
}

}  // namespace
}  // namespace attest
