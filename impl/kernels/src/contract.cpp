#include "attest/kernels/contract.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "kernel_support.h"

namespace attest {
namespace {

std::string range_text(const char* name, const Range& r) {
  if (r.unlimited()) return {};
  if (r.min == r.max) return std::string(name) + " = " + std::to_string(r.min);
  return std::string(name) + " in [" + std::to_string(r.min) + ", " + std::to_string(r.max) + "]";
}

std::string list_text(const std::vector<int>& v) {
  std::string out;
  for (int x : v) out += (out.empty() ? "" : ", ") + std::to_string(x);
  return out;
}

std::string number_text(double x) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", x);
  return text;
}

}  // namespace

std::vector<float> standard_alibi_slopes(int heads, double max_bias) {
  const int n = 1 << static_cast<int>(std::floor(std::log2(static_cast<double>(heads))));
  const double m0 = std::exp2(-max_bias / n), m1 = std::exp2(-max_bias / 2 / n);
  std::vector<float> slopes;
  for (int h = 0; h < heads; ++h)
    slopes.push_back(static_cast<float>(h < n ? std::pow(m0, h + 1) : std::pow(m1, 2 * (h - n) + 1)));
  return slopes;
}

void Contract::fit_alibi_slopes(Problem& p) const {
  if (alibi_slopes == AlibiSlopes::kStandard && !p.modifiers.alibi_slopes.empty())
    p.modifiers.alibi_slopes = standard_alibi_slopes(p.shape.heads, alibi_max_bias);
}

void Contract::fit_alibi_or_bias(Problem& p, bool keep_bias) const {
  ScoreModifiers& m = p.modifiers;
  if (!alibi_excludes_bias || m.alibi_slopes.empty() || m.bias.empty()) return;
  if (keep_bias)
    m.alibi_slopes.clear();
  else
    m.bias.clear(), m.bias_per_batch = m.bias_per_head = false;
}

std::vector<std::vector<char>> keys_seen(const Problem& p) {
  const Shape& s = p.shape;
  const kernels::MaskView mask(p);
  const kernels::ModifierView modifiers(p);
  const bool per_key = mask.elementwise() || !p.modifiers.bias.empty();
  std::vector<std::vector<char>> out(s.batch, std::vector<char>(s.k_len, 0));
  std::vector<int> starts(s.k_len + 1);  // without per-key terms: the union of the rows' ranges
  for (int b = 0; b < s.batch; ++b) {
    std::vector<char>& seen = out[b];
    std::fill(starts.begin(), starts.end(), 0);
    for (int i = 0; i < s.q_len; ++i) {
      const kernels::KeyRange range = mask.range(b, i);
      if (!per_key) {
        if (range.lo < range.hi) ++starts[range.lo], --starts[range.hi];
        continue;
      }
      for (int j = range.lo; j < range.hi; ++j) {
        if (seen[j] || (mask.elementwise() && !mask.elementwise_visible(b, i, j))) continue;
        for (int h = 0; h < s.heads && !seen[j]; ++h) seen[j] = static_cast<char>(!modifiers.masks(b, h, i, j));
      }
    }
    if (!per_key)
      for (int j = 0, open = 0; j < s.k_len; ++j) seen[j] = static_cast<char>((open += starts[j]) > 0);
  }
  return out;
}

namespace {

// "V = 40 of a visible key beyond |V| <= 16", or empty: keys no query of the batch entry sees in any
// head (masked, padded, hidden by a -inf bias) may hold anything (the input domain says what).
std::string value_beyond(const Problem& p, double limit) {
  const Shape& s = p.shape;
  const std::vector<std::vector<char>> seen = keys_seen(p);
  for (int b = 0; b < s.batch; ++b) {
    for (int g = 0; g < s.kv_heads; ++g)
      for (int j = 0; j < s.k_len; ++j) {
        if (!seen[b][j]) continue;
        const float* v = &p.v[((std::size_t(b) * s.kv_heads + g) * s.k_len + j) * s.value_dim];
        for (int c = 0; c < s.value_dim; ++c)
          if (!(std::fabs(v[c]) <= limit))
            return "V = " + number_text(v[c]) +
                   " of a visible key is beyond the contract's |V| <= " + number_text(limit);
      }
  }
  return {};
}

}  // namespace

bool Contract::accepts_head_dim(int d) const {
  if (!head_dim.contains(d)) return false;
  return head_dims.empty() || std::find(head_dims.begin(), head_dims.end(), d) != head_dims.end();
}

bool Contract::accepts_value_dim(int dv, int dk) const {
  if (dk_equals_dv) return dv == dk;
  if (!value_dim_range().contains(dv)) return false;
  return value_dims.empty() || std::find(value_dims.begin(), value_dims.end(), dv) != value_dims.end();
}

