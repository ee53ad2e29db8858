#include "retained_session.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <set>

#include "attest/properties/compare.h"
#include "attest/reference/reference.h"
#include "problem_edits.h"

namespace attest {

Verdict retained_session_matches(const Problem& prefill, const std::vector<int>& chunks, const std::vector<int>& rows,
                                 const Kernel& kernel, int jobs, double* kernel_seconds) {
  const std::string name = "matches_reference";
  const Capabilities caps = kernel.capabilities();
  const CachePolicy& policy = caps.cache;
  const Shape& s = prefill.shape;
  const int T = s.k_len;
  const bool explicit_policy = policy.kind == CachePolicy::Kind::kExplicit;
  const std::set<int> wanted(rows.begin(), rows.end());
  // An explicit cache's reported positions, for the compared rows only (a long session's whole
  // report would hold T x capacity positions).
  std::map<std::pair<int, int>, std::vector<long long>> reported;  // (batch, position) -> kept
  std::string malformed;
  AfterStep record;
  if (explicit_policy)
    record = [&](const DecodeSession& session, int t0, int n) {
      for (int t = 0; t < n; ++t) {
        if (!wanted.contains(t0 + t)) continue;
        for (int b = 0; b < s.batch; ++b) {
          std::vector<long long> kept = session.retained_positions(b, t);
          for (std::size_t e = 0; e < kept.size() && malformed.empty(); ++e)
            if (kept[e] < 0 || kept[e] > t0 + t || (e > 0 && kept[e] <= kept[e - 1]))
              malformed = fmt::format(
                  "batch {} query at position {}: reported retained position {} (positions must "
                  "ascend, each in [0, {}])",
                  b, t0 + t, kept[e], t0 + t);
          reported[{b, t0 + t}] = std::move(kept);
        }
      }
    };
  const auto start = std::chrono::steady_clock::now();
  const Outputs decoded = run_decode(kernel, prefill, chunks, caps.lse(), record);
  if (kernel_seconds) *kernel_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const std::string where = fmt::format("decode of {} tokens in {} steps ({})", T, chunks.size(), policy.summary());
  if (!malformed.empty()) return Verdict::fail(name, fmt::format("{}: {}", where, malformed), INFINITY);
  double worst = 0;
  bool any = false;
  for (int pos : rows) {
    // The query at `pos` alone, every key, visible where its mask and the retained set agree.
    Problem row = single_query(prefill, pos);
    std::vector<std::uint8_t> keep(std::size_t(s.batch) * T, 0);
    for (int b = 0; b < s.batch; ++b)
      if (explicit_policy) {
        for (long long j : reported[{b, pos}]) keep[std::size_t(b) * T + j] = 1;
      } else {
        for (int j = 0; j <= pos; ++j) keep[std::size_t(b) * T + j] = policy.retains(j, pos) ? 1 : 0;
      }
    if (row.mask.explicit_mask.empty()) row.mask.explicit_mask.assign(keep.size(), 1);
    for (std::size_t e = 0; e < keep.size(); ++e) row.mask.explicit_mask[e] = row.mask.explicit_mask[e] && keep[e];
    Outputs got;
    for (int bh = 0; bh < s.batch * s.heads; ++bh) {
      const std::size_t r = std::size_t(bh) * T + pos;
      got.o.insert(got.o.end(), decoded.o.begin() + r * s.value_dim, decoded.o.begin() + (r + 1) * s.value_dim);
      if (!decoded.lse.empty()) got.lse.push_back(decoded.lse[r]);
    }
    Comparison c = compare_with_reference(row, compute_reference_fast(row, {.jobs = jobs}), got, caps, name);
    if (!c.verdict.passed) {
      c.verdict.detail = fmt::format("{}, the query at position {}: {}", where, pos, c.verdict.detail);
      return c.verdict;
    }
    if (c.verdict.exercised && c.verdict.applicable) any = true, worst = std::max(worst, c.verdict.utilisation);
  }
  if (!any) return Verdict::vacuous(name, "no compared step exercised anything");
  return Verdict::pass(name, worst);
}

}  // namespace attest
