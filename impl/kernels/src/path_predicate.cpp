#include "attest/kernels/path_predicate.h"

#include <fmt/format.h>

namespace attest {
namespace {

void range_text(std::vector<std::string>& out, const char* name, const Range& r) {
  if (r.unlimited()) return;
  if (r.min == r.max)
    out.push_back(fmt::format("{} = {}", name, r.min));
  else if (r.max >= (1LL << 40))
    out.push_back(fmt::format("{} >= {}", name, r.min));
  else if (r.min <= 1)
    out.push_back(fmt::format("{} <= {}", name, r.max));
  else
    out.push_back(fmt::format("{} in {}..{}", name, r.min, r.max));
}

}  // namespace

bool PathPredicate::matches(const Problem& p) const {
  const Shape& s = p.shape;
  if (!batch.contains(s.batch) || !heads.contains(s.heads) || !q_len.contains(s.q_len) || !k_len.contains(s.k_len) ||
      !head_dim.contains(s.head_dim) || !value_dim.contains(s.value_dim))
    return false;
  if (head_dim_multiple > 0 && s.head_dim % head_dim_multiple != 0) return false;
  if (value_dim_multiple > 0 && s.value_dim % value_dim_multiple != 0) return false;
  if (k_len_multiple > 0 && (s.k_len % k_len_multiple == 0) == k_len_not_multiple) return false;
  const FeatureSet used = features_used_by(p);
  if (!required.subset_of(used) || !(used & excluded).empty()) return false;
  return !no_mask || (used & FeatureSet::of_kind(FeatureKind::kMaskTerm)).empty();
}

std::string PathPredicate::summary() const {
  std::vector<std::string> parts;
  range_text(parts, "B", batch);
  range_text(parts, "H", heads);
  range_text(parts, "Tq", q_len);
  range_text(parts, "Tk", k_len);
  range_text(parts, "Dk", head_dim);
  range_text(parts, "Dv", value_dim);
  if (head_dim_multiple > 0) parts.push_back(fmt::format("Dk % {} = 0", head_dim_multiple));
  if (value_dim_multiple > 0) parts.push_back(fmt::format("Dv % {} = 0", value_dim_multiple));
  if (k_len_multiple > 0) parts.push_back(fmt::format("Tk % {} {} 0", k_len_multiple, k_len_not_multiple ? "!=" : "="));
  if (!required.empty()) parts.push_back("with " + required.joined(" and "));
  if (!excluded.empty()) parts.push_back("without " + excluded.joined(" or "));
  if (no_mask) parts.push_back("no mask");
  std::string out = path + ":";
  if (parts.empty()) out += " any problem";
  for (std::size_t i = 0; i < parts.size(); ++i) out += (i ? ", " : " ") + parts[i];
  if (key_tile > 0) out += fmt::format(" (key tile {})", key_tile);
  return out;
}

std::string PathPredicate::invalid_because() const {
  if (path.empty()) return "a declared path has no name";
  for (const Range* r : {&batch, &heads, &q_len, &k_len, &head_dim, &value_dim})
    if (!r->unlimited() && (r->min > r->max || r->min < 0))
      return fmt::format("path {}: an empty or negative range", path);
  if (head_dim_multiple < 0 || value_dim_multiple < 0 || k_len_multiple < 0)
    return fmt::format("path {}: a negative multiple", path);
  if (key_tile < 0 || key_tile > kMaxContractTile)
    return fmt::format("path {}: key tile {} outside [0, {}]", path, key_tile, kMaxContractTile);
  if (k_len_not_multiple && k_len_multiple <= 1)
    return fmt::format("path {}: Tk % {} != 0 takes no problem", path, k_len_multiple);
  if (!(required & excluded).empty())
    return fmt::format("path {}: {} both required and excluded", path, (required & excluded).joined());
  if (no_mask && !(required & FeatureSet::of_kind(FeatureKind::kMaskTerm)).empty())
    return fmt::format("path {}: requires a mask term and no mask", path);
  return "";
}

const PathPredicate* declared_path_for(const std::vector<PathPredicate>& paths, const Problem& p) {
  for (const PathPredicate& d : paths)
    if (d.matches(p)) return &d;
  return nullptr;
}

std::string declared_path_violation(const std::vector<PathPredicate>& paths, const Problem& p,
                                    const std::string& served) {
  if (paths.empty()) return "";
  const PathPredicate* expected = declared_path_for(paths, p);
  if (expected && expected->path == served) return "";
  if (expected)
    return fmt::format("served by path {}, but the kernel declares that {} takes this problem ({})", served,
                       expected->path, expected->summary());
  for (const PathPredicate& d : paths)
    if (d.path == served)
      return fmt::format("served by path {}, whose declared predicate ({}) this problem does not meet", served,
                         d.summary());
  return "";
}

}  // namespace attest
