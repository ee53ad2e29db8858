#include "attest/problem_file.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

namespace attest {
namespace {

using nlohmann::json;

json float_array(const std::vector<float>& values) {
  json out = json::array();
  for (float x : values) {
    if (std::isnan(x)) out.push_back("nan");
    else if (std::isinf(x)) out.push_back(x > 0 ? "inf" : "-inf");
    else out.push_back(x);
  }
  return out;
}

std::vector<float> read_floats(const json& j, const char* field) {
  if (!j.is_array()) throw ProblemFileError(std::string("problem.") + field + " must be an array");
  std::vector<float> out;
  out.reserve(j.size());
  for (const json& x : j) {
    if (x.is_number()) out.push_back(x.get<float>());
    else if (x == "nan") out.push_back(std::numeric_limits<float>::quiet_NaN());
    else if (x == "inf") out.push_back(std::numeric_limits<float>::infinity());
    else if (x == "-inf") out.push_back(-std::numeric_limits<float>::infinity());
    else throw ProblemFileError(std::string("problem.") + field + " holds a value that is not a float: " + x.dump());
  }
  return out;
}

template <typename T>
T field(const json& j, const char* name) {
  if (!j.contains(name)) throw ProblemFileError(std::string("missing field '") + name + "'");
  try {
    return j.at(name).get<T>();
  } catch (const json::exception&) {
    throw ProblemFileError(std::string("field '") + name + "' has the wrong type");
  }
}

}  // namespace

std::string to_json(const ProblemFile& file) {
  const Problem& p = file.problem;
  json problem = {
      {"shape", {{"batch", p.shape.batch}, {"heads", p.shape.heads}, {"kv_heads", p.shape.kv_heads},
                 {"q_len", p.shape.q_len}, {"k_len", p.shape.k_len}, {"head_dim", p.shape.head_dim},
                 {"value_dim", p.shape.value_dim}}},
      {"mask", {{"causal", p.mask.causal}, {"kv_valid", p.mask.kv_valid}, {"q_valid", p.mask.q_valid},
                {"q_segment", p.mask.q_segment}, {"k_segment", p.mask.k_segment},
                {"explicit_mask", p.mask.explicit_mask}}},
      {"rope", {{"enabled", p.rope.enabled}, {"base", p.rope.base}}},
      {"input_precision", to_string(p.input_precision)},
      {"q", float_array(p.q)},
      {"k", float_array(p.k)},
      {"v", float_array(p.v)},
  };
  if (p.mask.window) problem["mask"]["window"] = *p.mask.window;
  if (p.scale) problem["scale"] = *p.scale;
  if (p.q_offset) problem["q_offset"] = *p.q_offset;
  json doc = {{"format", "attest-problem"}, {"version", kProblemFileVersion}, {"property", file.property},
              {"kernel", file.kernel},       {"isolated", file.isolated},   {"verdict", file.verdict},         {"seed", file.seed},
              {"problem", problem}};
  return doc.dump(1);
}

ProblemFile from_json(const std::string& text) {
  json doc;
  try {
    doc = json::parse(text);
  } catch (const json::parse_error& e) {
    throw ProblemFileError(std::string("not valid JSON: ") + e.what());
  }
  if (!doc.is_object() || doc.value("format", "") != "attest-problem")
    throw ProblemFileError("not an attest problem file (format must be \"attest-problem\")");
  const int version = field<int>(doc, "version");
  if (version != kProblemFileVersion)
    throw ProblemFileError("unsupported version " + std::to_string(version) + " (this attest reads version " +
                           std::to_string(kProblemFileVersion) + ")");
  ProblemFile file;
  file.property = doc.value("property", "");
  file.kernel = doc.value("kernel", "");
  file.isolated = doc.value("isolated", false);
  file.verdict = doc.value("verdict", "");
  file.seed = doc.value("seed", std::uint64_t{0});
  const json pj = field<json>(doc, "problem");
  const json shape = field<json>(pj, "shape");
  Problem& p = file.problem;
  p.shape = {field<int>(shape, "batch"), field<int>(shape, "heads"), field<int>(shape, "kv_heads"),
             field<int>(shape, "q_len"), field<int>(shape, "k_len"), field<int>(shape, "head_dim"),
             field<int>(shape, "value_dim")};
  const json mask = field<json>(pj, "mask");
  p.mask.causal = field<bool>(mask, "causal");
  if (mask.contains("window")) p.mask.window = field<int>(mask, "window");
  p.mask.kv_valid = field<std::vector<int>>(mask, "kv_valid");
  p.mask.q_valid = field<std::vector<int>>(mask, "q_valid");
  p.mask.q_segment = field<std::vector<int>>(mask, "q_segment");
  p.mask.k_segment = field<std::vector<int>>(mask, "k_segment");
  p.mask.explicit_mask = field<std::vector<std::uint8_t>>(mask, "explicit_mask");
  const json rope = field<json>(pj, "rope");
  p.rope.enabled = field<bool>(rope, "enabled");
  p.rope.base = field<double>(rope, "base");
  const std::string precision = field<std::string>(pj, "input_precision");
  if (precision == "f32") p.input_precision = InputPrecision::kF32;
  else if (precision == "bf16") p.input_precision = InputPrecision::kBF16;
  else if (precision == "f16") p.input_precision = InputPrecision::kF16;
  else throw ProblemFileError("input_precision must be f32, bf16 or f16, got '" + precision + "'");
  if (pj.contains("scale")) p.scale = field<double>(pj, "scale");
  if (pj.contains("q_offset")) p.q_offset = field<long long>(pj, "q_offset");
  p.q = read_floats(field<json>(pj, "q"), "q");
  p.k = read_floats(field<json>(pj, "k"), "k");
  p.v = read_floats(field<json>(pj, "v"), "v");
  try {
    p.validate();
  } catch (const ProblemError& e) {
    throw ProblemFileError(e.what());
  }
  return file;
}

void save_problem_file(const std::string& path, const ProblemFile& file) {
  const std::filesystem::path target(path);
  if (target.has_parent_path()) std::filesystem::create_directories(target.parent_path());
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp);
    out << to_json(file) << "\n";
    if (!out) throw ProblemFileError("cannot write " + tmp);
  }
  std::filesystem::rename(tmp, target);  // never leave a half-written counterexample
}

ProblemFile load_problem_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw ProblemFileError("cannot open " + path);
  std::stringstream text;
  text << in.rdbuf();
  return from_json(text.str());
}

}  // namespace attest