int Contract::fit_value_dim(int wanted, int dk) const {
  if (dk_equals_dv) return dk;
  std::vector<int> candidates = value_dims;
  if (candidates.empty()) candidates.push_back(static_cast<int>(value_dim_range().clamp(wanted)));
  int best = -1;
  for (int x : candidates) {
    if (x < 1 || !accepts_value_dim(x, dk)) continue;
    if (best < 0 || std::abs(x - wanted) < std::abs(best - wanted) ||
        (std::abs(x - wanted) == std::abs(best - wanted) && x < best))
      best = x;
  }
  return best > 0 ? best : static_cast<int>(value_dim_range().clamp(wanted));
}

std::string Contract::violation(const Problem& p) const {
  const Shape& s = p.shape;
  auto outside = [](const char* what, long long x, const Range& r) {
    return std::string(what) + " = " + std::to_string(x) + " is outside " +
           range_text(what, r).substr(std::string(what).size() + 1);
  };
  if (!accepts_head_dim(s.head_dim))
    return "Dk = " + std::to_string(s.head_dim) + " is not accepted (" +
           (head_dims.empty() ? range_text("Dk", head_dim) : "Dk in {" + list_text(head_dims) + "}") + ")";
  if (dk_equals_dv && s.value_dim != s.head_dim) return "Dv != Dk (the contract requires Dk == Dv)";
  if (!dk_equals_dv && !value_dim_range().contains(s.value_dim)) return outside("Dv", s.value_dim, value_dim_range());
  if (!accepts_value_dim(s.value_dim, s.head_dim))
    return "Dv = " + std::to_string(s.value_dim) + " is not accepted (Dv in {" + list_text(value_dims) + "})";
  if (!batch.contains(s.batch)) return outside("B", s.batch, batch);
  if (!heads.contains(s.heads)) return outside("H", s.heads, heads);
  if (!q_len.contains(s.q_len)) return outside("Tq", s.q_len, q_len);
  if (!k_len.contains(s.k_len)) return outside("Tk", s.k_len, k_len);
  if (!q_offset.contains(p.effective_q_offset())) return outside("q_offset", p.effective_q_offset(), q_offset);
  if (default_scale_only && p.scale && *p.scale != 1.0 / std::sqrt(double(s.head_dim)))
    return "an explicit scale (the contract allows only 1/sqrt(Dk))";
  if (causal_required && (!p.mask.causal || p.effective_q_offset() != s.k_len - s.q_len))
    return "not bottom-right causal (the contract requires causal attention)";
  if (self_attention_only && (s.q_len != s.k_len || p.effective_q_offset() != 0))
    return "not self-attention (the contract requires Tq == Tk and q_offset 0)";
  if (alibi_slopes == AlibiSlopes::kStandard && !p.modifiers.alibi_slopes.empty() &&
      p.modifiers.alibi_slopes != standard_alibi_slopes(s.heads, alibi_max_bias))
    return "ALiBi slopes other than the standard set for H = " + std::to_string(s.heads) +
           " (the contract accepts only those)";
  if (alibi_excludes_bias && !p.modifiers.alibi_slopes.empty() && !p.modifiers.bias.empty())
    return "ALiBi and a bias together (the contract takes one or the other)";
  if (max_abs_value > 0)
    if (const std::string v = value_beyond(p, max_abs_value); !v.empty()) return v;
  return {};
}

std::string Contract::summary() const {
  std::vector<std::string> parts;
  if (!head_dims.empty())
    parts.push_back("Dk in {" + list_text(head_dims) + "}");
  else if (!head_dim.unlimited())
    parts.push_back(range_text("Dk", head_dim));
  if (dk_equals_dv) parts.push_back("Dk == Dv");
  if (!dk_equals_dv && !value_dims.empty())
    parts.push_back("Dv in {" + list_text(value_dims) + "}");
  else if (!dk_equals_dv && !value_dim.unlimited())
    parts.push_back(range_text("Dv", value_dim));
  if (default_scale_only) parts.push_back("default scale");
  if (causal_required) parts.push_back("causal only");
  if (decode_only) parts.push_back("decode only");
  if (self_attention_only) parts.push_back("self-attention only (Tq == Tk, q_offset 0)");
  if (alibi_slopes == AlibiSlopes::kStandard) {
    char bias[32];
    std::snprintf(bias, sizeof bias, "%g", alibi_max_bias);
    parts.push_back(std::string("standard ALiBi slopes (max_bias ") + bias + ")");
  }
  if (alibi_excludes_bias) parts.push_back("ALiBi or bias, not both");
  if (max_abs_value > 0) parts.push_back("|V| <= " + number_text(max_abs_value));
  for (auto [name, r] : {std::pair{"B", batch}, {"H", heads}, {"Tq", q_len}, {"Tk", k_len}, {"q_offset", q_offset}})
    if (!r.unlimited()) parts.push_back(range_text(name, r));
  if (query_tile || key_tile) parts.push_back("tiles " + std::to_string(query_tile) + "x" + std::to_string(key_tile));
  std::string out;
  for (const std::string& part : parts) out += (out.empty() ? "" : ", ") + part;
  return out.empty() ? "any problem" : out;
}

bool Contract::open() const {
  Contract plain;
  plain.query_tile = query_tile, plain.key_tile = key_tile, plain.decode_lse_optional = decode_lse_optional;
  return *this == plain;
}

}  // namespace attest
