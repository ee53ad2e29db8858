#include "attest/properties/coverage_model.h"

#include <algorithm>
#include <cmath>

#include "attest/reference/reference.h"
#include "problem_edits.h"

namespace attest {
namespace {

int tile_or_32(int tile) { return tile > 1 ? tile : 32; }

std::string length_class(int len, int tile) {
  if (len < tile) return "below a tile";
  return len % tile == 0 ? "whole tiles" : "partial last tile";
}

std::vector<std::string> qualified(const std::string& axis, const std::vector<std::string>& values) {
  std::vector<std::string> out;
  for (const std::string& v : values) out.push_back(axis + ": " + v);
  return out;
}

// Whether the contract accepts some value in [lo, hi] of a range.
bool accepts_some(const Range& r, long long lo, long long hi) { return r.unlimited() || (r.max >= lo && r.min <= hi); }

}  // namespace

std::vector<CoverageAxis> coverage_axes(const Capabilities& caps) {
  const Contract& c = caps.contract;
  std::vector<CoverageAxis> axes;
  auto add = [&](const std::string& axis, const std::vector<std::string>& values) {
    if (values.size() > 1) axes.push_back({axis, qualified(axis, values)});  // one class: nothing to pair
  };
  std::vector<std::string> width = {"small"};
  for (int d : {64, 80, 96, 112, 128, 192, 256})
    if (c.accepts_head_dim(d)) {
      width.push_back("production");
      break;
    }
  const bool value_widths = !c.value_dim.unlimited() || !c.value_dims.empty();  // ABI 2.7: Dv's own
  if (!c.dk_equals_dv &&
      (value_widths || c.head_dim.unlimited() || c.head_dim.max > c.head_dim.min || c.head_dims.size() > 1))
    width.push_back("Dk != Dv");
  add("width", width);
  std::vector<std::string> heads;
  for (auto [name, lo, hi] : {std::tuple{"1", 1, 1}, {"2-8", 2, 8}, {"> 8", 9, 1 << 20}})
    if (accepts_some(c.heads, lo, hi)) heads.push_back(name);
  add("heads", heads);
  if (caps.declares(Feature::kGqa)) add("group", {"1", "2", ">= 4"});
  std::vector<std::string> batch;
  for (auto [name, lo, hi] : {std::tuple{"1", 1, 1}, {"2-4", 2, 4}, {"> 4", 5, 1 << 20}})
    if (accepts_some(c.batch, lo, hi)) batch.push_back(name);
  add("batch", batch);
  if (caps.forward()) {
    add("queries", {"Tq <= 4", "below a tile", "whole tiles", "partial last tile"});
    add("keys", {"below a tile", "whole tiles", "partial last tile"});
  }
  std::vector<std::string> mask = {"none"}, modifier = {"none"};
  for (Feature f : caps.features.members()) {
    if (info(f).kind == FeatureKind::kMaskTerm) mask.push_back(info(f).name);
    if (info(f).kind == FeatureKind::kModifier) modifier.push_back(info(f).name);
  }
  if (c.causal_required) mask.erase(mask.begin());  // never without causal
  add("mask", mask);
  add("modifier", modifier);
  const Precision& p = caps.precision;
  if (p.q == Scalar::kF32 && p.k == Scalar::kF32 && p.v == Scalar::kF32) add("inputs", {"f32", "bf16", "f16"});
  std::vector<std::string> values = {"ordinary", "range edge", "subnormal"};
  if (caps.forward() && !(caps.features & FeatureSet::of_kind(FeatureKind::kMaskTerm)).empty())
    values.push_back("poison");  // a key no row sees, holding what a masked key may hold
  add("values", values);
  return axes;
}

std::vector<std::string> value_regimes(const Problem& p) {
  std::vector<std::string> out;
  // Range edge: logits of 1e4 and beyond, or values past the square root of their format's range.
  double vmax = 0;
  for (float x : p.v)
    if (std::isfinite(x)) vmax = std::max<double>(vmax, std::fabs(x));
  if (max_abs_dot(p) * std::fabs(p.effective_scale()) >= 1e4 || vmax >= std::sqrt(info(p.storage.v).max_finite))
    out.push_back("range edge");
  auto subnormal = [](const std::vector<float>& xs, Scalar format) {
    const double normal = info(format).min_normal;
    return std::any_of(xs.begin(), xs.end(), [&](float x) { return x != 0.0f && std::fabs(x) < normal; });
  };
  if (subnormal(p.q, p.storage.q) || subnormal(p.k, p.storage.k) || subnormal(p.v, p.storage.v))
    out.push_back("subnormal");
  // Poison: a key no query row of its batch sees, whose K or V row is non-finite or huge.
  auto poisonous = [](float x) { return !std::isfinite(x) || std::fabs(x) >= 1e29f; };
  if (std::any_of(p.k.begin(), p.k.end(), poisonous) || std::any_of(p.v.begin(), p.v.end(), poisonous)) {
    const Shape& s = p.shape;
    const KeySet unseen = unseen_keys(p, reference_mask(p));
    bool found = false;
    for (int b = 0; b < s.batch; ++b)
      for (int j = 0; j < s.k_len; ++j)
        for (int g = 0; g < s.kv_heads && unseen[b][j]; ++g) {
          const std::size_t kv = (std::size_t(b) * s.kv_heads + g) * s.k_len + j;
          const auto k = p.k.begin() + kv * s.head_dim, v = p.v.begin() + kv * s.value_dim;
          found = found || std::any_of(k, k + s.head_dim, poisonous) || std::any_of(v, v + s.value_dim, poisonous);
        }
    if (found) out.push_back("poison");
  }
  if (out.empty()) out.push_back("ordinary");
  return out;
}

std::vector<std::string> coverage_classes(const Problem& p, const Capabilities& caps) {
  const Shape& s = p.shape;
  std::vector<std::string> out;
  out.push_back(std::string("width: ") + (s.head_dim != s.value_dim ? "Dk != Dv"
                                          : s.head_dim >= 64        ? "production"
                                                                    : "small"));
  out.push_back(std::string("heads: ") + (s.heads == 1 ? "1" : s.heads <= 8 ? "2-8" : "> 8"));
  const int group = s.heads / s.kv_heads;
  out.push_back(std::string("group: ") + (group == 1 ? "1" : group == 2 ? "2" : ">= 4"));
  out.push_back(std::string("batch: ") + (s.batch == 1 ? "1" : s.batch <= 4 ? "2-4" : "> 4"));
  out.push_back("queries: " +
                (s.q_len <= 4 ? std::string("Tq <= 4") : length_class(s.q_len, tile_or_32(caps.contract.query_tile))));
  out.push_back("keys: " + length_class(s.k_len, tile_or_32(caps.contract.key_tile)));
  // In the axes' order (mask before modifier), so that pair names match all_targets'.
  const FeatureSet used = features_used_by(p);
  for (auto [axis, kind] : {std::pair{"mask: ", FeatureKind::kMaskTerm}, {"modifier: ", FeatureKind::kModifier}}) {
    const std::vector<Feature> terms = (used & FeatureSet::of_kind(kind)).members();
    if (terms.empty()) out.push_back(std::string(axis) + "none");
    for (Feature f : terms) out.push_back(axis + std::string(info(f).name));
  }
  out.push_back(std::string("inputs: ") + to_string(p.storage.q));
  for (const std::string& regime : value_regimes(p)) out.push_back("values: " + regime);
  return out;
}

std::string axis_of(const std::string& cls) { return cls.substr(0, cls.find(": ")); }
std::string value_of(const std::string& cls) {
  const std::size_t at = cls.find(": ");
  return at == std::string::npos ? cls : cls.substr(at + 2);
}

std::string target_name(const std::vector<std::string>& classes) {
  std::string out;
  for (const std::string& c : classes) out += (out.empty() ? "" : " + ") + c;
  return out;
}

std::vector<std::string> target_classes(const std::string& name) {
  std::vector<std::string> out;
  for (std::size_t start = 0;;) {
    const std::size_t at = name.find(" + ", start);
    out.push_back(name.substr(start, at == std::string::npos ? std::string::npos : at - start));
    if (at == std::string::npos) return out;
    start = at + 3;
  }
}

std::vector<std::string> targets_of(const std::vector<std::string>& classes, int strength) {
  if (strength <= 1) return classes;
  std::vector<std::string> out;
  for (std::size_t a = 0; a < classes.size(); ++a)
    for (std::size_t b = a + 1; b < classes.size(); ++b) {
      if (axis_of(classes[a]) == axis_of(classes[b])) continue;
      if (strength == 2) {
        out.push_back(target_name({classes[a], classes[b]}));
        continue;
      }
      for (std::size_t c = b + 1; c < classes.size(); ++c)
        if (axis_of(classes[c]) != axis_of(classes[a]) && axis_of(classes[c]) != axis_of(classes[b]))
          out.push_back(target_name({classes[a], classes[b], classes[c]}));
    }
  return out;
}

std::vector<std::string> all_targets(const std::vector<CoverageAxis>& axes, int strength) {
  std::vector<std::string> out;
  // Every choice of `strength` axes in table order, one class of each.
  auto choose = [&](auto&& self, std::size_t from, std::vector<std::string>& picked) -> void {
    if (static_cast<int>(picked.size()) == std::max(strength, 1)) {
      out.push_back(target_name(picked));
      return;
    }
    for (std::size_t a = from; a < axes.size(); ++a)
      for (const std::string& x : axes[a].classes) {
        picked.push_back(x);
        self(self, a + 1, picked);
        picked.pop_back();
      }
  };
  std::vector<std::string> picked;
  choose(choose, 0, picked);
  return out;
}

}  // namespace attest
