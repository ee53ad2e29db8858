// Random small problems with every feature drawn, and a bit-for-bit comparison of result
// fields: for the tests that a fast path gives the portable path's bits.
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include "attest/model/problem.h"

namespace attest::testing_support {

// Same bits, or NaN in both (a NaN's payload may depend on the order of a sum's operands).
template <typename T>
inline std::string first_difference(const char* field, const std::vector<T>& a, const std::vector<T>& b) {
  if (a.size() != b.size()) return std::string(field) + ": sizes differ";
  for (std::size_t e = 0; e < a.size(); ++e) {
    if constexpr (std::is_floating_point_v<T>) {
      if (std::isnan(a[e]) && std::isnan(b[e])) continue;
      if (std::bit_cast<std::uint64_t>(a[e]) == std::bit_cast<std::uint64_t>(b[e])) continue;
    } else if (a[e] == b[e]) {
      continue;
    }
    std::ostringstream out;
    out << field << "[" << e << "]: " << std::hexfloat << a[e] << " vs " << b[e];
    return out.str();
  }
  return "";
}

// What the random problems covered, so that the test cannot pass on a narrow draw.
struct Coverage {
  int rope = 0, odd_dk = 0, ragged_tk = 0, sinks = 0, softcap = 0, masked = 0, tiny = 0, huge = 0;
};

// A small problem with every feature drawn at random: RoPE, sinks, softcap, ALiBi, a bias with
// -inf entries, causal/window/kv_valid/explicit masks, magnitudes 2^-20 .. 2^20 per tensor.
inline Problem random_problem(std::mt19937_64& rng, Coverage& seen) {
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  auto coin = [&] { return pick(0, 1) == 1; };
  Problem p;
  const int kv_heads = pick(1, 2), group = pick(1, 2);
  p.rope.enabled = coin();
  int dk = pick(1, 11);
  if (p.rope.enabled) dk += dk % 2;  // RoPE pairs need an even Dk
  p.shape = {.batch = pick(1, 2),
             .heads = kv_heads * group,
             .kv_heads = kv_heads,
             .q_len = pick(1, 6),
             .k_len = pick(1, 19),
             .head_dim = dk,
             .value_dim = pick(1, 4)};
  const Shape& s = p.shape;
  if (p.rope.enabled && coin()) p.rope.base = 500.0;
  p.mask.causal = coin();
  if (pick(0, 3) == 0) p.mask.window = pick(1, 8);
  if (pick(0, 3) == 0)
    for (int b = 0; b < s.batch; ++b) p.mask.kv_valid.push_back(pick(0, s.k_len));
  if (pick(0, 4) == 0) p.q_offset = pick(-3, 20);
  p.resize_buffers();
  if (pick(0, 5) == 0) {
    p.mask.explicit_mask.resize(std::size_t(s.batch) * s.q_len * s.k_len);
    for (auto& x : p.mask.explicit_mask) x = pick(0, 3) != 0;
  }
  if (coin()) p.modifiers.softcap = std::ldexp(1.0, pick(-2, 6));
  std::normal_distribution<double> normal(0.0, 1.0);
  if (pick(0, 3) == 0)
    for (int h = 0; h < s.heads; ++h) p.modifiers.alibi_slopes.push_back(static_cast<float>(normal(rng)));
  if (coin())
    for (int h = 0; h < s.heads; ++h) p.modifiers.sinks.push_back(static_cast<float>(4 * normal(rng)));
  if (pick(0, 3) == 0) {
    p.modifiers.bias.resize(std::size_t(s.batch) * s.heads * s.q_len * s.k_len);
    for (float& x : p.modifiers.bias)
      x = pick(0, 7) == 0 ? -std::numeric_limits<float>::infinity() : static_cast<float>(normal(rng));
  }
  int lowest = 20, highest = -20;
  for (auto* tensor : {&p.q, &p.k, &p.v}) {
    const int e = pick(-20, 20);
    lowest = std::min(lowest, e), highest = std::max(highest, e);
    for (float& x : *tensor) x = static_cast<float>(std::ldexp(normal(rng), e));
  }
  seen.rope += p.rope.enabled;
  seen.odd_dk += dk % 2;
  seen.ragged_tk += s.k_len % 4 != 0;
  seen.sinks += !p.modifiers.sinks.empty();
  seen.softcap += p.modifiers.softcap.has_value();
  seen.masked += p.mask.causal || p.mask.window || !p.mask.explicit_mask.empty();
  seen.tiny += lowest <= -15;
  seen.huge += highest >= 15;
  return p;
}

}  // namespace attest::testing_support
