// The packed varlen layout (Capabilities::packed): packed_equals_padded runs a padded batch packed
// and compares it with the exact reference sequence by sequence; sequences_do_not_interact edits
// one sequence of a packed call and requires every other sequence's outputs unchanged.
#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "attest/kernels/packed.h"
#include "attest/kernels/unwritten.h"
#include "attest/properties/compare.h"
#include "attest/properties/harness.h"
#include "attest/properties/properties.h"
#include "problem_edits.h"

namespace attest {
namespace {

// Lengths of each sequence (queries or keys) of at most `longest`, drawn as the varlen layout's
// edges: empty sequences among others, a single sequence, many short ones, one long one beside
// short ones, and totals at a tile's edge (a multiple of `tile`, or one off).
std::vector<int> drawn_lengths(int sequences, int longest, int tile, std::uint64_t pattern, std::mt19937_64& rng) {
  auto upto = [&](int n) { return static_cast<int>(rng() % static_cast<std::uint64_t>(n + 1)); };
  std::vector<int> n(static_cast<std::size_t>(sequences));
  const int one = static_cast<int>(rng() % static_cast<std::uint64_t>(sequences));
  for (int b = 0; b < sequences; ++b) {
    switch (pattern) {
      case 0:
        n[b] = rng() % 3 == 0 ? 0 : upto(longest);
        break;  // empty ones among others
      case 1:
        n[b] = b == one ? std::max(1, upto(longest)) : 0;
        break;  // a single sequence
      case 2:
        n[b] = std::min(longest, upto(3));
        break;  // many short ones
      case 3:
        n[b] = b == one ? longest : std::min(longest, 1 + upto(1));
        break;  // one long beside short
      default:
        n[b] = upto(longest);
    }
  }
  if (pattern == 4) {  // the total at a tile's edge: the last sequences give or take tokens
    long long total = 0;
    for (int x : n) total += x;
    const long long target = std::max<long long>(0, (total / tile) * tile + static_cast<long long>(rng() % 3) - 1);
    for (int b = sequences - 1; b >= 0 && total != target; --b) {
      const long long want = std::clamp<long long>(n[b] + target - total, 0, longest);
      total += want - n[b], n[b] = static_cast<int>(want);
    }
  }
  return n;
}

const char* pattern_name(std::uint64_t pattern) {
  static const char* const names[] = {"empty sequences", "a single sequence", "many short sequences",
                                      "one long beside short ones", "total at a tile edge"};
  return names[pattern];
}

// A batch of one as two sequences: the second a copy of the first with V negated (exact).
Problem two_sequences(const Problem& p) {
  Problem out = p;
  out.shape.batch = 2;
  out.q.insert(out.q.end(), p.q.begin(), p.q.end());
  out.k.insert(out.k.end(), p.k.begin(), p.k.end());
  for (float x : p.v) out.v.push_back(-x);
  return out;
}

// The case as a padded batch with drawn sequence lengths (kv_valid, q_valid), without the terms a
// packed call cannot carry (segments, an explicit mask, a bias), and with `neighbours` two
// sequences at least; `why` says why there is none.
std::optional<Problem> padded_case(const Problem& given, const Capabilities& caps, bool neighbours,
                                   std::mt19937_64& rng, std::string& drawn, std::string& why) {
  if (!packed_storage(caps)) {
    why = "a packed call is float32; the kernel stores Q, K, V or O otherwise";
    return std::nullopt;
  }
  Problem p = given;
  p.mask.q_segment.clear(), p.mask.k_segment.clear(), p.mask.explicit_mask.clear();
  p.modifiers.bias.clear();
  if (neighbours && p.shape.batch == 1) p = two_sequences(p);  // a sequence with a neighbour to disturb
  if (why = packed_form_refused(p); !why.empty()) return std::nullopt;
  // Redrawn lengths and dropped terms make keys visible that the case masked: they must hold what a
  // visible key may (a poisoned masked key, NaN, inf or 1e30, would be the case's doing, not the kernel's).
  for (const std::vector<float>* buffer : {&p.q, &p.k, &p.v})
    if (std::any_of(buffer->begin(), buffer->end(), [](float x) { return !(std::fabs(x) < 1e20f); })) {
      why = "the case poisons masked keys, which a packed call of drawn lengths would make visible";
      return std::nullopt;
    }
  const Shape& s = p.shape;
  const int tile = caps.key_tile() > 0 ? caps.key_tile() : 16;
  const std::uint64_t pattern = rng() % 5;
  p.mask.kv_valid = drawn_lengths(s.batch, s.k_len, tile, pattern, rng);
  if (s.q_len == s.k_len && rng() % 2)  // self-attention: each sequence's queries are its keys
    p.mask.q_valid = p.mask.kv_valid;
  else
    p.mask.q_valid =
        drawn_lengths(s.batch, s.q_len, caps.contract.query_tile > 0 ? caps.contract.query_tile : 16, pattern, rng);
  drawn = fmt::format("{}: q lengths [{}], k lengths [{}]", pattern_name(pattern), fmt::join(p.mask.q_valid, ", "),
                      fmt::join(p.mask.kv_valid, ", "));
  return p;
}

// One packed call of the kernel, its outputs NaN-filled before; exceptions other than a kernel
// failure become `error`.
bool run_packed(const Kernel& kernel, const PackedCall& call, std::vector<float>& o, std::vector<float>& lse,
                std::string& error) {
  const float unwritten = std::bit_cast<float>(kUnwrittenF32Bits);
  o.assign(call.o_size(), unwritten);
  lse.assign(kernel.capabilities().lse() ? call.lse_size() : 0, unwritten);
  try {
    check_packed_call(call, o, lse);
    kernel.forward_packed(call, o, lse);
  } catch (const KernelFailure&) {
    throw;  // a crash, hang or fault: the driver's to report
  } catch (const std::exception& e) {
    error = e.what();
    return false;
  }
  return true;
}

// The first packed output the call never wrote, named by sequence, token and head; empty if none.
std::string unwritten_output(const PackedCall& call, const std::vector<float>& o) {
  const std::size_t heads = call.terms.shape.heads, dv = call.terms.shape.value_dim;
  for (std::size_t e = 0; e < o.size(); ++e) {
    if (!never_written(o[e])) continue;
    const std::size_t token = e / (heads * dv);
    const auto seq = std::upper_bound(call.cu_seqlens_q.begin(), call.cu_seqlens_q.end(), token) - 1;
    return fmt::format("sequence {} token {} head {} col {} never written", seq - call.cu_seqlens_q.begin(),
                       token - static_cast<std::size_t>(*seq), (e / dv) % heads, e % dv);
  }
  return {};
}

Outputs padded_outputs(const Problem& p, const PackedCall& call, const std::vector<float>& o,
                       const std::vector<float>& lse, const Capabilities& caps) {
  Outputs out;
  unpack_outputs(p, call, o, lse, caps.empty_rows == EmptyRowPolicy::kNan, out.o, out.lse);
  return out;
}

}  // namespace

Verdict packed_equals_padded(const Problem& given, const Kernel& kernel, Oracle& oracle) {
  constexpr const char* kName = "packed_equals_padded";
  const Capabilities caps = kernel.capabilities();
  if (!caps.packed) return Verdict::not_applicable(kName, "the kernel declares no packed layout");
  std::mt19937_64 rng(seed_of(given, 0x7061636b6564));
  std::string drawn, why;
  const std::optional<Problem> p = padded_case(given, caps, false, rng, drawn, why);
  if (!p) return Verdict::not_applicable(kName, why);
  const PackedCall call = packed_call_of(*p);
  std::vector<float> o, lse;
  if (!run_packed(kernel, call, o, lse, why)) return Verdict::fail(kName, fmt::format("packed call threw: {}", why));
  if (const std::string gap = unwritten_output(call, o); !gap.empty())
    return Verdict::fail(kName, fmt::format("{} ({})", gap, drawn));
  Verdict v =
      compare_with_reference(*p, oracle.reference(*p), padded_outputs(*p, call, o, lse, caps), caps, kName).verdict;
  if (!v.passed) v.detail += fmt::format(" ({})", drawn);
  return v;
}

Verdict sequences_do_not_interact(const Problem& given, const Kernel& kernel, Oracle& oracle) {
  constexpr const char* kName = "sequences_do_not_interact";
  const Capabilities caps = kernel.capabilities();
  if (!caps.packed) return Verdict::not_applicable(kName, "the kernel declares no packed layout");
  std::mt19937_64 rng(seed_of(given, 0x696e7465726163));
  std::string drawn, why;
  const std::optional<Problem> p = padded_case(given, caps, true, rng, drawn, why);
  if (!p) return Verdict::not_applicable(kName, why);
  const PackedCall call = packed_call_of(*p);
  // The edited sequence: one with keys, its Q negated, its K rows rotated by one token and its V
  // times -2 (exact in float32), so its own outputs change and no other's may.
  std::vector<int> with_keys;
  for (int b = 0; b < call.sequences(); ++b)
    if (call.cu_seqlens_k[b + 1] > call.cu_seqlens_k[b]) with_keys.push_back(b);
  if (with_keys.empty()) return Verdict::not_applicable(kName, "the drawn sequences have no keys");
  const int edited = with_keys[rng() % with_keys.size()];
  PackedCall other = call;
  const Shape& s = call.terms.shape;
  const std::size_t q_row = std::size_t(s.heads) * s.head_dim, k_row = std::size_t(s.kv_heads) * s.head_dim;
  for (std::size_t e = call.cu_seqlens_q[edited] * q_row; e < call.cu_seqlens_q[edited + 1] * q_row; ++e)
    other.q[e] = -other.q[e];
  std::rotate(other.k.begin() + static_cast<std::ptrdiff_t>(call.cu_seqlens_k[edited] * k_row),
              other.k.begin() + static_cast<std::ptrdiff_t>((call.cu_seqlens_k[edited] + 1) * k_row),
              other.k.begin() + static_cast<std::ptrdiff_t>(call.cu_seqlens_k[edited + 1] * k_row));
  const std::size_t v_row = std::size_t(s.kv_heads) * s.value_dim;
  for (std::size_t e = call.cu_seqlens_k[edited] * v_row; e < call.cu_seqlens_k[edited + 1] * v_row; ++e)
    other.v[e] *= -2.0f;

  std::vector<float> o, lse, o2, lse2;
  if (!run_packed(kernel, call, o, lse, why) || !run_packed(kernel, other, o2, lse2, why))
    return Verdict::fail(kName, fmt::format("packed call threw: {}", why));
  Outputs before = padded_outputs(*p, call, o, lse, caps), after = padded_outputs(*p, other, o2, lse2, caps);
  // The edited sequence's own rows are not judged here: they take the first run's values.
  const std::size_t per_batch = std::size_t(s.heads) * p->shape.q_len;
  std::copy_n(before.o.begin() + static_cast<std::ptrdiff_t>(edited * per_batch * s.value_dim), per_batch * s.value_dim,
              after.o.begin() + static_cast<std::ptrdiff_t>(edited * per_batch * s.value_dim));
  if (!before.lse.empty())
    std::copy_n(before.lse.begin() + static_cast<std::ptrdiff_t>(edited * per_batch), per_batch,
                after.lse.begin() + static_cast<std::ptrdiff_t>(edited * per_batch));
  return compare_runs(*p, oracle.reference(*p), before, after, caps, kName,
                      fmt::format("sequence {} edited ({})", edited, drawn));
}

}  // namespace attest
