#include "problem_edits.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>

#include "attest/kernels/contract.h"
#include "attest/model/quantized.h"
#include "attest/properties/oracle.h"
#include "attest/properties/properties.h"
#include "attest/reference/reference.h"
#include "declared_range.h"

namespace attest {
namespace {

// NaN, +-inf and +-1e30, cycled over keys: each catches a different way of reading masked rows.
// A kernel whose inputs are promised finite gets +-1e30 only (a leak still dominates the row), and
// an additive-mask kernel +-`scored` (below).
float poison_value(int j, InputDomain inputs, float scored) {
  static const float values[] = {std::numeric_limits<float>::quiet_NaN(), INFINITY, -INFINITY, 1e30f, -1e30f};
  if (inputs == InputDomain::kMaskedScored) return j % 2 ? -scored : scored;
  return inputs == InputDomain::kFinite ? values[3 + j % 2] : values[j % 5];
}

// An additive-mask kernel computes q.k for a masked key before the -inf lands, so a masked K row
// holds the largest |k| (up to 1e30) whose scores with every query of the problem stay inside the
// declared score range (and float's): max_i |q_i|_1 x |k| x max(1, |scale|), doubled with RoPE (a rotated pair's
// products), within declared_range's logit bound. A leak of such a key still dominates its row.
float scored_poison(const Problem& p, const Capabilities& caps) {
  const int d = p.shape.head_dim;
  double q1 = 0;
  for (std::size_t r = 0; r + d <= p.q.size(); r += d) {
    double sum = 0;
    for (int c = 0; c < d; ++c) sum += std::fabs(double(p.q[r + c]));
    q1 = std::max(q1, sum);
  }
  const double per_unit_k = q1 * std::max(1.0, std::fabs(p.effective_scale())) * (p.rope.enabled ? 2.0 : 1.0);
  // The declared score format's range, and float's (f32 scores: unbounded there) with the same
  // headroom of 4 for a bias, ALiBi or a sum order adding to the score.
  const double limit = std::min(declared_range(caps, p.shape.k_len).logit, std::numeric_limits<float>::max() / 4.0);
  return static_cast<float>(per_unit_k > 0 ? std::min(1e30, limit / per_unit_k) : 1e30);
}

// The largest value a constant V row may hold under a |V| <= limit contract once stored: a 16-bit
// format, or a quantized group's f16 scale, may round the limit itself up past it (by < 2^-8).
float contract_edge(double limit, Scalar storage, int width) {
  std::vector<float> row;
  for (const double edge : {limit, limit * (1 - 0x1p-7)}) {
    row.assign(std::size_t(width), round_to(static_cast<float>(edge), storage));
    if (scaled(storage)) fit_rows(row, fit_width(storage, 1, width), storage);
    if (std::fabs(row[0]) <= limit) break;
  }
  return row[0];
}

}  // namespace

// Keys that no query row of their batch may see.
KeySet unseen_keys(const Problem& p, const std::vector<std::uint8_t>& visible) {
  const Shape& s = p.shape;
  KeySet keys(s.batch, std::vector<char>(s.k_len, 0));
  for (int b = 0; b < s.batch; ++b)
    for (int j = 0; j < s.k_len; ++j) {
      bool seen = false;
      for (int i = 0; i < s.q_len && !seen; ++i) seen = visible[(std::size_t(b) * s.q_len + i) * s.k_len + j];
      keys[b][j] = !seen;
    }
  return keys;
}

// Keys that query row i of each batch may not see.
KeySet keys_masked_for_row(const Problem& p, const std::vector<std::uint8_t>& visible, int i) {
  const Shape& s = p.shape;
  KeySet keys(s.batch, std::vector<char>(s.k_len, 0));
  for (int b = 0; b < s.batch; ++b)
    for (int j = 0; j < s.k_len; ++j) keys[b][j] = !visible[(std::size_t(b) * s.q_len + i) * s.k_len + j];
  return keys;
}

// Poisons the K (or the V) rows of the chosen keys; returns how many keys. K and V are poisoned
// apart: a kernel may zero a row for a NaN key and leak a NaN value.
int poison(Problem& p, const KeySet& keys, Poisoned which, const Capabilities& caps) {
  const InputDomain inputs = caps.inputs;
  const Shape& s = p.shape;
  const float scored = inputs == InputDomain::kMaskedScored ? scored_poison(p, caps) : 0.0f;
  // q8_head holds no NaN or infinity in one value, and its scale is fixed per sequence and kv head:
  // a masked row there gets the head's largest code (+-127 d, the sign alternating), which leaves
  // the scale, and so every visible value, as it was.
  auto row_poison = [&](const std::vector<float>& buffer, Scalar storage, int width, std::size_t kv, int j) {
    if (storage != Scalar::kQ8Head) return poison_value(j, inputs, scored);
    const std::size_t block = std::size_t(s.k_len) * width, head = kv / s.k_len;
    const float d = canonical_scale(std::span(buffer).subspan(head * block, block), storage);
    return (j % 2 ? -127.0f : 127.0f) * d;
  };
  // A key masked for the compared rows may be visible to another row of the problem (bottom-right
  // causal: every key is, the only problems a decode-only kernel takes). A |V| contract covers its V
  // there, so it gets the contract's edge instead: a leak of it still shows.
  const KeySet seen = which == Poisoned::kValues && caps.contract.max_abs_value > 0 ? keys_seen(p) : KeySet{};
  int poisoned = 0;
  for (int b = 0; b < s.batch; ++b)
    for (int j = 0; j < s.k_len; ++j) {
      if (!keys[b][j]) continue;
      ++poisoned;
      for (int g = 0; g < s.kv_heads; ++g) {
        const std::size_t kv = (std::size_t(b) * s.kv_heads + g) * s.k_len + j;
        if (which == Poisoned::kKeys)
          std::fill_n(&p.k[kv * s.head_dim], s.head_dim, row_poison(p.k, p.storage.k, s.head_dim, kv, j));
        else if (!seen.empty() && seen[b][j] && p.storage.v != Scalar::kQ8Head)
          std::fill_n(&p.v[kv * s.value_dim], s.value_dim,
                      (j % 2 ? -1.0f : 1.0f) * contract_edge(caps.contract.max_abs_value, p.storage.v, s.value_dim));
        else
          std::fill_n(&p.v[kv * s.value_dim], s.value_dim, row_poison(p.v, p.storage.v, s.value_dim, kv, j + 1));
      }
    }
  // Poisons are representable in every storage format: NaN, +-inf and +-1e30 round to themselves in
  // f32 and bf16; in f16 1e30 is inf, so a 16-bit-storage problem gets that instead (the largest
  // finite f16 when the inputs are promised finite, or of the format the kernel rounds to on entry).
  auto store = [&](float x, Scalar format, Scalar entry) {
    const float largest = static_cast<float>(largest_input(format, entry));
    const bool finite = inputs != InputDomain::kMaskedMayBeNonFinite;
    return round_to(finite && std::isfinite(x) ? std::clamp(x, -largest, largest) : x, format);
  };
  for (float& x : p.k) x = store(x, p.storage.k, caps.precision.k_entry);
  for (float& x : p.v) x = store(x, p.storage.v, caps.precision.v_entry);
  p.fit_to_storage();  // a poisoned row of a scaled format: its own groups (NaN, +-inf, saturated)
  return poisoned;
}

Problem single_query(const Problem& p, int i) {
  const Shape& s = p.shape;
  Problem out = p;
  out.shape.q_len = 1;
  out.q_offset = p.query_position(i);
  out.q.clear();
  for (int b = 0; b < s.batch; ++b)
    for (int h = 0; h < s.heads; ++h) {
      const auto row = p.q.begin() + ((std::size_t(b) * s.heads + h) * s.q_len + i) * s.head_dim;
      out.q.insert(out.q.end(), row, row + s.head_dim);
    }
  MaskSpec& m = out.mask;
  for (int b = 0; b < s.batch; ++b) {
    if (!m.q_valid.empty()) m.q_valid[b] = i < p.mask.q_valid[b] ? 1 : 0;
  }
  if (!m.q_segment.empty()) {
    m.q_segment.clear();
    for (int b = 0; b < s.batch; ++b) m.q_segment.push_back(p.mask.q_segment[std::size_t(b) * s.q_len + i]);
  }
  if (!m.explicit_mask.empty()) {
    m.explicit_mask.clear();
    for (int b = 0; b < s.batch; ++b) {
      const auto row = p.mask.explicit_mask.begin() + (std::size_t(b) * s.q_len + i) * s.k_len;
      m.explicit_mask.insert(m.explicit_mask.end(), row, row + s.k_len);
    }
  }
  out.modifiers.bias = rebuilt_bias(
      p, out.shape, [&](int b, int h, int, int j) { return p.modifiers.bias[p.modifiers.bias_index(s, b, h, i, j)]; });
  return out;
}

Problem only_keys_of_part(const Problem& p, const std::vector<int>& part, int which) {
  Problem q = p;
  const Shape& s = p.shape;
  const std::size_t per_batch = static_cast<std::size_t>(s.q_len) * static_cast<std::size_t>(s.k_len);
  std::vector<std::uint8_t>& mask = q.mask.explicit_mask;
  if (mask.empty()) mask.assign(static_cast<std::size_t>(s.batch) * per_batch, 1);
  for (std::size_t e = 0; e < mask.size(); ++e)
    if (part[e % static_cast<std::size_t>(s.k_len)] != which) mask[e] = 0;
  return q;
}

Problem first_keys(const Problem& p, int n) {
  const Shape& s = p.shape;
  Problem out = p;
  out.shape.k_len = n;
  auto cut = [&](const std::vector<float>& from, int width) {
    std::vector<float> to;
    for (int bg = 0; bg < s.batch * s.kv_heads; ++bg)
      to.insert(to.end(), from.begin() + std::size_t(bg) * s.k_len * width,
                from.begin() + (std::size_t(bg) * s.k_len + n) * width);
    return to;
  };
  out.k = cut(p.k, s.head_dim);
  out.v = cut(p.v, s.value_dim);
  MaskSpec& m = out.mask;
  for (int& valid : m.kv_valid) valid = std::min(valid, n);
  if (!m.k_segment.empty()) {
    m.k_segment.clear();
    for (int b = 0; b < s.batch; ++b)
      m.k_segment.insert(m.k_segment.end(), p.mask.k_segment.begin() + std::size_t(b) * s.k_len,
                         p.mask.k_segment.begin() + std::size_t(b) * s.k_len + n);
  }
  if (!m.explicit_mask.empty()) {
    m.explicit_mask.clear();
    for (int bi = 0; bi < s.batch * s.q_len; ++bi)
      m.explicit_mask.insert(m.explicit_mask.end(), p.mask.explicit_mask.begin() + std::size_t(bi) * s.k_len,
                             p.mask.explicit_mask.begin() + std::size_t(bi) * s.k_len + n);
  }
  out.modifiers.bias = rebuilt_bias(p, out.shape, [&](int b, int h, int i, int j) {
    return p.modifiers.bias[p.modifiers.bias_index(s, b, h, i, j)];
  });
  out.fit_to_storage();  // q8_head: fewer tokens, so a head's scale may shrink
  return out;
}

std::optional<Problem> single_query_within(const Problem& p, int i, const Capabilities& caps) {
  Problem row = single_query(p, i);
  if (caps.supports(row)) return row;
  const long long pos = p.query_position(i);
  if (!p.mask.causal || pos < 0) return std::nullopt;
  if (pos + 1 < p.shape.k_len) row = first_keys(row, static_cast<int>(pos + 1));
  row.q_offset.reset();  // now bottom-right: the query sits at Tk - 1 = pos
  if (caps.supports(row)) return row;
  return std::nullopt;
}

Problem permuted_problem(const Problem& p, const std::vector<int>& qs, const std::vector<int>& ks) {
  const Shape& s = p.shape;
  const MaskSpec& m = p.mask;
  Problem permuted = p;
  permuted.q = permute_rows(p.q, s.batch * s.heads, qs, s.head_dim);
  permuted.k = permute_rows(p.k, s.batch * s.kv_heads, ks, s.head_dim);
  permuted.v = permute_rows(p.v, s.batch * s.kv_heads, ks, s.value_dim);
  if (!m.q_segment.empty()) {
    permuted.mask.q_segment = permute_rows(m.q_segment, s.batch, qs, 1);
    permuted.mask.k_segment = permute_rows(m.k_segment, s.batch, ks, 1);
  }
  if (!m.explicit_mask.empty()) {
    // Rows follow the queries, then columns follow the keys.
    std::vector<std::uint8_t> rows = permute_rows(m.explicit_mask, s.batch, qs, s.k_len);
    permuted.mask.explicit_mask = permute_rows(rows, s.batch * s.q_len, ks, 1);
  }
  // A bias is permuted along with its rows and columns.
  permuted.modifiers.bias = rebuilt_bias(p, s, [&](int b, int h, int i, int j) {
    return p.modifiers.bias[p.modifiers.bias_index(s, b, h, qs[i], ks[j])];
  });
  return permuted;
}

Problem with_more_empty_rows(const Problem& p, const Capabilities& caps) {
  Problem variant = p;
  const Shape& s = p.shape;
  if (caps.declares(Feature::kQueryPadding)) {
    if (variant.mask.q_valid.empty()) variant.mask.q_valid.assign(s.batch, s.q_len);
    for (int& n : variant.mask.q_valid) n = std::max(0, std::min(n, s.q_len - 1));
  } else {
    if (variant.mask.kv_valid.empty()) variant.mask.kv_valid.assign(s.batch, s.k_len);
    variant.mask.kv_valid.back() = 0;
  }
  return variant;
}

Problem repeated_heads(const Problem& p) {
  const Shape& s = p.shape;
  Problem mha = p;
  mha.shape.kv_heads = s.heads;
  mha.k.clear();
  mha.v.clear();
  for (int b = 0; b < s.batch; ++b)
    for (int h = 0; h < s.heads; ++h) {
      const std::size_t g = std::size_t(b) * s.kv_heads + p.kv_head_of(h);
      mha.k.insert(mha.k.end(), p.k.begin() + g * s.k_len * s.head_dim, p.k.begin() + (g + 1) * s.k_len * s.head_dim);
      mha.v.insert(mha.v.end(), p.v.begin() + g * s.k_len * s.value_dim, p.v.begin() + (g + 1) * s.k_len * s.value_dim);
    }
  return mha;
}

Problem single_slice(const Problem& p, int b, int h) {
  const Shape& s = p.shape;
  const int g = p.kv_head_of(h);
  Problem out = p;
  out.shape.batch = out.shape.heads = out.shape.kv_heads = 1;
  auto slice = [](const std::vector<float>& from, std::size_t start, std::size_t n) {
    return std::vector<float>(from.begin() + start, from.begin() + start + n);
  };
  out.q = slice(p.q, (std::size_t(b) * s.heads + h) * s.q_len * s.head_dim, std::size_t(s.q_len) * s.head_dim);
  out.k = slice(p.k, (std::size_t(b) * s.kv_heads + g) * s.k_len * s.head_dim, std::size_t(s.k_len) * s.head_dim);
  out.v = slice(p.v, (std::size_t(b) * s.kv_heads + g) * s.k_len * s.value_dim, std::size_t(s.k_len) * s.value_dim);
  MaskSpec& m = out.mask;
  if (!m.kv_valid.empty()) m.kv_valid = {p.mask.kv_valid[b]};
  if (!m.q_valid.empty()) m.q_valid = {p.mask.q_valid[b]};
  if (!m.q_segment.empty()) {
    m.q_segment.assign(p.mask.q_segment.begin() + std::size_t(b) * s.q_len,
                       p.mask.q_segment.begin() + std::size_t(b + 1) * s.q_len);
    m.k_segment.assign(p.mask.k_segment.begin() + std::size_t(b) * s.k_len,
                       p.mask.k_segment.begin() + std::size_t(b + 1) * s.k_len);
  }
  if (!m.explicit_mask.empty())
    m.explicit_mask.assign(p.mask.explicit_mask.begin() + std::size_t(b) * s.q_len * s.k_len,
                           p.mask.explicit_mask.begin() + std::size_t(b + 1) * s.q_len * s.k_len);
  ScoreModifiers& md = out.modifiers;
  if (!md.alibi_slopes.empty()) md.alibi_slopes = {p.modifiers.alibi_slopes[h]};
  if (!md.sinks.empty()) md.sinks = {p.modifiers.sinks[h]};
  md.bias = rebuilt_bias(
      p, out.shape, [&](int, int, int i, int j) { return p.modifiers.bias[p.modifiers.bias_index(s, b, h, i, j)]; });
  return out;
}

Problem lengthened_prefill(const Problem& prefill, int length, std::uint64_t seed) {
  Problem out = prefill;
  const Shape& s = prefill.shape;
  out.shape.q_len = out.shape.k_len = length;
  std::mt19937_64 rng(seed);
  auto grow = [&](const std::vector<float>& from, int outer, int width) {
    double squares = 0, largest = 0;
    for (float x : from)
      if (std::isfinite(x)) squares += double(x) * x, largest = std::max(largest, std::fabs(double(x)));
    const double rms = squares == 0 ? 1.0 : std::sqrt(squares / from.size());
    const double reach = squares == 0 ? std::sqrt(3.0) : std::min(std::sqrt(3.0) * rms, largest);
    std::uniform_real_distribution<double> unit(-reach, reach);
    std::vector<float> grown;
    for (int o = 0; o < outer; ++o) {
      const auto start = from.begin() + std::size_t(o) * s.k_len * width;
      grown.insert(grown.end(), start, start + std::size_t(s.k_len) * width);
      for (std::size_t e = 0; e < std::size_t(length - s.k_len) * width; ++e)
        grown.push_back(static_cast<float>(unit(rng)));
    }
    return grown;
  };
  out.q = grow(prefill.q, s.batch * s.heads, s.head_dim);
  out.k = grow(prefill.k, s.batch * s.kv_heads, s.head_dim);
  out.v = grow(prefill.v, s.batch * s.kv_heads, s.value_dim);
  out.fit_to_storage();
  return out;
}

namespace {

// Calls f(q_row, k_row) for every query row and every key row its head reads (of the keys
// `counted` marks, when given).
template <typename F>
void for_each_pair(const Problem& p, F f, const KeySet* counted = nullptr) {
  const Shape& s = p.shape;
  for (int b = 0; b < s.batch; ++b)
    for (int h = 0; h < s.heads; ++h)
      for (int i = 0; i < s.q_len; ++i)
        for (int j = 0; j < s.k_len; ++j)
          if (!counted || (*counted)[b][j])
            f(&p.q[((std::size_t(b) * s.heads + h) * s.q_len + i) * s.head_dim],
              &p.k[((std::size_t(b) * s.kv_heads + p.kv_head_of(h)) * s.k_len + j) * s.head_dim]);
}

// sum_k |q_k k_k|, or with RoPE the pairwise bound (|q0| + |q1|)(|k0| + |k1|) of the rotated products.
double abs_product_sum(const Problem& p, const float* q, const float* k) {
  double sum = 0;
  if (p.rope.enabled) {
    for (int c = 0; c + 1 < p.shape.head_dim; c += 2)
      sum += (std::fabs(q[c]) + std::fabs(q[c + 1])) * (std::fabs(double(k[c])) + std::fabs(k[c + 1]));
  } else {
    for (int c = 0; c < p.shape.head_dim; ++c) sum += std::fabs(double(q[c]) * k[c]);
  }
  return sum;
}

}  // namespace

double max_abs_product_sum(const Problem& p, const KeySet* counted) {
  double best = 0;
  bool nan = false;
  for_each_pair(
      p,
      [&](const float* q, const float* k) {
        const double sum = abs_product_sum(p, q, k);
        nan = nan || std::isnan(sum);
        best = std::max(best, sum);
      },
      counted);
  return nan ? NAN : best;
}

double max_abs_dot(const Problem& p) {
  double best = 0;
  for_each_pair(p, [&](const float* q, const float* k) {
    double dot = 0;
    if (p.rope.enabled) {
      dot = abs_product_sum(p, q, k);
    } else {
      for (int c = 0; c < p.shape.head_dim; ++c) dot += double(q[c]) * double(k[c]);
    }
    best = std::max(best, std::fabs(dot));
  });
  return best;
}

Problem with_logits_up_to(const Problem& p, double target, double dot, const Capabilities& caps) {
  // Reach the target through the scale, and through Q where the scale alone would leave
  // float range (a float kernel must be able to hold its scale).
  // A kernel that takes only the default scale gets there through Q alone.
  Problem scaled = p;
  const bool default_scale = caps.contract.default_scale_only;
  const double wanted = target / dot;
  const double scale = default_scale ? p.effective_scale() : std::copysign(std::min(std::fabs(wanted), 1e30), wanted);
  if (!default_scale) scaled.scale = scale;
  if (scale != wanted) {
    const double boost = wanted / scale;
    // Q keeps its storage format: boosted values are rounded to it (saturating at its largest, or
    // at the largest of the format the kernel rounds Q to on entry).
    const float largest = static_cast<float>(largest_input(scaled.storage.q, caps.precision.q_entry));
    for (float& x : scaled.q)
      x = round_to(std::clamp(static_cast<float>(x * boost), -largest, largest), scaled.storage.q);
  }
  return scaled;
}

std::optional<Problem> with_logits_in_float_range(const Problem& p, double target, double dot, const Capabilities& caps,
                                                  double* reached) {
  // A float q.k that overflows is attest's problem, not the kernel's: a default-scale kernel gets its
  // large logits through Q alone, and Q near FLT_MAX overflows every float dot product.
  for (int tries = 0; tries < 64; ++tries, target /= 4) {
    Problem scaled = with_logits_up_to(p, target, dot, caps);
    if (!within_float_range(scaled) || !logits_within_declared_range(scaled, caps)) continue;
    if (reached) *reached = target;
    return scaled;
  }
  return std::nullopt;
}

int identity_probe_width(const Problem& p, const Capabilities& /*caps*/) {
  // The problem's own value width, in blocks across the keys: a kernel whose path depends on Dv
  // (a fast path for Dv % 16 == 0) keeps that path under the probe.
  return p.shape.value_dim;
}

Problem identity_probe(const Problem& p, int width, int first) {
  return with_values(p, width, [first](int j, int c) { return j == first + c ? 1.0f : 0.0f; });
}

Problem with_bias(const Problem& p, bool per_batch, bool per_head) {
  Problem out = p;
  ScoreModifiers& m = out.modifiers;
  if (!m.bias.empty()) return out;
  m.bias_per_batch = per_batch, m.bias_per_head = per_head;
  const Shape& s = p.shape;
  m.bias.assign(std::size_t(per_batch ? s.batch : 1) * (per_head ? s.heads : 1) * s.q_len * s.k_len, 0.0f);
  return out;
}

Problem with_alibi_slopes(const Problem& p, std::uint64_t seed) {
  Problem out = p;
  if (!out.modifiers.alibi_slopes.empty()) return out;
  std::mt19937_64 rng(seed);
  const int heads = p.shape.heads;
  for (int h = 0; h < heads; ++h) {
    const float magnitude = std::exp2(-8.0f * (h + 1) / heads) * (rng() % 2 ? 4.0f : 1.0f);
    out.modifiers.alibi_slopes.push_back(rng() % 3 == 0 ? -magnitude : magnitude);
  }
  return out;
}

std::vector<std::uint8_t> visibility_of(const Problem& p) { return reference_mask(p); }

std::uint64_t seed_of(const Problem& p, std::uint64_t salt) { return fingerprint(p) ^ (salt * 0x9e3779b97f4a7c15ULL); }

std::vector<int> shuffled(int n, std::uint64_t seed) {
  std::vector<int> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), std::mt19937_64(seed));
  return order;
}

}  // namespace attest
