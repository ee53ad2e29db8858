// The oracle's cache is keyed by a fingerprint: any edit to a problem must change it, or a
// kernel would be compared with another problem's reference.
#include "attest/oracle.h"

#include <gtest/gtest.h>

#include <set>

#include "attest/cases.h"

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

}  // namespace
}  // namespace attest
