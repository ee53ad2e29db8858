// The model kernel serves each declared path under its name, with differently tiled but equally
// exact code: a "per-batch" path a batch entry at a time gives the whole problem's bits.
#include "declared_model.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "attest/kernel.h"
#include "attest/path_predicate.h"

namespace attest {
namespace {

// B = 3 with a per-batch key padding and bias: every per-batch input is sliced.
Problem batched() {
  Problem p;
  p.shape = {3, 2, 1, 4, 6, 8, 8};
  p.resize_buffers();
  std::mt19937_64 rng(4);
  std::uniform_real_distribution<float> unit(-2.0f, 2.0f);
  for (auto* v : {&p.q, &p.k, &p.v})
    for (float& x : *v) x = unit(rng);
  p.mask.kv_valid = {6, 3, 5};
  p.modifiers.bias.resize(std::size_t(3) * 2 * 4 * 6);
  for (float& x : p.modifiers.bias) x = unit(rng);
  return p;
}

TEST(DeclaredModel, ServesEachDeclaredPathUnderItsNameExactly) {
  Capabilities declaration;
  declaration.features.insert(Feature::kBias);
  const auto whole = make_declared_model(declaration, "whole");
  PathPredicate per_batch{.path = "per-batch"};
  per_batch.batch = {2, 64};
  PathPredicate short_q{.path = "short-q"};
  short_q.q_len = {1, 2};
  declaration.paths = {short_q, per_batch};
  const auto model = make_declared_model(declaration, "paths");

  const Problem p = batched();
  std::vector<float> o(p.o_size()), lse(p.lse_size()), o_whole(p.o_size()), lse_whole(p.lse_size());
  whole->forward(p, o_whole, lse_whole);
  model->forward(p, o, lse);
  EXPECT_EQ(model->last_path(), "per-batch");
  EXPECT_EQ(o, o_whole);
  EXPECT_EQ(lse, lse_whole);

  Problem one = p;
  one.shape.batch = 1;
  one.q.resize(one.q_size()), one.k.resize(one.k_size()), one.v.resize(one.v_size());
  one.mask.kv_valid = {6};
  one.modifiers.bias.resize(std::size_t(2) * 4 * 6);
  std::vector<float> o1(one.o_size()), lse1(one.lse_size());
  model->forward(one, o1, lse1);
  EXPECT_EQ(model->last_path(), "default");  // no predicate takes B = 1, Tq = 4
  EXPECT_EQ(std::vector<float>(o1.begin(), o1.end()), std::vector<float>(o_whole.begin(), o_whole.begin() + o1.size()));
}

}  // namespace
}  // namespace attest
