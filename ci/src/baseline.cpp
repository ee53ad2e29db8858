#include "baseline.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "attest/file_io.h"
#include "attest/safe_text.h"
#include "certificate_format.h"

namespace attest {
namespace {

using nlohmann::json;

[[noreturn]] void bad(const std::string& where, const std::string& why) {
  throw BaselineError("baseline: " + where + " " + why);
}

const json& member(const json& object, const std::string& where, const char* key) {
  if (!object.is_object()) bad(where, "must be an object");
  if (!object.contains(key)) bad(where + "." + key, "is missing");
  return object[key];
}

std::string text(const json& object, const std::string& where, const char* key) {
  const json& j = member(object, where, key);
  if (!j.is_string()) bad(where + "." + key, "must be a string");
  return safe_text(j.get<std::string>(), 1024);
}

const json& array(const json& object, const std::string& where, const char* key) {
  const json& j = member(object, where, key);
  if (!j.is_array()) bad(where + "." + key, "must be an array");
  return j;
}

BaselineCheck check_of(const json& j, const std::string& where) {
  BaselineCheck c;
  c.stage = text(j, where, "stage");
  c.check = text(j, where, "check");
  c.verdict = text(j, where, "verdict");
  if (c.verdict != "pass" && c.verdict != "fail" && c.verdict != "n/a")
    bad(where + ".verdict", "must be \"pass\", \"fail\" or \"n/a\", got \"" + c.verdict + "\"");
  const json& cases = member(j, where, "cases");
  if (!cases.is_number_integer() || cases.get<long long>() < 0) bad(where + ".cases", "must be a count");
  c.cases = static_cast<long>(cases.get<long long>());
  const json& util = member(j, where, "worst_utilisation");
  if (util.is_number()) c.worst_utilisation = util.get<double>();
  else if (!util.is_null()) bad(where + ".worst_utilisation", "must be a number or null");
  return c;
}

}  // namespace

Baseline parse_baseline(const std::string& text_in) {
  json doc;
  try {
    doc = parse_json(text_in, "baseline");
  } catch (const FileError& e) {
    throw BaselineError(e.what());
  }
  if (!doc.is_object() || !doc.contains("format") || doc["format"] != kCertificateFormat)
    throw BaselineError("baseline: not an attest certificate (format must be \"" + std::string(kCertificateFormat) + "\")");
  const json& version = member(doc, "certificate", "version");
  if (version != kCertificateVersion)
    throw BaselineError(fmt::format("baseline: certificate version {} (this attest reads version {})",
                                    safe_text(version.dump(-1, ' ', false, json::error_handler_t::replace), 20),
                                    kCertificateVersion));
  Baseline baseline;
  const json& kernels = array(doc, "certificate", "kernels");
  for (std::size_t k = 0; k < kernels.size(); ++k) {
    const std::string where = fmt::format("kernels[{}]", k);
    BaselineKernel kernel;
    kernel.name = text(kernels[k], where, "name");
    const json& checks = array(kernels[k], where, "checks");
    for (std::size_t c = 0; c < checks.size(); ++c)
      kernel.checks.push_back(check_of(checks[c], fmt::format("{}.checks[{}]", where, c)));
    baseline.kernels.push_back(std::move(kernel));
  }
  return baseline;
}

Baseline read_baseline(const std::string& path) {
  try {
    return parse_baseline(read_file(path));
  } catch (const FileError& e) {
    throw BaselineError("baseline: " + std::string(e.what()));
  }
}

}  // namespace attest
