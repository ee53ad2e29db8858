#include "attest/properties/problem_file.h"

#include <fmt/format.h>

#include <cmath>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>

#include "attest/model/problem_fields.h"
#include "attest/properties/file_io.h"
#include "attest/properties/safe_text.h"

namespace attest {
namespace {

using nlohmann::json;

[[noreturn]] void bad(const std::string& field, const std::string& why) {
  throw ProblemFileError(fmt::format("field '{}' {}", field, why));
}

// The JSON node of a dotted name ("mask.window" -> doc["mask"]["window"]).
std::vector<std::string> parts_of(const std::string& name) {
  std::vector<std::string> parts;
  std::size_t start = 0;
  for (std::size_t dot; (dot = name.find('.', start)) != std::string::npos; start = dot + 1)
    parts.push_back(name.substr(start, dot - start));
  parts.push_back(name.substr(start));
  return parts;
}

// A short, printable rendering of a JSON value for an error message.
std::string preview(const json& j) { return safe_text(j.dump(-1, ' ', false, json::error_handler_t::replace), 40); }

json float_value(float x) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
  return x;
}

// Writes every field under its dotted name.
struct Writer {
  json doc = json::object();
  json& at(const std::string& name) {
    json* node = &doc;
    for (const std::string& part : parts_of(name)) node = &(*node)[part];
    return *node;
  }
  template <typename T>
  void integer(const char* name, const T& x, long long, long long, bool = false) {
    at(name) = x;
  }
  template <typename T>
  void optional_integer(const char* name, const std::optional<T>& x, long long, long long) {
    if (x) at(name) = *x;
  }
  void number(const char* name, double x, bool = false) { at(name) = x; }
  void optional_number(const char* name, const std::optional<double>& x) {
    if (x) at(name) = *x;
  }
  void boolean(const char* name, bool x) { at(name) = x; }
  void precision(const char* name, Scalar x) { at(name) = to_string(x); }
  void integers(const char* name, const std::vector<int>& x, long long, long long) { at(name) = x; }
  void flags(const char* name, const std::vector<std::uint8_t>& x) { at(name) = x; }
  void floats(const char* name, const std::vector<float>& x, bool = false) {
    json out = json::array();
    for (float f : x) out.push_back(float_value(f));
    at(name) = std::move(out);
  }
};

// Reads every field with its exact type and range; a field the list does not know is an error.
struct Reader {
  const json& doc;
  std::set<std::string> seen;

  const json* find(const std::string& name, bool required) {
    const json* node = &doc;
    std::string path = "problem";
    for (const std::string& part : parts_of(name)) {
      if (!node->is_object()) bad(path, "must be an object");
      path += "." + part;
      if (!node->contains(part)) {
        if (required) bad(path, "is missing");
        return nullptr;
      }
      node = &node->at(part);
    }
    seen.insert(name);
    return node;
  }
  static long long checked_integer(const std::string& field, const json& j, long long lo, long long hi) {
    if (!j.is_number_integer()) bad(field, "must be an integer, got " + preview(j));
    const bool too_big = j.is_number_unsigned() && j.get<std::uint64_t>() > std::uint64_t(hi);
    const long long x = too_big ? hi : j.get<long long>();
    if (too_big || x < lo || x > hi) bad(field, fmt::format("must lie in [{}, {}], got {}", lo, hi, preview(j)));
    return x;
  }
  template <typename T>
  void integer(const char* name, T& x, long long lo, long long hi, bool required = false) {
    if (const json* j = find(name, required))
      x = static_cast<T>(checked_integer(std::string("problem.") + name, *j, lo, hi));
  }
  // GCC 12 cannot follow the feature table's member pointers into MaskSpec and warns that the
  // write might land on the bool before them (a false -Wstringop-overflow).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstringop-overflow"
#endif
  template <typename T>
  void optional_integer(const char* name, std::optional<T>& x, long long lo, long long hi) {
    if (const json* j = find(name, false); j && !j->is_null())
      x = static_cast<T>(checked_integer(std::string("problem.") + name, *j, lo, hi));
  }
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
  void number(const char* name, double& x, bool required = false) {
    if (const json* j = find(name, required)) {
      if (!j->is_number() || !std::isfinite(j->get<double>()))
        bad(std::string("problem.") + name, "must be a finite number");
      x = j->get<double>();
    }
  }
  void optional_number(const char* name, std::optional<double>& x) {
    if (const json* j = find(name, false); j && !j->is_null()) {
      double value = 0;
      number(name, value);
      x = value;
    }
  }
  void boolean(const char* name, bool& x) {
    if (const json* j = find(name, false)) {
      if (!j->is_boolean()) bad(std::string("problem.") + name, "must be true or false");
      x = j->get<bool>();
    }
  }
  void precision(const char* name, Scalar& x) {
    const json* j = find(name, false);
    if (!j) return;
    if (j->is_string() && parse_scalar(j->get<std::string>(), x)) return;
    bad(std::string("problem.") + name,
        "must be one of " + scalar_names() +
            " (q8, q4, q8_token, q8_head and q4_0 for storage.k and storage.v only), got " + preview(*j));
  }
  const json* array(const char* name, bool required) {
    const json* j = find(name, required);
    if (j && !j->is_array()) bad(std::string("problem.") + name, "must be an array");
    return j;
  }
  void integers(const char* name, std::vector<int>& x, long long lo, long long hi) {
    if (const json* j = array(name, false)) {
      x.clear();
      for (std::size_t i = 0; i < j->size(); ++i)
        x.push_back(static_cast<int>(checked_integer(fmt::format("problem.{}[{}]", name, i), (*j)[i], lo, hi)));
    }
  }
  void flags(const char* name, std::vector<std::uint8_t>& x) {
    if (const json* j = array(name, false)) {
      x.clear();
      for (std::size_t i = 0; i < j->size(); ++i)
        x.push_back(static_cast<std::uint8_t>(checked_integer(fmt::format("problem.{}[{}]", name, i), (*j)[i], 0, 1)));
    }
  }
  void floats(const char* name, std::vector<float>& x, bool required = false) {
    const json* j = array(name, required);
    if (!j) return;
    x.clear();
    x.reserve(j->size());
    for (std::size_t i = 0; i < j->size(); ++i) {
      const json& e = (*j)[i];
      if (e == "nan")
        x.push_back(std::numeric_limits<float>::quiet_NaN());
      else if (e == "inf")
        x.push_back(std::numeric_limits<float>::infinity());
      else if (e == "-inf")
        x.push_back(-std::numeric_limits<float>::infinity());
      else if (e.is_number() && std::fabs(e.get<double>()) <= std::numeric_limits<float>::max())
        x.push_back(e.get<float>());
      else
        bad(fmt::format("problem.{}[{}]", name, i),
            "must be a float (a number in float range, or \"nan\", \"inf\", \"-inf\")");
    }
  }
};

// Every key under `node` that the field list did not consume, as a dotted name.
void reject_unknown(const json& node, const std::string& prefix, const std::set<std::string>& seen) {
  for (const auto& [key, value] : node.items()) {
    const std::string name = prefix.empty() ? key : prefix + "." + key;
    if (seen.count(name)) continue;
    if (value.is_object())
      reject_unknown(value, name, seen);
    else
      bad("problem." + name, "is not a field of a problem");
  }
}

std::string text_field(const json& doc, const char* name, std::size_t max_bytes) {
  if (!doc.contains(name)) return {};
  if (!doc[name].is_string()) bad(name, "must be a string");
  return safe_text(doc[name].get<std::string>(), max_bytes);
}

}  // namespace

