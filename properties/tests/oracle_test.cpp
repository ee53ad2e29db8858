// The oracle's cache is keyed by a fingerprint: any edit to a problem must change it, or a
// kernel would be compared with another problem's reference.
#include "attest/properties/oracle.h"

#include <gtest/gtest.h>

#include <set>

#include "attest/properties/cases.h"

namespace attest {
namespace {

TEST(Oracle, EveryEditChangesTheFingerprint) {
  const Problem base = benchmark_problem(5, 7, 3, true);
  std::vector<Problem> edits;
  for (std::size_t i = 0; i < base.q.size(); ++i) edits.push_back(base), edits.back().q[i] += 1e-3f;
  for (std::size_t i = 0; i < base.k.size(); ++i) edits.push_back(base), edits.back().k[i] = -edits.back().k[i];
  for (std::size_t i = 0; i < base.v.size(); ++i) edits.push_back(base), edits.back().v[i] = 0.0f;
  edits.push_back(base), edits.back().mask.causal = false;
  edits.push_back(base), edits.back().mask.window = 2;
  edits.push_back(base), edits.back().scale = 0.5;
  edits.push_back(base), edits.back().q_offset = 1;
  edits.push_back(base), edits.back().rope.enabled = true;
  edits.push_back(base), edits.back().mask.kv_valid = {6};
  std::set<std::uint64_t> seen = {fingerprint(base)};
  for (const Problem& p : edits) EXPECT_TRUE(seen.insert(fingerprint(p)).second);
}

TEST(Oracle, ComputesOncePerDistinctProblemWithinCapacity) {
  Oracle oracle(2);
  const Problem a = benchmark_problem(3, 3, 2, false), b = benchmark_problem(4, 4, 2, false);
  oracle.reference(a);
  oracle.reference(b);
  oracle.reference(a);
  EXPECT_EQ(oracle.computations(), 2u);
  oracle.reference(a, /*weights=*/true);  // a cached entry without weights does not serve
  EXPECT_EQ(oracle.computations(), 3u);
}

// A shared oracle past its byte budget keeps its kKeptEntries newest entries (a check holds
// references to its last few) and drops the older ones.
TEST(Oracle, PastItsByteBudgetKeepsOnlyTheNewestEntries) {
  Oracle oracle(1000, /*max_bytes=*/1);
  const int n = static_cast<int>(Oracle::kKeptEntries) + 4;
  for (int i = 1; i <= n; ++i) oracle.reference(benchmark_problem(i, 3, 2, false));
  oracle.reference(benchmark_problem(n, 3, 2, false));
  oracle.reference(benchmark_problem(5, 3, 2, false));  // the 16th newest: kept
  EXPECT_EQ(oracle.computations(), std::size_t(n));
  oracle.reference(benchmark_problem(1, 3, 2, false));  // the oldest: dropped
  EXPECT_EQ(oracle.computations(), std::size_t(n) + 1);
}

}  // namespace
}  // namespace attest
