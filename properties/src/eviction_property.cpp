// eviction_matches_retained_set (docs/design.md#serving-caches): a decoder that declares which cached positions it
// keeps is held, past its first eviction, to exact attention over those positions.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <set>

#include "attest/properties/compare.h"
#include "attest/properties/properties.h"
#include "problem_edits.h"

namespace attest {
namespace {

// A case decodes past the policy's first eviction by up to kPastEviction tokens, or (every other
// case) to 4x the cache's capacity or 256 past it, whichever is longer: a bug that starts later
// than the first turnover. The rows compared: the last ones, where the cache has
// turned over (all of them up to this many).
constexpr int kPastEviction = 64, kLongPastEviction = 256, kComparedRows = 128;
// A cache keeping more than this many positions is held to one (batch, head) slice: the decode
// of capacity + 64 tokens in every slice of a drawn shape would cost minutes. An explicit cache
// (no declared capacity) is decoded past this many tokens at least, so that it has evicted.
constexpr long long kSliceAbove = 256, kExplicitLength = 128;
// Past this many tokens a case is not run (a window of millions would decode for hours).
constexpr long long kLongestDecode = 1 << 16;

// Rows [first, T) of every [outer][T][width] block.
std::vector<float> tail_rows(const std::vector<float>& from, int outer, int total, int first, int width) {
  std::vector<float> out;
  for (int o = 0; o < outer; ++o) {
    const auto start = from.begin() + (std::size_t(o) * total + first) * width;
    out.insert(out.end(), start, start + std::size_t(total - first) * width);
  }
  return out;
}

// Retained positions of each (batch, query position): the declared rule's, or those the session
// reported; empty when the kernel reported none for it.
using Retained = std::vector<std::vector<std::vector<long long>>>;  // [B][T] -> positions

// The problem the compared rows answer: queries [first, T) of the prefill (bottom-right, so at
// their positions), every key, visible where the prefill's mask and the retained set agree.
Problem retained_problem(const Problem& prefill, int first, const CachePolicy& policy, const Retained& reported) {
  const Shape& s = prefill.shape;
  const int T = s.k_len, rows = T - first;
  Problem out = prefill;
  out.shape.q_len = rows;
  out.q = tail_rows(prefill.q, s.batch * s.heads, T, first, s.head_dim);
  const std::vector<std::uint8_t> visible = visibility_of(prefill);
  out.mask.explicit_mask.assign(std::size_t(s.batch) * rows * T, 0);
  for (int b = 0; b < s.batch; ++b)
    for (int i = 0; i < rows; ++i) {
      const long long pos = first + i;
      std::set<long long> kept;
      if (policy.kind == CachePolicy::Kind::kExplicit) kept.insert(reported[b][pos].begin(), reported[b][pos].end());
      for (int j = 0; j < T; ++j) {
        const bool retained = policy.kind == CachePolicy::Kind::kExplicit ? kept.count(j) > 0 : policy.retains(j, pos);
        out.mask.explicit_mask[(std::size_t(b) * rows + i) * T + j] =
            retained && visible[(std::size_t(b) * T + pos) * T + j];
      }
    }
  return out;
}

// What an explicit session reported for the step's queries, checked: ascending positions at or
// before the query's own. Empty when well formed, else why not.
std::string take_reported(const DecodeSession& session, int t0, int n, int batch, Retained& into) {
  for (int b = 0; b < batch; ++b)
    for (int t = 0; t < n; ++t) {
      std::vector<long long> kept = session.retained_positions(b, t);
      const long long pos = t0 + t;
      for (std::size_t e = 0; e < kept.size(); ++e)
        if (kept[e] < 0 || kept[e] > pos || (e > 0 && kept[e] <= kept[e - 1]))
          return fmt::format(
              "batch {} query at position {}: reported retained position {} (positions must ascend, "
              "each in [0, {}])",
              b, pos, kept[e], pos);
      into[b][pos] = std::move(kept);
    }
  return {};
}

}  // namespace

Verdict eviction_matches_retained_set(const Problem& p, const Kernel& kernel, Oracle& oracle) {
  const std::string name = "eviction_matches_retained_set";
  const Capabilities caps = kernel.capabilities();
  if (!caps.decode() || !caps.cache.evicts()) return Verdict::not_applicable(name, "no declared cache eviction");
  const CachePolicy& policy = caps.cache;
  const long long keep = policy.exact_up_to();
  const Problem source = keep > kSliceAbove ? single_slice(p, 0, 0) : p;
  std::mt19937_64 rng(seed_of(p, 11));
  const long long base = std::max<long long>(keep > 0 ? keep : kExplicitLength, source.shape.k_len);
  const long long longest =
      caps.contract.k_len.unlimited() ? kLongestDecode : std::min<long long>(caps.contract.k_len.max, kLongestDecode);
  if (base + kPastEviction > longest)
    return Verdict::not_applicable(name, fmt::format("decoding past the declared cache ({}) takes up to {} tokens; "
                                                     "the contract or attest's limit is {}",
                                                     policy.summary(), base + kPastEviction, longest));
  // 4x the capacity for a cache held in every slice; one slice of a large cache goes 256 past it.
  const long long far = keep <= kSliceAbove ? std::max<long long>(kLongPastEviction, 3 * base) : kLongPastEviction;
  const long long reach = std::min(far, longest - base);
  const int length = static_cast<int>(base + 1 + (rng() % 2 ? reach - 1 : rng() % kPastEviction));
  const Problem prefill = lengthened_prefill(decode_prefill_of(source), length, rng());
  const Shape& s = prefill.shape;
  const int first = std::max(0, length - kComparedRows);

  std::vector<int> by_token(length, 1), chunked;
  for (int left = length; left > 0;) {
    const int n = std::min(left, 1 + int(rng() % 40));
    chunked.push_back(n);
    left -= n;
  }
  double worst = 0;
  for (const std::vector<int>& chunks : {by_token, chunked}) {
    const std::string label = chunks.size() == std::size_t(length) ? "token-by-token decode" : "chunked decode";
    Retained reported(s.batch, std::vector<std::vector<long long>>(length));
    std::string malformed;
    AfterStep record;
    if (policy.kind == CachePolicy::Kind::kExplicit)
      record = [&](const DecodeSession& session, int t0, int n) {
        if (malformed.empty()) malformed = take_reported(session, t0, n, s.batch, reported);
      };
    const Outputs decoded = run_decode(kernel, prefill, chunks, caps.lse(), record);
    if (!malformed.empty()) return Verdict::fail(name, fmt::format("{}: {}", label, malformed), INFINITY);
    const Problem expected = retained_problem(prefill, first, policy, reported);
    Outputs compared;
    compared.o = tail_rows(decoded.o, s.batch * s.heads, length, first, s.value_dim);
    if (!decoded.lse.empty()) compared.lse = tail_rows(decoded.lse, s.batch * s.heads, length, first, 1);
    Comparison c = compare_with_reference(expected, oracle.reference(expected), compared, caps, name);
    if (!c.verdict.passed) {
      c.verdict.detail = fmt::format("{} of {} tokens ({}; rows from position {}): {}", label, length, policy.summary(),
                                     first, c.verdict.detail);
      return c.verdict;
    }
    worst = std::max(worst, c.verdict.utilisation);
  }
  return Verdict::pass(name, worst);
}

}  // namespace attest
