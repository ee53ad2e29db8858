#include "fuzz_targets.h"

#include "attest/kernels/cost_model.h"
#include "attest/kernels/kernel.h"
#include "attest/mutants/mutants.h"
#include "attest/properties/compare.h"
#include "attest/properties/declaration_fit.h"
#include "attest/properties/harness.h"
#include "attest/properties/oracle.h"
#include "attest/properties/properties.h"
#include "attest/properties/size_ladder.h"
#include "attest/reference/reference.h"
#include "fuzz_input.h"

namespace attest::fuzz {
namespace {

std::vector<Verdict> check_mask_leak(const FuzzCase& c, const Kernel& kernel, Oracle& oracle) {
  return {masked_inputs_have_no_influence(c.problem, kernel, oracle), zero_masked_weight(c.problem, kernel, oracle)};
}

// An evicting cache is also decoded past its first eviction (the input's problem grown); a cache
// behind block tables through ragged batches, permuted and shared pages (layouts drawn from the input).
std::vector<Verdict> check_decode(const FuzzCase& c, const Kernel& kernel, Oracle& oracle) {
  std::vector<int> by_token(c.problem.shape.k_len, 1);
  std::vector<Verdict> verdicts{decode_matches_prefill_in_chunks(c.problem, kernel, oracle, {c.chunks, by_token})};
  const Capabilities caps = kernel.capabilities();
  if (caps.cache.evicts()) verdicts.push_back(eviction_matches_retained_set(c.problem, kernel, oracle));
  if (caps.page_tokens > 0)
    for (auto* property : {ragged_batch_equals_single, page_order_invariance, shared_prefix_equals_private})
      verdicts.push_back(property(c.problem, kernel, oracle));
  return verdicts;
}

// An input with more query rows than this (only extended inputs have them) is held to the exact
// reference on a sample of its rows, as certify's long stage does: both sides of the query tile
// edges, rows whose keys end at a key tile edge, the first, the last and random ones. The
// reference of every row would cost Tq x Tk exact dot products per input. Gate 2 (the precision
// gate) needs every row: shorter inputs only.
constexpr int kAllRowsUpTo = 64;
constexpr int kSampledRows = 24;

// The reference of a sample of rows for a long input; nullopt for a short one (every row checked).
std::optional<Reference> sampled_reference(const Problem& p, const Kernel& kernel) {
  if (p.shape.q_len <= kAllRowsUpTo) return std::nullopt;
  return compute_reference_fast(p, {.query_rows = sample_rows(p, kernel.capabilities(), kSampledRows, fingerprint(p))});
}

// matches_reference on the rows the reference holds.
Verdict matches_sampled_reference(const Problem& p, const Reference& ref, const Kernel& kernel) {
  return compare_with_reference(p, ref, run_guarded(kernel, p), kernel.capabilities()).verdict;
}

std::vector<Verdict> check_overflow(const FuzzCase& c, const Kernel& kernel, Oracle& oracle) {
  // Only where a float32 kernel can hold the intermediates and the exact result is finite.
  const auto vacuous = [] {
    return std::vector{Verdict::vacuous("matches_reference",
                                        "outside what a float32 kernel can hold, or the exact result is not finite")};
  };
  if (!within_float_range(c.problem)) return vacuous();
  if (const std::optional<Reference> sampled = sampled_reference(c.problem, kernel)) {
    if (!sampled->finite()) return vacuous();
    return {matches_sampled_reference(c.problem, *sampled, kernel)};
  }
  if (!oracle.reference(c.problem).finite()) return vacuous();
  return {matches_reference(c.problem, kernel, oracle)};
}

std::vector<Verdict> check_differential(const FuzzCase& c, const Kernel& kernel, Oracle& oracle) {
  if (const std::optional<Reference> sampled = sampled_reference(c.problem, kernel))
    return {matches_sampled_reference(c.problem, *sampled, kernel)};
  return {matches_reference(c.problem, kernel, oracle), precision_gate(c.problem, kernel, oracle)};
}

// The exact gradient costs every (query, key) pair in double-double: inputs past this dense work
// (multiply-adds, cost_model.h) exercise nothing rather than slow the fuzzer to a crawl.
constexpr double kMaxBackwardWork = 1 << 22;

std::vector<Verdict> check_backward(const FuzzCase& c, const Kernel& kernel, Oracle& oracle) {
  if (forward_work(c.problem) > kMaxBackwardWork)
    return {Verdict::vacuous("gradient_matches_reference", "too large for the exact gradient of every row")};
  return {gradient_matches_reference(c.problem, kernel, oracle), gradient_masked_keys_zero(c.problem, kernel, oracle),
          gradient_ds_rows_sum_to_zero(c.problem, kernel, oracle)};
}

// Chunk sizes summing to Tk again after the declaration changed Tk.
std::vector<int> chunks_for(std::vector<int> chunks, int k_len) {
  std::vector<int> out;
  int left = k_len;
  for (int n : chunks) {
    if (left == 0) break;
    out.push_back(std::min(n, left));
    left -= out.back();
  }
  if (left > 0) out.push_back(left);
  return out;
}

}  // namespace

const std::vector<TargetInfo>& target_table() {
  static const std::vector<TargetInfo> table = {
      {Target::kMaskLeak,
       "fuzz_mask_leak",
       Flavor::kMasks,
       {},
       "masked_value_times_zero",
       "every mask kind and combination, empty rows, masked K/V poisoned with NaN, +-inf, +-1e30",
       check_mask_leak},
      {Target::kOverflow,
       "fuzz_overflow",
       Flavor::kOverflow,
       {},
       "no_max_subtraction",
       "magnitudes 1e-40 to the float edge, specials, scales up to 1e20",
       check_overflow},
      {Target::kDecode,
       "fuzz_decode",
       Flavor::kDecode,
       {Feature::kDecode},
       "decode_skips_self",
       "chunked decode across page boundaries",
       check_decode},
      {Target::kDifferential,
       "fuzz_differential",
       Flavor::kGeneral,
       {},
       "drop_partial_tile",
       "anything, against the reference and the precision gate",
       check_differential},
      {Target::kBackward,
       "fuzz_backward",
       Flavor::kGeneral,
       {Feature::kBackward},
       "backward_masked_ds_kept",
       "the backward on anything: gradients against the exact one, masked keys' dK = dV = 0, rows of dS summing to 0",
       check_backward},
  };
  return table;
}

const TargetInfo& info(Target t) { return target_table()[static_cast<std::size_t>(t)]; }
Flavor flavor_of(Target t) { return info(t).flavor; }
const char* target_name(Target t) { return info(t).name; }

std::optional<Target> target_from_name(const std::string& name) {
  for (const TargetInfo& t : target_table())
    if (name == t.name) return t.target;
  return std::nullopt;
}

Kernels kernels_named(const std::string& name) {
  Kernels out;
  if (name.empty()) {
    for (const KernelEntry& e : kernel_registry()) out.push_back(e.make());
  } else {
    out.push_back(make_in_process_kernel(name));
  }
  return out;
}

Outcome evaluate_target(Target target, const std::uint8_t* data, std::size_t size, const Kernel& kernel,
                        Oracle& oracle) {
  const TargetInfo& t = info(target);
  const Capabilities caps = kernel.capabilities();
  if (const FeatureSet missing = t.required.minus(caps.features); !missing.empty())
    return {std::nullopt, false, "the kernel does not declare " + missing.joined()};
  if (!caps.forward() && !t.required.contains(Feature::kDecode))
    return {std::nullopt, false, "the kernel is decode-only (this target calls forward)"};
  FuzzCase c = decode_input(data, size, t.flavor, reach_of(caps));  // lengths and modifiers per the declaration
  // The input as the kernel's declaration can take it (identity for the built-in kernels).
  std::string why;
  std::optional<Problem> fitted = fit_to_declaration(c.problem, caps, &why);
  if (!fitted) return {std::nullopt, false, "outside the declaration: " + why};
  c.problem = std::move(*fitted);
  c.chunks = chunks_for(c.chunks, c.problem.shape.k_len);
  Outcome out;
  for (const Verdict& v : t.check(c, kernel, oracle)) {
    if (v.applicable && !v.passed) {
      out.violation = Violation{kernel.name(), v, c.problem};
      out.exercised = true;
      return out;
    }
    if (v.applicable && v.exercised)
      out.exercised = true;
    else if (out.skipped.empty())
      out.skipped = v.detail.empty() ? "exercised nothing" : v.detail;
  }
  if (out.exercised) out.skipped.clear();
  return out;
}

std::optional<Violation> run_target_on(Target target, const std::uint8_t* data, std::size_t size, const Kernel& kernel,
                                       Oracle& oracle) {
  return evaluate_target(target, data, size, kernel, oracle).violation;
}

std::optional<Violation> run_target(Target target, const std::uint8_t* data, std::size_t size, const Kernels& kernels,
                                    Oracle& oracle) {
  for (const auto& kernel : kernels)
    if (auto v = run_target_on(target, data, size, *kernel, oracle)) return v;
  return std::nullopt;
}

}  // namespace attest::fuzz
