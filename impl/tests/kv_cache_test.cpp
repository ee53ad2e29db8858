#include <gtest/gtest.h>

#include <random>

#include "attest/kernels/builtin_kernels.h"

namespace attest {
namespace {

TEST(KvCacheBytes, SourceMaterialFigures) {
  EXPECT_EQ(dense_kv_cache_bytes(32, 8192, 32, 128, 2), 4294967296ull);  // 4 GiB
  EXPECT_EQ(dense_kv_cache_bytes(32, 8192, 8, 128, 2), 1073741824ull);   // 1 GiB with 8 kv heads
}

TEST(PagedDecode, ReportsWholePagesAcrossBatches) {
  const auto kernel = make_decode_kernel(16);
  DecodeConfig c{.batch = 2, .heads = 4, .kv_heads = 2, .head_dim = 8, .value_dim = 6, .scale = 0.25};
  auto session = kernel->open_decode(c);
  EXPECT_EQ(session->cache_bytes(), 0u);
  const int n = 17;  // one page and one token
  std::vector<float> q(2 * 4 * n * 8, 0.1f), k(2 * 2 * n * 8, 0.2f), v(2 * 2 * n * 6, 0.3f);
  std::vector<float> o(2 * 4 * n * 6), lse(2 * 4 * n);
  session->step(n, q, k, v, o, lse);
  EXPECT_EQ(session->length(), 17);
  // 2 sequences x 2 pages x (2 kv heads x 16 tokens x (8 + 6) floats x 4 bytes).
  EXPECT_EQ(session->cache_bytes(), 2u * 2 * 2 * 16 * 14 * 4);
  for (float x : o) EXPECT_NEAR(x, 0.3f, 1e-6f);  // equal values: any weights average to 0.3
}

TEST(PagedDecode, RejectsMismatchedStep) {
  const auto kernel = make_decode_kernel(4);
  auto session = kernel->open_decode({.batch = 1, .heads = 1, .kv_heads = 1, .head_dim = 2, .value_dim = 2});
  std::vector<float> q(2), k(2), v(2), o(2), lse(1), short_k(1);
  EXPECT_THROW(session->step(1, q, short_k, v, o, lse), ProblemError);
  EXPECT_THROW(session->step(0, q, k, v, o, lse), ProblemError);
  EXPECT_NO_THROW(session->step(1, q, k, v, o, lse));
}

TEST(DecodeConfig, InvalidFieldsAreNamed) {
  const auto kernel = make_decode_kernel(4);
  EXPECT_THROW(kernel->open_decode({.batch = 0}), ProblemError);
  EXPECT_THROW(kernel->open_decode({.heads = 3, .kv_heads = 2}), ProblemError);
  EXPECT_THROW(kernel->open_decode({.mask = {.window = 0}}), ProblemError);
}

}  // namespace
}  // namespace attest
