// split_invariance: split-KV attention through the kernel itself. Its forward over each of a drawn
// number of contiguous key ranges (the other keys hidden by an explicit mask term) and its merge of
// those partial states equal its forward over every key, within the bound: a kernel serving merge
// may split its keys anywhere.
#include <fmt/format.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "attest/model/precision.h"
#include "attest/properties/compare.h"
#include "attest/properties/harness.h"
#include "attest/properties/properties.h"
#include "problem_edits.h"

namespace attest {
namespace {

constexpr const char* kSplitName = "split_invariance";

// Each key's split: `splits` (2 to 8, at most one per key) contiguous ranges, cut at distinct
// points drawn in [1, Tk).
std::vector<int> drawn_splits(int keys, std::mt19937_64& rng, int& splits) {
  splits = 2 + static_cast<int>(rng() % static_cast<std::uint64_t>(std::min(7, keys - 1)));
  std::vector<int> cuts;
  while (static_cast<int>(cuts.size()) < splits - 1) {
    const int cut = 1 + static_cast<int>(rng() % static_cast<std::uint64_t>(keys - 1));
    if (std::find(cuts.begin(), cuts.end(), cut) == cuts.end()) cuts.push_back(cut);
  }
  std::sort(cuts.begin(), cuts.end());
  std::vector<int> split(static_cast<std::size_t>(keys));
  std::size_t next = 0;
  for (int j = 0; j < keys; ++j) {
    while (next < cuts.size() && j >= cuts[next]) ++next;
    split[static_cast<std::size_t>(j)] = static_cast<int>(next);
  }
  return split;
}

}  // namespace

Verdict split_invariance(const Problem& given, const Kernel& kernel, Oracle& oracle) {
  const Capabilities caps = kernel.capabilities();
  const Scalar storage = caps.precision.o;
  if (storage != Scalar::kF32 && storage != Scalar::kBF16)
    return Verdict::not_applicable(kSplitName,
                                   fmt::format("O stored in {}: a merge takes f32 or bf16", to_string(storage)));
  Problem p = given;
  p.modifiers.sinks.clear();  // a sink joins the whole row's denominator once: no split owns it
  if (p.shape.k_len < 2) return Verdict::vacuous(kSplitName, "one key: nothing to split");
  if (!caps.supports(p)) return Verdict::not_applicable(kSplitName, "without sinks: " + caps.unsupported_because(p));
  std::mt19937_64 rng(seed_of(p, 0x73706c6974));
  int splits = 0;
  const std::vector<int> split = drawn_splits(p.shape.k_len, rng, splits);

  const Shape& s = p.shape;
  const std::size_t rows = static_cast<std::size_t>(s.batch) * s.heads * s.q_len;
  const std::size_t width = static_cast<std::size_t>(s.value_dim);
  const float nan = std::numeric_limits<float>::quiet_NaN(), minus_inf = -std::numeric_limits<float>::infinity();
  std::vector<float> part_o(static_cast<std::size_t>(splits) * rows * width), part_lse(splits * rows);
  for (int i = 0; i < splits; ++i) {
    const Problem part = only_keys_of_part(p, split, i);
    if (!caps.supports(part))
      return Verdict::not_applicable(kSplitName, "a split outside the declaration: " + caps.unsupported_because(part));
    const Reference& ref = oracle.reference(part);
    const GuardedOutputs out = run_guarded(kernel, part);
    // A row the split hides every key of is empty, whatever the kernel's policy wrote: LSE -inf and
    // an O the merge must not read.
    for (std::size_t r = 0; r < rows; ++r) {
      const bool empty = ref.empty[r] != 0;
      part_lse[i * rows + r] = empty ? minus_inf : out.lse[r];
      for (std::size_t c = 0; c < width; ++c) part_o[(i * rows + r) * width + c] = empty ? nan : out.o[r * width + c];
    }
  }
  Outputs merged{std::vector<float>(rows * width, nan), std::vector<float>(rows, nan), "merge"};
  try {
    kernel.merge({splits, static_cast<int>(rows), s.value_dim, storage, part_o, part_lse}, merged.o, merged.lse);
  } catch (const KernelFailure&) {
    throw;  // a crash, hang or fault: the driver's to report
  } catch (const std::exception& e) {
    return Verdict::fail(kSplitName, fmt::format("merge threw: {}", e.what()));
  }

  const Reference& ref = oracle.reference(p);
  const GuardedOutputs whole = run_guarded(kernel, p);
  const std::string label = fmt::format("{} splits of {} keys merged vs whole:", splits, s.k_len);
  // A row no split saw merges to O = 0, LSE = -inf; the comparison wants the declared policy's.
  for (std::size_t r = 0; r < rows; ++r) {
    if (!ref.empty[r]) continue;
    const auto o_row = merged.o.begin() + static_cast<std::ptrdiff_t>(r * width);
    if (merged.lse[r] != minus_inf || std::any_of(o_row, o_row + s.value_dim, [](float x) { return x != 0.0f; }))
      return Verdict::fail(kSplitName, fmt::format("{} {}: no split saw a key, merged lse {} (want O = 0, LSE = -inf)",
                                                   label, describe_row(p, r), merged.lse[r]));
    if (caps.empty_rows == EmptyRowPolicy::kNan) std::fill(o_row, o_row + s.value_dim, nan), merged.lse[r] = nan;
  }
  // Each split restarts the kernel's key tiles; either run is within the bound of the exact whole.
  return compare_runs(p, ref, whole, merged, caps, kSplitName, label, 2.0, splits);
}

}  // namespace attest
