#include "baseline.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "attest/properties/file_io.h"
#include "attest/properties/safe_text.h"
#include "certificate_format.h"
#include "json_fields.h"

namespace attest {
namespace {

using nlohmann::json;

using json_fields::array;
using json_fields::bad;
using json_fields::count;
using json_fields::flag;
using json_fields::flag_or_false;
using json_fields::member;
using json_fields::strings;

// Text from the file, bounded for messages and comparisons.
std::string text(const json& object, const std::string& where, const char* key) {
  return safe_text(json_fields::text(object, where, key), 1024);
}

std::vector<std::string> texts(const json& object, const std::string& where, const char* key) {
  std::vector<std::string> out = json_fields::texts(object, where, key);
  for (std::string& s : out) s = safe_text(s, 256);
  return out;
}

BaselineCheck check_of(const json& j, const std::string& where, int version) {
  BaselineCheck c;
  c.stage = text(j, where, "stage");
  c.check = text(j, where, "check");
  c.verdict = text(j, where, "verdict");
  const bool known = version == 1 ? (c.verdict == "pass" || c.verdict == "fail" || c.verdict == "n/a")
                                  : (c.verdict == "pass" || c.verdict == "fail" || c.verdict == "not covered" ||
                                     c.verdict == "insufficient");
  if (!known)
    bad(where + ".verdict",
        "is not a verdict of a version " + std::to_string(version) + " certificate: \"" + c.verdict + "\"");
  c.cases = count(j, where, "cases");
  c.effective = version == 1 ? c.cases : count(j, where, "effective_cases");
  const json& util = member(j, where, "worst_utilisation");
  if (util.is_number())
    c.worst_utilisation = util.get<double>();
  else if (!util.is_null())
    bad(where + ".worst_utilisation", "must be a number or null");
  return c;
}

BaselineClaims claims_of(const json& kernel, const std::string& where) {
  BaselineClaims c;
  c.exercised_features = texts(kernel, where, "exercised_features");
  const std::string d = where + ".descriptor";
  const json& descriptor = member(kernel, where, "descriptor");
  c.features = texts(descriptor, d, "features");
  const json& precision = member(descriptor, d, "precision");
  if (precision.is_string()) {  // one format for everything
    for (const char* field : {"q", "k", "v", "o", "scores", "p", "accumulator"})
      c.precision[field] = text(descriptor, d, "precision");
  } else {
    for (const char* field : {"q", "k", "v", "o", "scores", "p", "accumulator"})
      c.precision[field] = text(precision, d + ".precision", field);
    for (const char* field :
         {"bias", "q_entry", "k_entry", "v_entry", "weight_sum"})  // added later: absent in older files
      if (precision.contains(field)) c.precision[field] = text(precision, d + ".precision", field);
    if (precision.contains("flush_subnormals")) {
      if (!precision["flush_subnormals"].is_boolean()) bad(d + ".precision.flush_subnormals", "must be a boolean");
      c.flush_subnormals = precision["flush_subnormals"].get<bool>();
    }
  }
  const json& ulps = member(descriptor, d, "exp_ulps");
  if (!ulps.is_number()) bad(d + ".exp_ulps", "must be a number");
  c.exp_ulps = ulps.get<double>();
  const std::string t = d + ".contract";
  const json& contract = member(descriptor, d, "contract");
  const json& dims = array(contract, t, "head_dims");
  for (std::size_t i = 0; i < dims.size(); ++i) {
    if (!dims[i].is_number_integer()) bad(fmt::format("{}.head_dims[{}]", t, i), "must be an integer");
    c.head_dims.push_back(dims[i].get<long long>());
  }
  for (const char* name : {"head_dim", "batch", "heads", "q_len", "k_len", "q_offset"}) {
    const json& r = member(contract, t, name);
    if (r.is_null()) {
      c.ranges[name] = std::nullopt;
      continue;
    }
    if (!r.is_array() || r.size() != 2 || !r[0].is_number_integer() || !r[1].is_number_integer())
      bad(t + "." + name, "must be null or [min, max]");
    c.ranges[name] = std::pair{r[0].get<long long>(), r[1].get<long long>()};
  }
  for (const char* name : {"dk_equals_dv", "default_scale_only", "causal_required", "decode_only"})
    c.restrictions[name] = flag(contract, t, name);
  c.restrictions["self_attention_only"] = flag_or_false(contract, t, "self_attention_only");
  c.restrictions["standard_alibi_slopes"] =
      contract.contains("alibi_slopes") && text(contract, t, "alibi_slopes") == "standard";
  c.contract_summary = text(contract, t, "summary");
  for (const char* field : kComparedDeclarationFields)
    if (descriptor.contains(field))
      c.declaration[field] = safe_text(descriptor[field].dump(-1, ' ', false, json::error_handler_t::replace), 1024);
  return c;
}

// Every field's error is a FieldError here; parse_baseline names the document.
Baseline parse_fields(const std::string& text_in) {
  json doc;
  try {
    doc = parse_json(text_in, "baseline");
  } catch (const FileError& e) {
    throw BaselineError(e.what());
  }
  if (!doc.is_object() || !doc.contains("format") || doc["format"] != kCertificateFormat)
    throw BaselineError("baseline: not an attest certificate (format must be \"" + std::string(kCertificateFormat) +
                        "\")");
  const json& version = member(doc, "certificate", "version");
  if (version != 1 && version != kCertificateVersion)
    throw BaselineError(fmt::format("baseline: certificate version {} (this attest reads version {})",
                                    safe_text(version.dump(-1, ' ', false, json::error_handler_t::replace), 20),
                                    kCertificateVersion));
  Baseline baseline;
  baseline.version = version.get<int>();
  if (doc.contains("options")) baseline.options = strings(doc, "certificate", "options");
  const json& kernels = array(doc, "certificate", "kernels");
  // A baseline of no kernel would let every run pass as "no regression".
  if (kernels.empty()) throw BaselineError("baseline: kernels is empty: a baseline certifies at least one kernel");
  for (std::size_t k = 0; k < kernels.size(); ++k) {
    const std::string where = fmt::format("kernels[{}]", k);
    BaselineKernel kernel;
    kernel.name = text(kernels[k], where, "name");
    const json& checks = array(kernels[k], where, "checks");
    for (std::size_t c = 0; c < checks.size(); ++c)
      kernel.checks.push_back(check_of(checks[c], fmt::format("{}.checks[{}]", where, c), baseline.version));
    const json& paths = array(kernels[k], where, "paths");
    for (std::size_t i = 0; i < paths.size(); ++i) {
      const std::string at = fmt::format("{}.paths[{}]", where, i);
      kernel.paths[text(paths[i], at, "path")] = count(paths[i], at, "cases");
    }
    if (baseline.version >= 2) kernel.claims = claims_of(kernels[k], where);
    baseline.kernels.push_back(std::move(kernel));
  }
  return baseline;
}

}  // namespace

Baseline parse_baseline(const std::string& text) {
  try {
    return parse_fields(text);
  } catch (const FieldError& e) {
    throw BaselineError("baseline: " + std::string(e.what()));
  }
}

Baseline read_baseline(const std::string& path) {
  try {
    return parse_baseline(read_file(path, kMaxCertificateBytes));
  } catch (const FileError& e) {
    throw BaselineError("baseline: " + std::string(e.what()));
  }
}

}  // namespace attest