std::string to_json(const ProblemFile& file) {
  Writer w;
  visit_problem_fields(file.problem, w);
  json doc = {{"format", "attest-problem"}, {"version", kProblemFileVersion}, {"property", file.property},
              {"kernel", file.kernel},      {"isolated", file.isolated},      {"verdict", file.verdict},
              {"seed", file.seed},          {"problem", std::move(w.doc)}};
  return doc.dump(1, ' ', false, json::error_handler_t::replace);
}

ProblemFile from_json(const std::string& text) {
  json doc;
  try {
    doc = parse_json(text, "problem file");
  } catch (const FileError& e) {
    throw ProblemFileError(e.what());
  }
  if (!doc.is_object() || !doc.contains("format") || doc["format"] != "attest-problem")
    throw ProblemFileError("not an attest problem file (format must be \"attest-problem\")");
  if (!doc.contains("version") || !doc["version"].is_number_integer()) bad("version", "must be an integer");
  if (doc["version"] != kProblemFileVersion)
    throw ProblemFileError(fmt::format("unsupported version {} (this attest reads version {})", preview(doc["version"]),
                                       kProblemFileVersion));
  ProblemFile file;
  file.property = text_field(doc, "property", 128);
  file.kernel = text_field(doc, "kernel", 4096);
  file.verdict = text_field(doc, "verdict", 64 * 1024);
  if (doc.contains("isolated")) {
    if (!doc["isolated"].is_boolean()) bad("isolated", "must be true or false");
    file.isolated = doc["isolated"].get<bool>();
  }
  if (doc.contains("seed")) {
    if (!doc["seed"].is_number_unsigned()) bad("seed", "must be an unsigned integer");
    file.seed = doc["seed"].get<std::uint64_t>();
  }
  if (!doc.contains("problem") || !doc["problem"].is_object()) bad("problem", "must be an object");
  Reader r{doc["problem"], {}};
  visit_problem_fields(file.problem, r);
  // Files of earlier versions of attest name one format for all inputs.
  if (doc["problem"].contains("input_precision")) {
    Scalar legacy = Scalar::kF32;
    r.precision("input_precision", legacy);
    file.problem.storage = {legacy, legacy, legacy};
  }
  reject_unknown(doc["problem"], "", r.seen);
  try {
    file.problem.validate();
  } catch (const ProblemError& e) {
    throw ProblemFileError(e.what());
  }
  return file;
}

void save_problem_file(const std::string& path, const ProblemFile& file) {
  const std::filesystem::path target(path);
  if (target.has_parent_path()) std::filesystem::create_directories(target.parent_path());
  try {
    write_file_atomically(path, to_json(file) + "\n");
  } catch (const FileError& e) {
    throw ProblemFileError(e.what());
  }
}

ProblemFile load_problem_file(const std::string& path) {
  try {
    return from_json(read_file(path));
  } catch (const FileError& e) {
    throw ProblemFileError(e.what());
  }
}

}  // namespace attest
