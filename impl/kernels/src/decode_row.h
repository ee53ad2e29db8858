// One query row of a paged decoder: an online softmax over key ranges, one page at a time.
// Shared by the decoders whose caches map a position to its K and V rows (paged, sinks + recent).
#pragma once

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <vector>

#include "attest/kernels/faults.h"
#include "kernel_support.h"

namespace attest::kernels {

// Online softmax of one query row over keys in `ranges` (ascending, disjoint) of sequence b.
// `visible(j)` applies the per-key mask terms, `modify(j, x)` the score modifiers to key j's
// scaled score; a finite `sink` starts the running state (the first term of max and sum).
// Cache: key(b, g, j), value(b, g, j), page_size().
template <typename Cache, typename Visible, typename Modify>
void attend_row(const Cache& cache, int b, int g, const float* q, int dk, int dv, float scale,
                std::initializer_list<KeyRange> ranges, Visible visible, Modify modify, float sink,
                std::vector<float>& page_scores, float* out, float* out_lse, const KernelFaults& faults) {
  float row_max = sink == kNegInf && faults.finite_max_sentinel ? -10000.0f : sink;
  float row_sum = sink == kNegInf ? 0.0f : 1.0f;
  std::fill(out, out + dv, 0.0f);
  const int page = cache.page_size();
  for (const KeyRange& range : ranges) {
    for (int j0 = (range.lo / page) * page; j0 < range.hi; j0 += page) {
      const int first = std::max(j0, range.lo);
      const int last = std::min(j0 + page - (faults.decode_page_off_by_one ? 1 : 0), range.hi);
      float page_max = kNegInf;
      for (int j = first; j < last; ++j) {
        float& sc = page_scores[j - j0];
        sc = visible(j) ? modify(j, dot(q, cache.key(b, g, j), dk) * scale) : kNegInf;
        page_max = std::max(page_max, sc);
      }
      if (page_max == kNegInf) continue;
      const float new_max = std::max(row_max, page_max);
      const float rescale = std::exp(row_max - new_max);
      for (int d = 0; d < dv; ++d) out[d] *= rescale;
      row_sum *= rescale;
      for (int j = first; j < last; ++j) {
        const float sc = page_scores[j - j0];
        if (sc == kNegInf) continue;
        const float pj = std::exp(sc - new_max);
        row_sum += pj;
        const float* value = cache.value(b, g, j);
        for (int d = 0; d < dv; ++d) out[d] += pj * value[d];
      }
      row_max = new_max;
    }
  }
  if (row_max == kNegInf) {
    write_empty_row(out, dv, out_lse);
    return;
  }
  for (int d = 0; d < dv; ++d) out[d] /= row_sum;
  if (out_lse) *out_lse = row_max + std::log(row_sum);
}

}  // namespace attest::kernels
