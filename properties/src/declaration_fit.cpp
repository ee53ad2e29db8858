#include "attest/properties/declaration_fit.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <tuple>
#include <vector>

#include "attest/kernels/contract.h"
#include "attest/properties/cases.h"
#include "attest/properties/oracle.h"
#include "declared_range.h"

namespace attest {
namespace {

// The accepted width nearest to `d` (even when RoPE needs it, if any even width is accepted).
int nearest_width(int d, const Contract& c, bool even) {
  std::vector<int> candidates = c.head_dims;
  if (candidates.empty()) {
    const int clamped = static_cast<int>(c.head_dim.clamp(d));
    candidates = {clamped, clamped + 1, clamped - 1};
  }
  int best = -1;
  for (int x : candidates) {
    if (x < 1 || !c.accepts_head_dim(x) || (even && x % 2)) continue;
    if (best < 0 || std::abs(x - d) < std::abs(best - d)) best = x;
  }
  return best > 0 ? best : static_cast<int>(c.head_dim.clamp(d));
}

double rms(const std::vector<float>& v) {
  double sum = 0;
  std::size_t n = 0;
  for (float x : v)
    if (std::isfinite(x)) sum += double(x) * x, ++n;
  return n && sum > 0 ? std::sqrt(sum / n) : 1.0;
}

// Per-batch and per-token mask arrays carried over to a new shape (indices wrap around).
void reshape_masks(Problem& p, const Shape& old) {
  const Shape& s = p.shape;
  MaskSpec& m = p.mask;
  auto per_batch = [&](std::vector<int>& v, int limit) {
    if (v.empty()) return;
    std::vector<int> out;
    for (int b = 0; b < s.batch; ++b) out.push_back(std::min(v[b % old.batch], limit));
    v = out;
  };
  per_batch(m.kv_valid, s.k_len);
  per_batch(m.q_valid, s.q_len);
  auto per_token = [&](std::vector<int>& v, int old_len, int len) {
    if (v.empty()) return;
    std::vector<int> out;
    for (int b = 0; b < s.batch; ++b)
      for (int t = 0; t < len; ++t) out.push_back(v[std::size_t(b % old.batch) * old_len + t % old_len]);
    v = out;
  };
  per_token(m.q_segment, old.q_len, s.q_len);
  ScoreModifiers& md = p.modifiers;
  auto per_head = [&](std::vector<float>& v) {
    if (v.empty()) return;
    std::vector<float> out;
    for (int h = 0; h < s.heads; ++h) out.push_back(v[h % old.heads]);
    v = out;
  };
  per_head(md.alibi_slopes);
  per_head(md.sinks);
  if (!md.bias.empty()) {
    std::vector<float> out;
    for (int b = 0; b < (md.bias_per_batch ? s.batch : 1); ++b)
      for (int h = 0; h < (md.bias_per_head ? s.heads : 1); ++h)
        for (int i = 0; i < s.q_len; ++i)
          for (int j = 0; j < s.k_len; ++j)
            out.push_back(md.bias[md.bias_index(old, b % old.batch, h % old.heads, i % old.q_len, j % old.k_len)]);
    md.bias = out;
  }
  per_token(m.k_segment, old.k_len, s.k_len);
  if (!m.explicit_mask.empty()) {
    std::vector<std::uint8_t> out;
    for (int b = 0; b < s.batch; ++b)
      for (int i = 0; i < s.q_len; ++i)
        for (int j = 0; j < s.k_len; ++j)
          out.push_back(
              m.explicit_mask[(std::size_t(b % old.batch) * old.q_len + i % old.q_len) * old.k_len + j % old.k_len]);
    m.explicit_mask = out;
  }
}

}  // namespace

std::optional<Problem> fit_to_declaration(const Problem& original, const Capabilities& caps, std::string* why) {
  const Contract& c = caps.contract;
  Problem p = original;
  for (Feature f : features_used_by(p).minus(caps.features).members()) remove_feature(info(f), p);

  Shape& s = p.shape;
  s.batch = static_cast<int>(c.batch.clamp(s.batch));
  s.heads = static_cast<int>(c.heads.clamp(s.heads));
  if (s.heads % s.kv_heads != 0 || !caps.declares(Feature::kGqa)) s.kv_heads = s.heads;
  s.q_len = static_cast<int>(c.q_len.clamp(s.q_len));
  s.k_len = static_cast<int>(c.k_len.clamp(s.k_len));
  if (c.self_attention_only) s.q_len = s.k_len = c.square_length(std::min(s.q_len, s.k_len));  // the smaller: as cheap
  s.head_dim = nearest_width(s.head_dim, c, p.rope.enabled);
  if (p.rope.enabled && s.head_dim % 2) p.rope.enabled = false;  // no even width accepted
  s.value_dim = c.fit_value_dim(s.value_dim, s.head_dim);
  if (c.causal_required) p.mask.causal = true, p.q_offset.reset();
  c.fit_alibi_or_bias(p, fingerprint(original) % 2);
  if (c.self_attention_only) p.q_offset.reset();  // Tq == Tk: the default offset is 0
  if (c.default_scale_only) p.scale.reset();
  if (!c.q_offset.unlimited() && !c.q_offset.contains(p.effective_q_offset()))
    p.q_offset = c.q_offset.clamp(p.effective_q_offset());

  const Shape& old = original.shape;
  const bool reshaped = s.batch != old.batch || s.heads != old.heads || s.kv_heads != old.kv_heads ||
                        s.q_len != old.q_len || s.k_len != old.k_len || s.head_dim != old.head_dim ||
                        s.value_dim != old.value_dim;
  if (reshaped) {
    reshape_masks(p, old);
    p.resize_buffers();
    const double magnitude = rms(original.q);
    fill_random(p, fingerprint(original), magnitude);
    const double value_magnitude = rms(original.v);
    std::mt19937_64 rng(fingerprint(original) ^ 0x5bd1e995);
    std::uniform_real_distribution<double> unit(-std::sqrt(3.0), std::sqrt(3.0));
    for (float& x : p.v) x = round_to(static_cast<float>(unit(rng) * value_magnitude), p.storage.v);
  }
  // Inputs in the kernel's storage formats: rounded there, saturating at the format's largest value.
  const Precision& precision = caps.precision;
  for (auto [values, from, to] :
       {std::tuple{&p.q, &p.storage.q, precision.q}, std::tuple{&p.k, &p.storage.k, precision.k},
        std::tuple{&p.v, &p.storage.v, precision.v}, std::tuple{&p.modifiers.bias, &p.storage.bias, precision.bias}}) {
    if (to == Scalar::kF32 || *from == to) continue;
    const float largest = static_cast<float>(info(to).max_finite);
    for (float& x : *values)
      if (std::isfinite(x)) x = round_to(std::clamp(x, -largest, largest), to);
    *from = to;
  }
  // The V of keys some query sees within the contract's value range; a masked key's (poison, in a
  // grid or fuzz problem) is the input domain's, which the contract leaves alone (Contract::violation).
  if (c.max_abs_value > 0) {
    const std::vector<std::vector<char>> seen = keys_seen(p);
    const Shape& s = p.shape;
    for (int b = 0; b < s.batch; ++b)
      for (int g = 0; g < s.kv_heads; ++g)
        for (int j = 0; j < s.k_len; ++j) {
          if (!seen[b][j]) continue;
          float* row = &p.v[((std::size_t(b) * s.kv_heads + g) * s.k_len + j) * s.value_dim];
          for (int e = 0; e < s.value_dim; ++e)
            if (std::isfinite(row[e]))
              row[e] = round_to(std::clamp(row[e], -float(c.max_abs_value), float(c.max_abs_value)), p.storage.v);
        }
  }
  // And within the range of the format each input is rounded to on entry.
  for (auto [values, entry] :
       {std::pair{&p.q, precision.q_entry}, {&p.k, precision.k_entry}, {&p.v, precision.v_entry}}) {
    const float largest = static_cast<float>(info(entry).max_finite);
    for (float& x : *values)
      if (std::isfinite(x)) x = std::clamp(x, -largest, largest);
  }
  fit_to_declared_range(p, caps);  // logits and P.V sums the declared arithmetic holds
  p.fit_to_storage();              // K and V of a scaled format a group at a time
  // A kernel that computes the standard ALiBi slopes itself gets exactly those for its H.
  c.fit_alibi_slopes(p);
  if (const std::string reason = caps.unsupported_because(p); !reason.empty()) {
    if (why) *why = reason;
    return std::nullopt;
  }
  return p;
}

}  // namespace attest
