// Mask leakage and empty rows.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

#include "attest/properties/compare.h"
#include "attest/properties/harness.h"
#include "attest/properties/properties.h"
#include "problem_edits.h"

namespace attest {
namespace {

// The clean problem's results must survive poisoning the chosen keys' K rows, then their V rows,
// on every row that sees none of them (rows that see one are taken from a clean run instead).
// Not exercised when no key is chosen.
Verdict check_poisoned(const Problem& clean, const KeySet& keys, const Kernel& kernel, Oracle& oracle,
                       const std::string& label) {
  const Shape& s = clean.shape;
  const std::vector<std::uint8_t> visible = visibility_of(clean);
  std::vector<char> compared(std::size_t(s.batch) * s.q_len, 1);  // (b, i) sees no poisoned key
  bool all_compared = true;
  for (int b = 0; b < s.batch; ++b)
    for (int i = 0; i < s.q_len; ++i)
      for (int j = 0; j < s.k_len; ++j)
        if (keys[b][j] && visible[(std::size_t(b) * s.q_len + i) * s.k_len + j])
          compared[std::size_t(b) * s.q_len + i] = 0, all_compared = false;
  std::optional<GuardedOutputs> clean_run;
  if (!all_compared) clean_run = run_guarded(kernel, clean);
  Verdict result = Verdict::vacuous("", "");
  for (Poisoned which : {Poisoned::kKeys, Poisoned::kValues}) {
    Problem poisoned = clean;
    if (poison(poisoned, keys, which, kernel.capabilities()) == 0) return result;
    const Reference& ref = oracle.reference(clean);
    GuardedOutputs out = run_guarded(kernel, poisoned);
    if (clean_run)  // rows that may see a poisoned key are not this check's business
      for (int b = 0; b < s.batch; ++b)
        for (int h = 0; h < s.heads; ++h)
          for (int i = 0; i < s.q_len; ++i) {
            if (compared[std::size_t(b) * s.q_len + i]) continue;
            const std::size_t row = (std::size_t(b) * s.heads + h) * s.q_len + i;
            std::copy_n(&clean_run->o[row * s.value_dim], s.value_dim, &out.o[row * s.value_dim]);
            if (!out.lse.empty()) out.lse[row] = clean_run->lse[row];
          }
    Comparison cmp = compare_with_reference(clean, ref, out, kernel.capabilities(), "masked_inputs_have_no_influence");
    const char* what =
        which == Poisoned::kKeys ? "masked K rows poisoned (V clean)" : "masked V rows poisoned (K clean)";
    if (!cmp.verdict.passed) {
      cmp.verdict.detail = label + ", " + what + ": " + cmp.verdict.detail;
      return cmp.verdict;
    }
    result = Verdict::pass("", std::max(result.utilisation, cmp.verdict.utilisation));
  }
  return result;
}

}  // namespace

Verdict masked_inputs_have_no_influence(const Problem& p, const Kernel& kernel, Oracle& oracle) {
  const std::string name = "masked_inputs_have_no_influence";
  // Keys no row sees, over the whole problem; the keys one row may not see, compared on the rows
  // that see none of them (with bottom-right causality every key is seen by the last row, so this
  // is where causal kernels are tested); keys hidden by a -inf bias; and single rows, where causal
  // and window masks leave most keys unseen (first, last and middle rows).
  const std::vector<std::uint8_t> visible = visibility_of(p);
  Verdict v = check_poisoned(p, unseen_keys(p, visible), kernel, oracle, "keys unseen by every row");
  if (!v.passed) return v;
  double worst = v.utilisation;
  bool exercised = v.exercised;
  const int tq = p.shape.q_len;
  for (int i : {0, tq / 2}) {
    v = check_poisoned(p, keys_masked_for_row(p, visible, i), kernel, oracle,
                       fmt::format("keys masked for row {}, on the rows that see none of them", i));
    if (!v.passed) return v;
    worst = std::max(worst, v.utilisation);
    exercised = exercised || v.exercised;
  }
  if (kernel.capabilities().declares(Feature::kBias)) {
    // Keys hidden by a -inf bias alone, in every row and head (every third key from a seed-chosen
    // one): a kernel that adds the bias to a score it has already read lets a NaN K row through.
    Problem base = with_bias(p, false, false);
    kernel.capabilities().contract.fit_alibi_or_bias(base, true);
    const int first = static_cast<int>(seed_of(p, 11) % 3);
    Problem biased = base;
    biased.modifiers.bias = rebuilt_bias(base, p.shape, [&](int b, int h, int i, int j) {
      return j % 3 == first ? -INFINITY : base.modifiers.bias[base.modifiers.bias_index(p.shape, b, h, i, j)];
    });
    v = check_poisoned(biased, unseen_keys(biased, visibility_of(biased)), kernel, oracle,
                       "keys hidden by a -inf bias");
    if (!v.passed) return v;
    worst = std::max(worst, v.utilisation);
    exercised = exercised || v.exercised;
  }
  for (int i : {0, tq - 1, tq / 2, tq / 3}) {
    const std::optional<Problem> row = single_query_within(p, i, kernel.capabilities());
    if (!row) continue;
    v = check_poisoned(*row, unseen_keys(*row, visibility_of(*row)), kernel, oracle, fmt::format("row {} alone", i));
    if (!v.passed) return v;
    worst = std::max(worst, v.utilisation);
    exercised = exercised || v.exercised;
  }
  return exercised ? Verdict::pass(name, worst) : Verdict::vacuous(name, "no key is masked: nothing to poison");
}

Verdict empty_row_policy(const Problem& p, const Kernel& kernel, Oracle& oracle) {
  const std::string name = "empty_row_policy";
  const Capabilities caps = kernel.capabilities();
  const Problem variant = with_more_empty_rows(p, caps);
  const Reference& ref = oracle.reference(variant);
  // Rows empty in the variant follow the policy exactly; the others are unchanged.
  Comparison cmp = compare_with_reference(variant, ref, run_guarded(kernel, variant), caps, name);
  if (cmp.verdict.passed && std::find(ref.empty.begin(), ref.empty.end(), 1) == ref.empty.end())
    return Verdict::vacuous(name, "no row ended up empty");
  return cmp.verdict;
}

}  // namespace attest
