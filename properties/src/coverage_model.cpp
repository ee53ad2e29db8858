#include "attest/coverage_model.h"

#include <algorithm>

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
bool accepts_some(const Range& r, long long lo, long long hi) {
  return r.unlimited() || (r.max >= lo && r.min <= hi);
}

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
  if (!c.dk_equals_dv && (c.head_dim.unlimited() || c.head_dim.max > c.head_dim.min || c.head_dims.size() > 1))
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
  return axes;
}

std::vector<std::string> coverage_classes(const Problem& p, const Capabilities& caps) {
  const Shape& s = p.shape;
  std::vector<std::string> out;
  out.push_back(std::string("width: ") + (s.head_dim != s.value_dim ? "Dk != Dv" : s.head_dim >= 64 ? "production" : "small"));
  out.push_back(std::string("heads: ") + (s.heads == 1 ? "1" : s.heads <= 8 ? "2-8" : "> 8"));
  const int group = s.heads / s.kv_heads;
  out.push_back(std::string("group: ") + (group == 1 ? "1" : group == 2 ? "2" : ">= 4"));
  out.push_back(std::string("batch: ") + (s.batch == 1 ? "1" : s.batch <= 4 ? "2-4" : "> 4"));
  out.push_back("queries: " + (s.q_len <= 4 ? std::string("Tq <= 4") : length_class(s.q_len, tile_or_32(caps.contract.query_tile))));
  out.push_back("keys: " + length_class(s.k_len, tile_or_32(caps.contract.key_tile)));
  // In the axes' order (mask before modifier), so that pair names match all_targets'.
  const FeatureSet used = features_used_by(p);
  for (auto [axis, kind] : {std::pair{"mask: ", FeatureKind::kMaskTerm}, {"modifier: ", FeatureKind::kModifier}}) {
    const std::vector<Feature> terms = (used & FeatureSet::of_kind(kind)).members();
    if (terms.empty()) out.push_back(std::string(axis) + "none");
    for (Feature f : terms) out.push_back(axis + std::string(info(f).name));
  }
  out.push_back(std::string("inputs: ") + to_string(p.storage.q));
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
    for (std::size_t b = a + 1; b < classes.size(); ++b)
      if (axis_of(classes[a]) != axis_of(classes[b])) out.push_back(target_name({classes[a], classes[b]}));
  return out;
}

std::vector<std::string> all_targets(const std::vector<CoverageAxis>& axes, int strength) {
  std::vector<std::string> out;
  for (std::size_t a = 0; a < axes.size(); ++a)
    for (const std::string& x : axes[a].classes) {
      if (strength <= 1) {
        out.push_back(x);
        continue;
      }
      for (std::size_t b = a + 1; b < axes.size(); ++b)
        for (const std::string& y : axes[b].classes) out.push_back(target_name({x, y}));
    }
  return out;
}

}  // namespace attest
