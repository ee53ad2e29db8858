// The model kernel's decode session (ci/selfcheck/model_decode.h) attends each step exactly as its
// forward attends the same rows of the whole sequence: selfcheck's decode declarations rest on it.
#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

#include "attest/kernels/cache_policy.h"
#include "attest/kernels/kernel.h"
#include "declared_model.h"

namespace attest {
namespace {

// B = 1, H = 2 over Hkv = 1, Dk = Dv = 4, T tokens with values from `seed`.
Problem sequence(int t, unsigned seed) {
  Problem p;
  p.shape = {1, 2, 1, t, t, 4, 4};
  p.mask.causal = true;
  p.resize_buffers();
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> unit(-2.0f, 2.0f);
  for (auto* v : {&p.q, &p.k, &p.v})
    for (float& x : *v) x = unit(rng);
  return p;
}

// Rows [from, from + n) of a [H][T][D] buffer, as a step's [H][n][D].
std::vector<float> rows(const std::vector<float>& all, int heads, int t, int d, int from, int n) {
  std::vector<float> out;
  for (int h = 0; h < heads; ++h)
    out.insert(out.end(), all.begin() + (std::size_t(h) * t + from) * d,
               all.begin() + (std::size_t(h) * t + from + n) * d);
  return out;
}

// Decodes `whole` (T tokens) in steps of `chunks` and expects each step's O and LSE to be the
// forward's rows o and lse of the same positions.
void expect_steps_equal(DecodeSession& session, const Problem& whole, const std::vector<float>& o,
                        const std::vector<float>& lse, const std::vector<int>& chunks) {
  const int t = whole.shape.k_len;
  int start = 0;
  for (const int n : chunks) {
    std::vector<float> step_o(2 * n * 4), step_lse(2 * n);
    session.step(n, rows(whole.q, 2, t, 4, start, n), rows(whole.k, 1, t, 4, start, n),
                 rows(whole.v, 1, t, 4, start, n), step_o, step_lse);
    EXPECT_EQ(step_o, rows(o, 2, t, 4, start, n)) << "step from " << start;
    EXPECT_EQ(step_lse, rows(lse, 2, t, 1, start, n)) << "step from " << start;
    start += n;
  }
}

Capabilities decoder() {
  Capabilities declaration;
  declaration.features.insert(Feature::kDecode);
  declaration.features.insert(Feature::kCausal);
  return declaration;
}

DecodeConfig config_of(const Problem& whole) {
  DecodeConfig config;
  config.heads = 2;
  config.head_dim = config.value_dim = 4;
  config.scale = whole.effective_scale();
  return config;
}

TEST(ModelDecode, StepsEqualTheForwardOfTheWholeSequence) {
  Capabilities declaration = decoder();
  declaration.precision.k = declaration.precision.v = Scalar::kBF16;
  declaration.precision.accumulator = Scalar::kF16;
  Problem whole = sequence(5, 3);
  for (float& x : whole.k) x = round_to(x, Scalar::kBF16);
  for (float& x : whole.v) x = round_to(x, Scalar::kBF16);
  whole.storage = {Scalar::kF32, Scalar::kBF16, Scalar::kBF16};
  const auto model = make_declared_model(declaration, "model");
  std::vector<float> o(whole.o_size()), lse(whole.lse_size());
  model->forward(whole, o, lse);

  const auto session = model->open_decode(config_of(whole));
  expect_steps_equal(*session, whole, o, lse, {3, 1, 1});
  EXPECT_EQ(session->length(), 5);
  EXPECT_THROW(session->step(1, {}, {}, {}, {}, {}), ProblemError);
}

// A window cache of 2 attends each query over itself and the position before: the forward with a
// window of 2 over the whole sequence.
TEST(ModelDecode, AWindowCacheAttendsTheRetainedPositionsOnly) {
  Capabilities declaration = decoder();
  declaration.cache = {CachePolicy::Kind::kWindow, 0, 2};
  Problem whole = sequence(6, 5);
  whole.mask.window = 2;
  const auto model = make_declared_model(declaration, "model");
  std::vector<float> o(whole.o_size()), lse(whole.lse_size());
  model->forward(whole, o, lse);
  const auto session = model->open_decode(config_of(whole));
  expect_steps_equal(*session, whole, o, lse, {4, 1, 1});
  EXPECT_EQ(session->retained_positions(0, 0), (std::vector<long long>{4, 5}));
}

// Through a block table of 2-token pages, in reversed page order and in two calls, the outputs
// are the forward's over the whole sequence, and only the new tokens' slots are written.
TEST(ModelDecode, ABlockTableCallEqualsTheForward) {
  Capabilities declaration = decoder();
  declaration.page_tokens = 2;
  const Problem whole = sequence(5, 9);
  const auto model = make_declared_model(declaration, "model");
  std::vector<float> o(whole.o_size()), lse(whole.lse_size());
  model->forward(whole, o, lse);
  const DecodeConfig config = config_of(whole);
  const std::size_t page = model->page_bytes(config);
  ASSERT_EQ(page, 2 * (4 + 4) * sizeof(float));
  std::vector<std::byte> pool(4 * page, std::byte{0x7f});
  const std::vector<std::int32_t> table{3, 2, 1};
  int start = 0;
  for (const int n : {3, 2}) {
    const std::vector<std::int64_t> lengths{start};
    const std::vector<std::int32_t> counts{n};
    const std::vector<float> q = rows(whole.q, 2, 5, 4, start, n), k = rows(whole.k, 1, 5, 4, start, n),
                             v = rows(whole.v, 1, 5, 4, start, n);
    std::vector<float> step_o(2 * n * 4), step_lse(2 * n);
    model->decode_paged(config, {pool, table, 3, lengths, counts, q, k, v, step_o, step_lse});
    EXPECT_EQ(step_o, rows(o, 2, 5, 4, start, n)) << "call from " << start;
    EXPECT_EQ(step_lse, rows(lse, 2, 5, 1, start, n)) << "call from " << start;
    start += n;
  }
  for (std::size_t b = 0; b < page; ++b) EXPECT_EQ(pool[b], std::byte{0x7f}) << "page 0 is no table's";
}

}  // namespace
}  // namespace attest
