// Merging partial attention states (Kernel::merge): the exact f32 merge and its three mutants.
#include <cmath>
#include <limits>
#include <span>
#include <string>

#include "attest/kernels/builtin_kernels.h"
#include "attest/kernels/faults.h"
#include "attest/kernels/kernel.h"
#include "attest/model/precision.h"
#include "attest/model/problem.h"

namespace attest {

void check_merge_inputs(const MergeInputs& in, std::span<const float> o, std::span<const float> lse) {
  auto fail = [](const std::string& why) { throw ProblemError("merge: " + why); };
  if (in.parts < 1 || in.parts > 4096) fail("parts must be in [1, 4096], got " + std::to_string(in.parts));
  if (in.rows < 0 || in.value_dim < 1) fail("rows must be >= 0 and value_dim >= 1");
  if (in.storage != Scalar::kF32 && in.storage != Scalar::kBF16) fail("partial O storage must be f32 or bf16");
  const std::size_t rows = static_cast<std::size_t>(in.rows), parts = static_cast<std::size_t>(in.parts);
  const std::size_t width = static_cast<std::size_t>(in.value_dim);
  if (in.o.size() != parts * rows * width) fail("partial o must hold parts x rows x value_dim floats");
  if (in.lse.size() != parts * rows) fail("partial lse must hold parts x rows floats");
  if (o.size() != rows * width) fail("o must hold rows x value_dim floats");
  if (lse.size() != rows) fail("lse must hold rows floats");
}

void merge_states(const MergeInputs& in, std::span<float> o, std::span<float> lse, const KernelFaults& faults) {
  const float minus_inf = -std::numeric_limits<float>::infinity();
  const std::size_t rows = static_cast<std::size_t>(in.rows), width = static_cast<std::size_t>(in.value_dim);
  auto part_lse = [&](int i, std::size_t r) {
    const float x = in.lse[static_cast<std::size_t>(i) * rows + r];
    return faults.merge_lse_bf16 ? round_to(x, Scalar::kBF16) : x;
  };
  for (std::size_t r = 0; r < rows; ++r) {
    float m = minus_inf;  // the largest partial LSE: every weight exp(lse_i - m) <= 1
    for (int i = 0; i < in.parts; ++i) m = std::fmax(m, part_lse(i, r));
    std::span<float> out = o.subspan(r * width, width);
    for (float& x : out) x = 0.0f;
    if (m == minus_inf) {  // no part saw a key
      lse[r] = minus_inf;
      continue;
    }
    if (faults.merge_without_max) m = 0.0f;
    float sum = 0.0f;
    for (int i = 0; i < in.parts; ++i) {
      const float l = part_lse(i, r);
      if (l == minus_inf && !faults.merge_reads_empty_part) continue;  // an empty part: its O is not read
      const float w = std::exp(l - m);
      sum += w;
      const float* part = in.o.data() + (static_cast<std::size_t>(i) * rows + r) * width;
      for (std::size_t c = 0; c < width; ++c) out[c] += w * part[c];
    }
    for (float& x : out) x /= sum;
    lse[r] = m + std::log(sum);
  }
}

}  // namespace attest
