// merge_equals_whole: a kernel's merge of partial attention states (Kernel::merge) against the
// exact attention over all the keys. attest computes each part's exact state itself, so the
// check judges the merge alone.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "attest/model/precision.h"
#include "attest/properties/properties.h"
#include "problem_edits.h"

namespace attest {
namespace {

constexpr const char* kName = "merge_equals_whole";
constexpr double kF32Unit = 0x1p-24;

// Which part each key falls in: every key in one part beside empty ones, each key a part of its
// own (the rest of the keys in one more), or keys scattered over parts, some of them left empty.
std::vector<int> drawn_partition(int keys, std::mt19937_64& rng, int& parts) {
  std::vector<int> part(static_cast<std::size_t>(keys), 0);
  switch (rng() % 3) {
    case 0: {  // one part holds all keys
      parts = 1 + static_cast<int>(rng() % 4);
      const int holder = static_cast<int>(rng() % static_cast<std::uint64_t>(parts));
      std::fill(part.begin(), part.end(), holder);
      break;
    }
    case 1: {  // single keys
      const int singles = std::min(keys, 6);
      parts = singles + 1;
      for (int j = 0; j < keys; ++j) part[static_cast<std::size_t>(j)] = j < singles ? j : singles;
      break;
    }
    default:  // scattered, with more parts than keys at times: empty parts
      parts = 2 + static_cast<int>(rng() % 6);
      for (int& p : part) p = static_cast<int>(rng() % static_cast<std::uint64_t>(parts));
  }
  return part;
}

}  // namespace

Verdict merge_equals_whole(const Problem& given, const Kernel& kernel, Oracle& oracle) {
  if (!kernel.capabilities().merge) return Verdict::not_applicable(kName, "the kernel declares no merge");
  Problem p = given;
  p.modifiers.sinks.clear();  // a sink joins the whole row's denominator once: no part owns it
  std::mt19937_64 rng(seed_of(p, 0x6d65726765));
  if (rng() % 3 == 0) {  // scores in the hundreds: partial LSEs past exp's float range
    p.modifiers.softcap.reset();
    p.scale = p.effective_scale() * static_cast<double>(64 << (rng() % 4));
  }
  const Scalar storage = rng() % 2 ? Scalar::kBF16 : Scalar::kF32;
  int parts = 1;
  const std::vector<int> part = drawn_partition(p.shape.k_len, rng, parts);

  const Shape& s = p.shape;
  const std::size_t rows = static_cast<std::size_t>(s.batch) * s.heads * s.q_len;
  const std::size_t width = static_cast<std::size_t>(s.value_dim);
  std::vector<float> part_o(static_cast<std::size_t>(parts) * rows * width);
  std::vector<float> part_lse(static_cast<std::size_t>(parts) * rows);
  std::vector<double> max_abs_o(rows, 0.0);  // over the parts that saw a key
  for (int i = 0; i < parts; ++i) {
    const Reference& ref = oracle.reference(only_keys_of_part(p, part, i));
    for (std::size_t r = 0; r < rows; ++r) {
      const bool empty = ref.empty[r] != 0;
      part_lse[i * rows + r] = empty ? -std::numeric_limits<float>::infinity() : static_cast<float>(ref.lse[r]);
      for (std::size_t c = 0; c < width; ++c) {
        const float x = round_to(static_cast<float>(ref.o[r * width + c]), storage);
        part_o[(i * rows + r) * width + c] = empty ? std::numeric_limits<float>::quiet_NaN() : x;
        if (!empty) max_abs_o[r] = std::max(max_abs_o[r], std::fabs(static_cast<double>(x)));
      }
    }
  }
  const MergeInputs in{parts, static_cast<int>(rows), s.value_dim, storage, part_o, part_lse};
  std::vector<float> o(rows * width, std::numeric_limits<float>::quiet_NaN());
  std::vector<float> lse(rows, std::numeric_limits<float>::quiet_NaN());
  try {
    kernel.merge(in, o, lse);
  } catch (const KernelFailure&) {
    throw;  // a crash, hang or fault: the driver's to report
  } catch (const std::exception& e) {
    return Verdict::fail(kName, fmt::format("merge threw: {}", e.what()));
  }

  const Reference& whole = oracle.reference(p);
  const std::string drawn = fmt::format("{} parts of {} keys, partial O in {}", parts, s.k_len, to_string(storage));
  // Rounding a partial O to its storage moves it by at most a unit (bf16: 2^-8) of its magnitude; a
  // single part holding every key reaches that, so the check's utilisation can come close to 1.
  const double storage_unit = storage == Scalar::kBF16 ? 0x1p-8 : kF32Unit;
  double worst = 0.0;
  for (std::size_t r = 0; r < rows; ++r) {
    const std::string where = fmt::format("row {} ({})", r, drawn);
    if (whole.empty[r]) {  // every part empty: O = 0, LSE = -inf
      if (!(lse[r] == -std::numeric_limits<float>::infinity()))
        return Verdict::fail(kName, fmt::format("{}: no part saw a key, merged lse {} (want -inf)", where, lse[r]));
      for (std::size_t c = 0; c < width; ++c)
        if (o[r * width + c] != 0.0f)
          return Verdict::fail(
              kName, fmt::format("{} col {}: no part saw a key, merged o {} (want 0)", where, c, o[r * width + c]));
      continue;
    }
    // Each partial LSE is off by up to a unit of f32, so each weight by |lse| units; the merge's own
    // exp, log, sums and division add a few units per part.
    const double lse_bound = kF32Unit * (4.0 * std::fabs(whole.lse[r]) + 8.0 * parts + 8.0);
    const double lse_error = std::fabs(static_cast<double>(lse[r]) - whole.lse[r]);
    if (!(lse_error <= lse_bound))
      return Verdict::fail(
          kName, fmt::format("{}: merged lse {}, exact {}, bound {:.3g}", where, lse[r], whole.lse[r], lse_bound));
    worst = std::max(worst, lse_error / lse_bound);
    const double o_bound =
        max_abs_o[r] * (storage_unit + kF32Unit * (4.0 * std::fabs(whole.lse[r]) + 8.0 * parts + 8.0)) + 1e-30;
    for (std::size_t c = 0; c < width; ++c) {
      const double error = std::fabs(static_cast<double>(o[r * width + c]) - whole.o[r * width + c]);
      if (!(error <= o_bound))
        return Verdict::fail(kName, fmt::format("{} col {}: merged o {}, exact {}, bound {:.3g}", where, c,
                                                o[r * width + c], whole.o[r * width + c], o_bound));
      worst = std::max(worst, error / o_bound);
    }
  }
  return Verdict::pass(kName, worst);
}

}  // namespace attest
