// The block-table properties (docs/design.md#serving-caches): a kernel that reads its cache through attest's
// page tables is held to exact attention whatever the physical order of the pages, whichever
// sequences share them, and however ragged the batch of one call.
#include <fmt/format.h>

#include <random>

#include "attest/properties/compare.h"
#include "attest/properties/properties.h"
#include "attest/properties/session_forward.h"
#include "page_pool.h"
#include "problem_edits.h"

namespace attest {
namespace {

constexpr int kLongestChunk = 24;
// One case in four decodes a long sequence: past kLongTokens tokens and kLongTableEntries table
// entries, at most kLongestSequence, where a kernel's copy of a table, its page arithmetic or its
// positions break and no drawn problem reaches.
constexpr int kLongTokens = 1024, kLongTableEntries = 64, kLongestSequence = 4096;

// Why the block-table properties do not apply to the kernel, or empty. `batches`: the batch sizes
// the property's calls use (a drawn single sequence is joined by a second; a sequence alone is B = 1).
std::string not_paged(const Capabilities& caps, const Problem& p, std::initializer_list<int> batches) {
  if (!caps.decode() || caps.page_tokens < 1) return "the kernel declares no block-table cache";
  if (!exact_session(caps, p.shape.k_len))
    return fmt::format("Tk {} is past what the declared cache ({}) keeps", p.shape.k_len, caps.cache.summary());
  for (int b : batches)
    if (!caps.contract.batch.contains(b))
      return fmt::format("its calls take B = {}; the contract's batch is {}..{}", b, caps.contract.batch.min,
                         caps.contract.batch.max);
  return {};
}

// The causal prefill a case decodes: p's, or in one case of four (drawn from `rng`) a long one,
// grown past a 64-entry table. A long case is one (batch, head) slice of p, so that its exact
// reference and its pool stay small: only where the contract takes one sequence, two and a single
// head, and no declared ALiBi slope set ties the slopes to the head count.
Problem paged_prefill(const Problem& p, const Capabilities& caps, std::mt19937_64& rng) {
  const Problem prefill = decode_prefill_of(p);
  if (rng() % 4 != 0) return prefill;
  const long long pages = std::max(caps.page_tokens, 1);
  long long length =
      std::max<long long>(kLongTokens, kLongTableEntries * pages) + 1 + static_cast<long long>(rng() % (4 * pages));
  length = std::min<long long>(length, kLongestSequence);
  if (!caps.contract.k_len.unlimited()) length = std::min<long long>(length, caps.contract.k_len.max);
  if (length <= p.shape.k_len || !exact_session(caps, length)) return prefill;
  const Contract& c = caps.contract;
  const bool slopes_tied = !p.modifiers.alibi_slopes.empty() && c.alibi_slopes != AlibiSlopes::kArbitrary;
  if (!c.batch.contains(1) || !c.batch.contains(2) || !c.heads.contains(1) || slopes_tied) return prefill;
  return lengthened_prefill(single_slice(prefill, 0, 0), static_cast<int>(length), rng());
}

// A passing verdict that names the size the check decoded (a long case: past the drawn one).
Verdict ran(Verdict v, const Problem& prefill) {
  v.ran_q_len = prefill.shape.q_len, v.ran_k_len = prefill.shape.k_len;
  return v;
}

// Rows [outer][T][width] of sequence b (outer = B x per).
std::vector<float> sequence_rows(const std::vector<float>& from, int b, int per, int T, int width) {
  const std::size_t n = std::size_t(per) * T * width;
  return {from.begin() + b * n, from.begin() + (b + 1) * n};
}

// Sequence b of the prefill alone (B = 1).
Problem sequence_of(const Problem& prefill, int b) {
  const Shape& s = prefill.shape;
  Problem out = prefill;
  out.shape.batch = 1;
  out.q = sequence_rows(prefill.q, b, s.heads, s.k_len, s.head_dim);
  out.k = sequence_rows(prefill.k, b, s.kv_heads, s.k_len, s.head_dim);
  out.v = sequence_rows(prefill.v, b, s.kv_heads, s.k_len, s.value_dim);
  return out;
}

// The prefill with at least two sequences: a single one is joined by its own tokens in an order
// drawn from `seed` (the same values, so the same q8_head scales, and another sequence).
Problem with_two_sequences(const Problem& prefill, std::uint64_t seed) {
  if (prefill.shape.batch >= 2) return prefill;
  const Shape& s = prefill.shape;
  const std::vector<int> order = shuffled(s.k_len, seed);
  Problem out = prefill;
  out.shape.batch = 2;
  auto append = [&](std::vector<float>& into, int outer, int width) {
    const std::vector<float> moved = permute_rows(into, outer, order, width);
    into.insert(into.end(), moved.begin(), moved.end());
  };
  append(out.q, s.heads, s.head_dim);
  append(out.k, s.kv_heads, s.head_dim);
  append(out.v, s.kv_heads, s.value_dim);
  return out;
}

// Calls that take each sequence from `done` to T tokens, at different paces: each call appends 0
// to kLongestChunk tokens per sequence (at least one sequence appends), now and then all the rest at
// once (a prompt's prefill through the tables), and sequences past the first start a few calls late,
// so one call's sequences have different lengths.
std::vector<PagedCall> ragged_calls(std::vector<long long> done, int T, std::mt19937_64& rng) {
  const int batch = static_cast<int>(done.size());
  std::vector<int> start(batch, 0);
  for (int b = 1; b < batch; ++b) start[b] = static_cast<int>(rng() % 4);
  std::vector<PagedCall> calls;
  for (int call = 0;; ++call) {
    std::vector<int> counts(batch, 0);
    bool any = false, left = false;
    // A third of the calls are the serving step: every started sequence adds one token, each at its
    // own length (the staggered starts make them differ). Drawn count by count, it came about once
    // in a thousand calls, and a kernel cutting every sequence at the longest length went unseen.
    const bool one_token_step = rng() % 3 == 0;
    for (int b = 0; b < batch; ++b) {
      const long long remaining = T - done[b];
      left = left || remaining > 0;
      if (remaining == 0 || call < start[b]) continue;
      if (one_token_step) {
        counts[b] = 1, any = true;
        continue;
      }
      if (rng() % 4 == 0) continue;
      counts[b] =
          static_cast<int>(rng() % 8 == 0 ? remaining : std::min<long long>(remaining, 1 + rng() % kLongestChunk));
      any = true;
    }
    if (!left) return calls;
    for (int b = 0; !any && b < batch; ++b)
      if (done[b] < T)
        counts[b] = static_cast<int>(std::min<long long>(T - done[b], 1 + rng() % kLongestChunk)), any = true;
    for (int b = 0; b < batch; ++b) done[b] += counts[b];
    calls.push_back({.counts = counts});
  }
}

// Runs the calls; a contract breach fails the property, else the outputs meet the exact result.
struct Checked {
  Outputs out;
  std::optional<Verdict> failed;
};
Checked checked_run(const Kernel& kernel, const Problem& prefill, const Reference& ref,
                    const std::vector<PagedCall>& calls, std::uint64_t pool_seed, const std::string& name,
                    const std::string& label, double& worst) {
  const Capabilities caps = kernel.capabilities();
  Checked run;
  std::string broken;
  run.out = run_paged(kernel, prefill, calls, caps.lse(), pool_seed, broken);
  if (!broken.empty()) {
    run.failed = Verdict::fail(name, fmt::format("{} ({} calls): {}", label, calls.size(), broken), INFINITY);
    return run;
  }
  Comparison c = compare_with_reference(prefill, ref, run.out, caps, name);
  if (!c.verdict.passed) {
    c.verdict.detail = fmt::format("{} ({} calls) vs exact: {}", label, calls.size(), c.verdict.detail);
    run.failed = c.verdict;
  }
  worst = std::max(worst, c.verdict.utilisation);
  return run;
}

}  // namespace

Verdict ragged_batch_equals_single(const Problem& p, const Kernel& kernel, Oracle& oracle) {
  const std::string name = "ragged_batch_equals_single";
  const Capabilities caps = kernel.capabilities();
  if (const std::string why = not_paged(caps, p, {std::max(p.shape.batch, 2), 1}); !why.empty())
    return Verdict::not_applicable(name, why);
  std::mt19937_64 rng(seed_of(p, 13));
  const Problem prefill = with_two_sequences(paged_prefill(p, caps, rng), rng());
  const Shape& s = prefill.shape;
  const Reference& ref = oracle.reference(prefill);
  const std::vector<PagedCall> calls = ragged_calls(std::vector<long long>(s.batch, 0), s.k_len, rng);
  double worst = 0;
  const Checked batched = checked_run(kernel, prefill, ref, calls, 0, name, "ragged batch", worst);
  if (batched.failed) return *batched.failed;

  // Each sequence alone, in the same calls (those where it appends).
  Outputs alone;
  alone.o.assign(prefill.o_size(), NAN);
  if (caps.lse()) alone.lse.assign(prefill.lse_size(), NAN);
  for (int b = 0; b < s.batch; ++b) {
    std::vector<PagedCall> own;
    for (const PagedCall& call : calls)
      if (call.counts[b] > 0) own.push_back({.counts = {call.counts[b]}});
    std::string broken;
    const Outputs single = run_paged(kernel, sequence_of(prefill, b), own, caps.lse(), 0, broken);
    if (!broken.empty()) return Verdict::fail(name, fmt::format("sequence {} alone: {}", b, broken), INFINITY);
    std::copy(single.o.begin(), single.o.end(), alone.o.begin() + b * single.o.size());
    if (caps.lse()) std::copy(single.lse.begin(), single.lse.end(), alone.lse.begin() + b * single.lse.size());
  }
  const Verdict v = compare_runs(
      prefill, ref, alone, batched.out, caps, name,
      fmt::format("ragged batch of {} sequences ({} calls) vs each sequence alone:", s.batch, calls.size()));
  if (!v.passed) return v;
  return ran(Verdict::pass(name, std::max(worst, v.utilisation)), prefill);
}

Verdict page_order_invariance(const Problem& p, const Kernel& kernel, Oracle& oracle) {
  const std::string name = "page_order_invariance";
  const Capabilities caps = kernel.capabilities();
  if (const std::string why = not_paged(caps, p, {p.shape.batch}); !why.empty())
    return Verdict::not_applicable(name, why);
  std::mt19937_64 rng(seed_of(p, 14));
  const Problem prefill = paged_prefill(p, caps, rng);
  const Reference& ref = oracle.reference(prefill);
  const std::vector<PagedCall> calls =
      ragged_calls(std::vector<long long>(prefill.shape.batch, 0), prefill.shape.k_len, rng);
  // Pages handed out in a drawn order, and all of them moved again before a drawn call.
  std::vector<PagedCall> moved = calls;
  moved[rng() % moved.size()].permute_before = true;
  double worst = 0;
  const Checked in_order = checked_run(kernel, prefill, ref, calls, 0, name, "pages in order", worst);
  if (in_order.failed) return *in_order.failed;
  const Checked permuted = checked_run(kernel, prefill, ref, moved, rng() | 1, name, "pages permuted", worst);
  if (permuted.failed) return *permuted.failed;
  const Verdict v = compare_runs(prefill, ref, in_order.out, permuted.out, caps, name,
                                 fmt::format("pages permuted vs in order ({} calls):", calls.size()));
  if (!v.passed) return v;
  return ran(Verdict::pass(name, std::max(worst, v.utilisation)), prefill);
}

Verdict shared_prefix_equals_private(const Problem& p, const Kernel& kernel, Oracle& oracle) {
  const std::string name = "shared_prefix_equals_private";
  const Capabilities caps = kernel.capabilities();
  if (const std::string why = not_paged(caps, p, {std::max(p.shape.batch, 2)}); !why.empty())
    return Verdict::not_applicable(name, why);
  if (p.storage.k == Scalar::kQ8Head || p.storage.v == Scalar::kQ8Head)
    return Verdict::not_applicable(name, "q8_head scales are a sequence's own: its pages are not shared");
  if (p.shape.k_len < 2) return Verdict::not_applicable(name, "Tk 1: no prefix to share");
  std::mt19937_64 rng(seed_of(p, 15));
  Problem shared = with_two_sequences(paged_prefill(p, caps, rng), rng());
  const Shape& s = shared.shape;
  const int T = s.k_len, prefix = 1 + static_cast<int>(rng() % (T - 1));
  // Every sequence's first `prefix` tokens are sequence 0's.
  auto copy_prefix = [&](std::vector<float>& x, int per, int width) {
    const std::size_t block = std::size_t(T) * width, n = std::size_t(prefix) * width;
    for (int b = 1; b < s.batch; ++b)
      for (int i = 0; i < per; ++i) std::copy_n(x.begin() + i * block, n, x.begin() + (b * per + i) * block);
  };
  copy_prefix(shared.q, s.heads, s.head_dim);
  copy_prefix(shared.k, s.kv_heads, s.head_dim);
  copy_prefix(shared.v, s.kv_heads, s.value_dim);
  const Reference& ref = oracle.reference(shared);

  // Sequence 0 decodes the prefix; the others take its pages, then all go on at their own pace.
  std::vector<PagedCall> calls;
  for (int done = 0; done < prefix;) {
    std::vector<int> counts(s.batch, 0);
    counts[0] = std::min(prefix - done, 1 + static_cast<int>(rng() % kLongestChunk));
    done += counts[0];
    calls.push_back({.counts = counts});
  }
  std::vector<PagedCall> after = ragged_calls(std::vector<long long>(s.batch, prefix), T, rng);
  for (int b = 1; b < s.batch; ++b) after.front().share_from_zero.push_back(b);
  calls.insert(calls.end(), after.begin(), after.end());

  double worst = 0;
  const std::string label = fmt::format("{} sequences sharing a {}-token prefix", s.batch, prefix);
  std::string broken;
  Outputs with_shared = run_paged(kernel, shared, calls, caps.lse(), rng() | 1, broken);
  if (!broken.empty()) return Verdict::fail(name, fmt::format("{}: {}", label, broken), INFINITY);
  // The sharers never decoded the prefix: its rows are sequence 0's (the same queries and keys).
  for (int b = 1; b < s.batch; ++b)
    for (int h = 0; h < s.heads; ++h) {
      const std::size_t from = std::size_t(h) * T, to = (std::size_t(b) * s.heads + h) * T;
      std::copy_n(&with_shared.o[from * s.value_dim], std::size_t(prefix) * s.value_dim,
                  &with_shared.o[to * s.value_dim]);
      if (caps.lse()) std::copy_n(&with_shared.lse[from], prefix, &with_shared.lse[to]);
    }
  Comparison c = compare_with_reference(shared, ref, with_shared, caps, name);
  if (!c.verdict.passed) {
    c.verdict.detail = fmt::format("{} vs exact: {}", label, c.verdict.detail);
    return c.verdict;
  }
  worst = c.verdict.utilisation;
  const Checked copies = checked_run(kernel, shared, ref, ragged_calls(std::vector<long long>(s.batch, 0), T, rng), 0,
                                     name, "private copies", worst);
  if (copies.failed) return *copies.failed;
  const Verdict v = compare_runs(shared, ref, copies.out, with_shared, caps, name, label + " vs private copies:");
  if (!v.passed) return v;
  return ran(Verdict::pass(name, std::max(worst, v.utilisation)), shared);
}

}  // namespace attest
