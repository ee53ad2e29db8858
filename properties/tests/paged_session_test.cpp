// The long stage's paged sessions: block-table decode past the block-table properties' 4096
// tokens, judged on sampled steps.
#include <gtest/gtest.h>

#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

#include "attest/kernels/builtin_kernels.h"
#include "attest/kernels/faults.h"
#include "attest/properties/size_ladder.h"

namespace attest {
namespace {

const SizeOptions kOptions{.max_len = 8192, .head_dims = {32}, .sampled_rows = 32, .jobs = 2};

const SizedCase& paged_case(const std::vector<SizedCase>& cases, int t) {
  const std::string name = "paged_session_t" + std::to_string(t) + "_d32";
  const auto it = std::find_if(cases.begin(), cases.end(), [&](const SizedCase& c) { return c.name == name; });
  if (it == cases.end()) throw std::runtime_error("no case " + name);
  return *it;
}

bool has(const std::vector<int>& v, int x) { return std::find(v.begin(), v.end(), x) != v.end(); }

// A block-table decoder gets a paged session at every long length to square_limit, whose steps include both sides
// of each table size 2^k (pages of 16 tokens: 4095 and 4096 are the 256th entry's edge) and the last
// tokens, decoded in calls of many sizes.
TEST(PagedSessions, ReachEveryLongLengthWithTheTableEdgesSampled) {
  const auto decoder = make_quantized_decode_kernel(Scalar::kQ8);
  const std::vector<SizedCase> cases = long_cases(decoder->capabilities(), kOptions);
  for (int t : {1024, 2048, 4096, 8192}) {
    const SizedCase& c = paged_case(cases, t);
    EXPECT_TRUE(c.paged && !c.retained_set && !c.backward);
    EXPECT_EQ(c.problem.shape.k_len, t);
    int tokens = 0;
    for (int n : c.decode_chunks) tokens += n;
    EXPECT_EQ(tokens, t);
    EXPECT_LE(c.decode_chunks.size(), 100u) << "each call moves the whole pool";
    EXPECT_EQ(c.decode_chunks.back(), 1);
    EXPECT_GT(*std::max_element(c.decode_chunks.begin(), c.decode_chunks.end()), 1);
    for (int row : {0, 15, 16, 127, 128, t / 2 - 1, t / 2, t - 2, t - 1})
      EXPECT_TRUE(has(c.rows, row)) << t << " " << row;
  }
  // Like a square problem, a session's work grows as T^2: none past square_limit.
  for (const SizedCase& c : long_cases(decoder->capabilities(), {.max_len = 16384, .head_dims = {32}}))
    if (c.paged) {
      EXPECT_LE(c.problem.shape.k_len, 8192) << c.name;
    }
  // A kernel without block tables has none.
  for (const SizedCase& c : long_cases(make_decode_kernel(16)->capabilities(), kOptions))
    EXPECT_FALSE(c.paged) << c.name;
}

// A decoder whose copy of a table holds 256 entries reads keys past 4096 tokens through the wrong
// page: the 8192-token session fails it, the correct decoder passes, and at 4096 (what the
// block-table properties reach) the two agree.
TEST(PagedSessions, FailATableCopyOf256EntriesPast4096Tokens) {
  const auto correct = make_quantized_decode_kernel(Scalar::kQ8);
  const auto capped = make_faulty_quantized_decode_kernel(Scalar::kQ8, {.paged_table_of_256 = true}, "table_of_256");
  const std::vector<SizedCase> cases = long_cases(correct->capabilities(), kOptions);
  const Verdict good = check_sized_case(paged_case(cases, 8192), *correct, kOptions.jobs);
  EXPECT_TRUE(good.passed && good.exercised) << good.detail;
  const Verdict short_enough = check_sized_case(paged_case(cases, 4096), *capped, kOptions.jobs);
  EXPECT_TRUE(short_enough.passed) << short_enough.detail;
  const Verdict bad = check_sized_case(paged_case(cases, 8192), *capped, kOptions.jobs);
  EXPECT_FALSE(bad.passed);
  EXPECT_NE(bad.detail.find("paged decode in"), std::string::npos) << bad.detail;
}

}  // namespace
}  // namespace attest
