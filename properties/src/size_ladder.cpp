#include "attest/properties/size_ladder.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <optional>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "attest/kernels/builtin_kernels.h"
#include "attest/properties/cases.h"
#include "attest/properties/compare.h"
#include "attest/properties/declaration_fit.h"
#include "attest/properties/harness.h"
#include "attest/properties/precision_gate.h"
#include "attest/properties/session_forward.h"
#include "gradient_checks.h"
#include "page_pool.h"
#include "problem_edits.h"
#include "retained_session.h"
#include "sampled_gradient.h"

namespace attest {
namespace {

std::vector<int> widths(const SizeOptions& options) {
  return options.head_dims.empty() ? std::vector<int>{64} : options.head_dims;
}

// A problem of this shape with unit-variance data, seeded by its name.
Problem shaped(Shape s, const std::string& name) {
  Problem p;
  p.shape = s;
  p.resize_buffers();
  fill_random(p, std::hash<std::string>{}(name));
  return p;
}

// Geometric ALiBi slopes and small sinks: the decode shapes carry the modifiers a decoder keeps.
void add_decode_modifiers(Problem& p) {
  for (int h = 0; h < p.shape.heads; ++h) {
    p.modifiers.alibi_slopes.push_back(std::exp2(-8.0f * (h + 1) / p.shape.heads));
    p.modifiers.sinks.push_back(h % 2 ? 1.0f : -2.0f);
  }
}

// The case as the kernel declares it can take it; dropped (with nothing) when it cannot.
void add_case(std::vector<SizedCase>& out, const Capabilities& caps, std::string name, const Problem& p, bool sample,
              const SizeOptions& options, std::vector<int> chunks = {}, bool backward = false, bool retained = false,
              bool paged = false) {
  if (chunks.empty() && !caps.forward()) return;  // a decode-only kernel is held to its sessions
  // Sessions are exact causal attention only up to a declared cache's first eviction (past it,
  // eviction_matches_retained_set and the long stage's retained-set sessions hold them to what is kept).
  if (!chunks.empty() && !retained && !exact_session(caps, p.shape.k_len)) return;
  const std::optional<Problem> fitted = fit_to_declaration(p, caps);
  if (!fitted) return;
  // A contract that caps the lengths folds longer cases onto shorter ones: each shape once.
  const auto same = [&](const SizedCase& o) {
    const Shape &a = o.problem.shape, &b = fitted->shape;
    return std::tie(a.batch, a.heads, a.kv_heads, a.q_len, a.k_len, a.head_dim, a.value_dim) ==
               std::tie(b.batch, b.heads, b.kv_heads, b.q_len, b.k_len, b.head_dim, b.value_dim) &&
           o.problem.mask.causal == fitted->mask.causal && o.problem.mask.window == fitted->mask.window &&
           o.problem.mask.kv_valid == fitted->mask.kv_valid && o.decode_chunks == chunks && o.backward == backward &&
           o.retained_set == retained && o.paged == paged;
  };
  if (std::any_of(out.begin(), out.end(), same)) return;
  SizedCase c{std::move(name), *fitted, {}, std::move(chunks), backward, retained, paged};
  if (sample) c.rows = sample_rows(c.problem, caps, options.sampled_rows, std::hash<std::string>{}(c.name));
  out.push_back(std::move(c));
}

// Tq = Tk = t causal with GQA 2:1 (or, past square_limit, with a window of 512 keys).
void add_square(std::vector<SizedCase>& out, const Capabilities& caps, int t, int d, bool sample,
                const SizeOptions& options) {
  const bool windowed = t > options.square_limit;
  if (windowed && !caps.declares(Feature::kWindow)) return;  // a full T^2 problem would be too slow
  const std::string name = fmt::format("{}_t{}_d{}", windowed ? "window" : "square", t, d);
  // GQA 2:1 while rows are cheap; past 256 one head (the reference's cost is rows x keys).
  Problem p = shaped({1, windowed || t > 256 ? 1 : 2, 1, t, t, d, d}, name);
  p.mask.causal = true;
  if (windowed) p.mask.window = 512;
  add_case(out, caps, name, p, sample, options);
}

// The backward at length t: Tq = Tk = t causal (GQA 2:1 up to 256) and Tq = t against a whole key
// tile and one key more, the second batch entry padded. Every gradient element is checked, so the
// ladder stops them at kBackwardLimit (an exact gradient of 512 x 577 takes about a second).
constexpr int kBackwardLimit = 512;
void add_backward(std::vector<SizedCase>& out, const Capabilities& caps, int t, int d, int key_step,
                  const SizeOptions& options) {
  if (!caps.backward() || t > kBackwardLimit) return;
  const std::string square = fmt::format("backward_square_t{}_d{}", t, d);
  Problem p = shaped({1, t > 256 ? 1 : 2, 1, t, t, d, d}, square);
  p.mask.causal = true;
  add_case(out, caps, square, p, false, options, {}, true);
  const std::string rect = fmt::format("backward_rect_t{}_d{}", t, d);
  Problem r = shaped({2, 1, 1, t, t + key_step + 1, d, d}, rect);
  r.mask.kv_valid = {t + key_step + 1, t};
  add_case(out, caps, rect, r, false, options, {}, true);
}

// The backward case on sampled rows, unless the declaration fits RoPE or ALiBi in: the sampled rows
// would lose their positions.
void add_sampled_backward_case(std::vector<SizedCase>& out, const Capabilities& caps, const std::string& name,
                               const Problem& p, const SizeOptions& options) {
  add_case(out, caps, name, p, true, options, {}, true);
  if (!out.empty() && out.back().name == name && !samples_backward(out.back().problem)) out.pop_back();
}

// The long stage's backward at length t, judged on sampled rows (sampled_gradient.h: dQ of those
// rows, dK and dV of every key): Tq = Tk = t causal (past square_limit with a window of 512 keys, as
// the forward's), and up to square_limit the ladder's rectangular problem (Tq = t against a whole key
// tile and one key more, no causality) with the second batch entry's keys padded to t.
void add_sampled_backward(std::vector<SizedCase>& out, const Capabilities& caps, int t, int d, int key_step,
                          const SizeOptions& options) {
  if (!caps.backward()) return;
  const bool windowed = t > options.square_limit;
  if (windowed && !caps.declares(Feature::kWindow)) return;  // a full T^2 backward would be too slow
  const std::string name = fmt::format("backward_{}_t{}_d{}", windowed ? "window" : "square", t, d);
  Problem p = shaped({1, 1, 1, t, t, d, d}, name);
  p.mask.causal = true;
  if (windowed) p.mask.window = 512;
  add_sampled_backward_case(out, caps, name, p, options);
  if (windowed) return;
  const std::string rect = fmt::format("backward_rect_t{}_d{}", t, d);
  Problem r = shaped({2, 1, 1, t, t + key_step + 1, d, d}, rect);
  r.mask.kv_valid = {t + key_step + 1, t};
  add_sampled_backward_case(out, caps, rect, r, options);
}

// A decode session through an evicting cache to t tokens, in steps of 1 to 40 tokens: judged on
// sampled steps (around the first eviction, the tile edges, the last ones, random ones) against
// exact attention over the retained set.
void add_retained_session(std::vector<SizedCase>& out, const Capabilities& caps, int t, int d,
                          const SizeOptions& options) {
  if (!caps.decode() || !caps.cache.evicts() || exact_session(caps, t)) return;
  const std::string name = fmt::format("eviction_session_t{}_d{}", t, d);
  Problem p = shaped({1, 2, 1, t, t, d, d}, name);
  p.mask.causal = true;
  // Softmax sinks, no ALiBi: its distance penalty would leave the cache's first positions no weight
  // at these lengths, and a cache that loses them would go unseen.
  for (int h = 0; h < p.shape.heads; ++h) p.modifiers.sinks.push_back(h % 2 ? 1.0f : -2.0f);
  std::mt19937_64 rng(std::hash<std::string>{}(name));
  std::vector<int> chunks;
  for (int left = t; left > 0;) chunks.push_back(std::min(left, 1 + int(rng() % 40))), left -= chunks.back();
  add_case(out, caps, name, p, true, options, chunks, false, true);
  if (out.empty() || out.back().name != name) return;
  std::vector<int>& rows = out.back().rows;
  const int n = out.back().problem.shape.k_len;
  if (rows.empty())
    for (int i = 0; i < n; ++i) rows.push_back(i);
  for (long long turn = caps.cache.exact_up_to(), i = turn - 1; i <= turn + 1; ++i)
    if (i >= 0 && i < n) rows.push_back(static_cast<int>(i));
  for (int i = std::max(0, n - 4); i < n; ++i) rows.push_back(i);
  std::sort(rows.begin(), rows.end());
  rows.erase(std::unique(rows.begin(), rows.end()), rows.end());
}

// A decode session of t tokens through the kernel's block tables, in about 64 calls of drawn sizes
// (each call moves the whole pool), the last few one token each: judged on sampled steps (tile and
// page edges, the rows where the table passes 2^k entries, the last ones, random ones) against exact
// causal attention. Where a kernel's copy of a table, its page arithmetic or its positions break
// past the block-table properties' 4096 tokens. Every token attends to all before it (T^2 / 2
// work, like a square problem): up to square_limit, as the square cases (8192 tokens at default take
// a q8 decoder about 5 s; 32768 would take 16 times that).
void add_paged_session(std::vector<SizedCase>& out, const Capabilities& caps, int t, int d,
                       const SizeOptions& options) {
  if (!caps.decode() || caps.page_tokens < 1) return;
  const std::string name = fmt::format("paged_session_t{}_d{}", t, d);
  Problem p = shaped({1, 2, 1, t, t, d, d}, name);
  p.mask.causal = true;
  // Softmax sinks, no ALiBi: its distance penalty would leave the first pages no weight at these lengths.
  for (int h = 0; h < p.shape.heads; ++h) p.modifiers.sinks.push_back(h % 2 ? 1.0f : -2.0f);
  const std::optional<Problem> fitted = fit_to_declaration(p, caps);
  if (!fitted || !exact_session(caps, fitted->shape.k_len)) return;
  const int n = fitted->shape.k_len, singles = std::min(4, n - 1);
  std::mt19937_64 rng(std::hash<std::string>{}(name));
  std::vector<int> chunks;
  for (int left = n - singles; left > 0;)
    chunks.push_back(std::min(left, 1 + int(rng() % std::max(1, n / 32)))), left -= chunks.back();
  chunks.insert(chunks.end(), singles, 1);
  add_case(out, caps, name, p, true, options, chunks, false, false, true);
  if (out.empty() || out.back().name != name) return;
  std::vector<int>& rows = out.back().rows;
  if (rows.empty()) return;
  const long long page = caps.page_tokens;
  auto add = [&](long long i) {
    if (i >= 0 && i < n) rows.push_back(static_cast<int>(i));
  };
  for (long long entries = 1; entries * page < n; entries *= 2) add(entries * page - 1), add(entries * page);
  for (long long e = (n - 1) / page, k = 0; k < 3 && e > 0; ++k, --e) add(e * page - 1), add(e * page);
  for (int i = n - singles; i < n; ++i) add(i);
  std::sort(rows.begin(), rows.end());
  rows.erase(std::unique(rows.begin(), rows.end()), rows.end());
}

// One new token against t keys (a decoder's shape through forward), with padding and modifiers.
// A decode-shaped call: one query against t keys, two batch entries (the second padded), or one
// (a split-KV path for single long decode calls is often taken only then).
void add_decode_shape(std::vector<SizedCase>& out, const Capabilities& caps, int t, int d, const SizeOptions& options,
                      int batch = 2) {
  const std::string name = fmt::format("decode_shape{}_t{}_d{}", batch == 1 ? "_b1" : "", t, d);
  Problem p = shaped({batch, 4, 2, 1, t, d, d}, name);
  p.mask.causal = true;
  p.mask.kv_valid = batch == 1 ? std::vector<int>{t} : std::vector<int>{t, std::max(1, t - 3)};
  add_decode_modifiers(p);
  add_case(out, caps, name, p, false, options);
}

// A decode session: t - n tokens in one chunk, then n single tokens.
void add_session(std::vector<SizedCase>& out, const Capabilities& caps, int t, int d, bool sample,
                 const SizeOptions& options) {
  if (!caps.decode() || t < 2) return;
  const std::string name = fmt::format("session_t{}_d{}", t, d);
  Problem p = shaped({1, 2, 1, t, t, d, d}, name);
  p.mask.causal = true;
  add_decode_modifiers(p);
  const int singles = std::min(4, t - 1);
  std::vector<int> chunks = {t - singles};
  chunks.insert(chunks.end(), singles, 1);
  add_case(out, caps, name, p, sample, options, chunks);
  if (out.empty() || out.back().name != name) return;
  // The last tokens are the decode steps: always among the rows checked.
  std::vector<int>& rows = out.back().rows;
  if (rows.empty()) return;
  for (int i = t - singles; i < t; ++i) rows.push_back(i);
  std::sort(rows.begin(), rows.end());
  rows.erase(std::unique(rows.begin(), rows.end()), rows.end());
}

}  // namespace

std::vector<int> ladder_lengths(const Capabilities& caps, const SizeOptions& options) {
  std::set<int> lengths;
  if (!options.lengths.empty()) {
    lengths.insert(options.lengths.begin(), options.lengths.end());
  } else {
    std::vector<int> tiles = caps.key_tiles();  // the contract's and each declared path's
    tiles.push_back(caps.contract.query_tile);
    for (int tile : tiles)
      if (tile > 0)
        for (int k = 1; k <= 3; ++k)
          for (int delta = -1; delta <= 1; ++delta) lengths.insert(k * tile + delta);
    for (long long t = 1; t <= options.max_len; t *= 2) lengths.insert(static_cast<int>(t));
  }
  std::vector<int> out;
  for (int t : lengths)
    if (t >= 1 && t <= options.max_len) out.push_back(t);
  return out;
}

std::vector<SizedCase> ladder_cases(const Capabilities& caps, const SizeOptions& options) {
  std::vector<SizedCase> out;
  const int key_step = caps.contract.key_tile > 0 ? caps.contract.key_tile : 16;
  for (int d : widths(options))
    for (int t : ladder_lengths(caps, options)) {
      if (t > options.full_rows_limit) continue;
      add_square(out, caps, t, d, false, options);
      add_decode_shape(out, caps, t, d, options);
      add_decode_shape(out, caps, t, d, options, 1);
      // Tq < Tk, no causality: a whole key tile and one more key past the queries, with padding.
      const std::string name = fmt::format("rect_t{}_d{}", t, d);
      Problem rect = shaped({2, 1, 1, t, t + key_step + 1, d, d}, name);
      rect.mask.kv_valid = {t + key_step + 1, t};
      add_case(out, caps, name, rect, false, options);
      add_session(out, caps, t, d, false, options);
      add_backward(out, caps, t, d, key_step, options);
    }
  return out;
}

std::vector<SizedCase> long_cases(const Capabilities& caps, const SizeOptions& options) {
  std::vector<SizedCase> out;
  const std::vector<int> lengths = ladder_lengths(caps, options);
  const int key_step = caps.contract.key_tile > 0 ? caps.contract.key_tile : 16;
  const int query_tile = caps.contract.query_tile > 0 ? caps.contract.query_tile : 64;
  for (int d : widths(options)) {
    for (int t : lengths) {
      if (t <= options.full_rows_limit) continue;
      add_square(out, caps, t, d, true, options);
      add_decode_shape(out, caps, t, d, options);
      add_decode_shape(out, caps, t, d, options, 1);
      if (t <= options.square_limit) add_session(out, caps, t, d, true, options);
      add_sampled_backward(out, caps, t, d, key_step, options);
      add_retained_session(out, caps, t, d, options);
      if (t <= options.square_limit) add_paged_session(out, caps, t, d, options);
    }
    // Chunked prefill at the longest length: two query tiles and one row past them, every key
    // before them visible (bottom-right causal), the last few keys padded away.
    if (lengths.empty() || lengths.back() <= options.full_rows_limit) continue;
    const int t = lengths.back(), rows = std::min(t, 2 * query_tile + 1);
    const std::string name = fmt::format("chunked_prefill_t{}_d{}", t, d);
    Problem p = shaped({1, 1, 1, rows, t, d, d}, name);
    p.mask.causal = true;
    p.mask.kv_valid = {t - 5};
    add_case(out, caps, name, p, true, options);
  }
  return out;
}

namespace {

// The case's paged session; `broken`: the contract breach the pool saw, or empty.
Outputs run_paged_case(const SizedCase& c, const Kernel& kernel, std::string& broken) {
  std::vector<PagedCall> calls;
  for (int n : c.decode_chunks) calls.push_back({.counts = std::vector<int>(c.problem.shape.batch, n)});
  // Pages handed out in an order drawn from the case's name: a sequence's pages are not consecutive.
  return run_paged(kernel, c.problem, calls, kernel.capabilities().lse(), std::hash<std::string>{}(c.name) | 1, broken);
}

}  // namespace

Outputs run_sized_case(const SizedCase& c, const Kernel& kernel) {
  if (c.paged) {
    std::string broken;
    Outputs out = run_paged_case(c, kernel, broken);
    if (!broken.empty()) throw std::runtime_error(broken);
    return out;
  }
  if (c.backward) {  // the backward alone, on sampled rows (what the long stage times)
    std::vector<int> rows = c.rows.empty() ? sample_rows(c.problem, kernel.capabilities(), 64, 0) : c.rows;
    if (rows.empty())
      for (int i = 0; i < c.problem.shape.q_len; ++i) rows.push_back(i);
    run_sampled_backward(c.problem, sampled_backward(c.problem, rows, kernel.capabilities().empty_rows, 1), kernel);
    return {};
  }
  if (!c.decode_chunks.empty()) return run_decode(kernel, c.problem, c.decode_chunks, kernel.capabilities().lse());
  return run_guarded(kernel, c.problem);
}

std::vector<int> sample_rows(const Problem& p, const Capabilities& caps, int count, std::uint64_t seed) {
  const int tq = p.shape.q_len;
  if (tq <= count) return {};
  std::set<int> rows = {0, tq - 1};
  auto add = [&](long long i) {
    if (i >= 0 && i < tq) rows.insert(static_cast<int>(i));
  };
  // Both sides of the first three and last three query tile edges.
  if (const int qt = caps.contract.query_tile; qt > 0) {
    const int edges = (tq - 1) / qt;
    for (int k = 1; k <= edges; ++k)
      if (k <= 3 || k > edges - 3) add(k * qt - 1), add(k * qt);
  }
  // Rows whose last visible key (causal) sits at a key tile edge, near the start and the end.
  if (const int kt = caps.key_tile_for(p); kt > 0) {
    const long long offset = p.effective_q_offset();
    const long long first = (offset + kt - 1) / kt, last = (offset + tq - 1) / kt;
    for (long long m = std::max(1LL, first); m <= last; ++m)
      if (m < first + 3 || m > last - 3) add(m * kt - 1 - offset), add(m * kt - offset);
  }
  std::mt19937_64 rng(seed);
  while (static_cast<int>(rows.size()) < count) add(static_cast<long long>(rng() % tq));
  return {rows.begin(), rows.end()};
}

namespace {

// Where gate 1's bound is vacuous on every sampled element (a long row at low declared precision),
// gate 2 judges the case as it does in the property stage: the kernel's error against the model
// kernel's on the same rows. Without it such a case is never evidence and a correct 16-bit kernel
// stays INSUFFICIENT at long lengths by construction.
Verdict gate_two_on_rows(const SizedCase& c, const Reference& ref, const Outputs& out, const Capabilities& caps) {
  const Precision& declared = caps.precision_for(out.path);
  const Outputs model = run_model_rows(declared, c.problem, c.rows);
  const std::optional<GateErrors> errors = precision_gate_errors_of(c.problem, ref, out, model, declared);
  if (!errors) return Verdict::vacuous_bound("matches_reference", "bound vacuous and no non-empty row for gate 2");
  Verdict gate = precision_gate_verdict(*errors, declared);
  gate.property = "matches_reference";
  gate.detail = "bound vacuous; gate 2" + (gate.detail.empty() ? std::string() : ": " + gate.detail);
  return gate;
}

}  // namespace

Verdict check_sized_case(const SizedCase& c, const Kernel& kernel, int jobs, Oracle* oracle, double* kernel_seconds) {
  const Capabilities caps = kernel.capabilities();
  const Problem& p = c.problem;
  const auto start = std::chrono::steady_clock::now();
  if (c.backward && !c.rows.empty()) {
    Verdict v = sampled_backward_matches_reference(p, c.rows, kernel, jobs, kernel_seconds);
    if (!v.passed) v.detail = "backward: " + v.detail;
    return v;
  }
  if (c.retained_set) return retained_session_matches(p, c.decode_chunks, c.rows, kernel, jobs, kernel_seconds);
  if (c.backward) {
    Oracle own_oracle;
    own_oracle.set_jobs(jobs);
    Verdict v = backward_matches_reference(p, kernel, oracle ? *oracle : own_oracle, "matches_reference");
    if (kernel_seconds) *kernel_seconds = 0;  // the backward's time teaches the long stage nothing
    if (!v.passed) v.detail = "backward: " + v.detail;
    return v;
  }
  std::string broken;
  const Outputs out = c.paged ? run_paged_case(c, kernel, broken) : run_sized_case(c, kernel);
  if (!broken.empty())
    return Verdict::fail("matches_reference",
                         fmt::format("paged decode in {} calls: {}", c.decode_chunks.size(), broken), INFINITY);
  if (kernel_seconds) *kernel_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::optional<Reference> own;
  if (!oracle || !c.rows.empty()) own = compute_reference_fast(p, {.query_rows = c.rows, .jobs = jobs});
  const Reference& ref = own ? *own : oracle->reference(p);
  Comparison result = compare_with_reference(p, ref, out, caps);
  if (result.verdict.bound_vacuous) result.verdict = gate_two_on_rows(c, ref, out, caps);
  if (!result.verdict.passed && !c.decode_chunks.empty())
    result.verdict.detail = fmt::format("{} in {} {}: {}", c.paged ? "paged decode" : "decode", c.decode_chunks.size(),
                                        c.paged ? "calls" : "steps", result.verdict.detail);
  return result.verdict;
}

}  // namespace attest
