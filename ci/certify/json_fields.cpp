#include "json_fields.h"

#include <fmt/format.h>

#include <cmath>

namespace attest::json_fields {

void bad(const std::string& where, const std::string& why) { throw FieldError(where + " " + why); }

const json& member(const json& object, const std::string& where, const char* key) {
  if (!object.is_object()) bad(where, "must be an object");
  if (!object.contains(key)) bad(where + "." + key, "is missing");
  return object[key];
}

std::string text(const json& object, const std::string& where, const char* key) {
  const json& j = member(object, where, key);
  if (!j.is_string()) bad(where + "." + key, "must be a string");
  return j.get<std::string>();
}

const json& array(const json& object, const std::string& where, const char* key) {
  const json& j = member(object, where, key);
  if (!j.is_array()) bad(where + "." + key, "must be an array");
  return j;
}

namespace {

// A whole number, without the wrap-around of get<long long>() on unsigned values above 2^63.
bool whole_in(const json& j, long long lo, long long hi, long long& out) {
  if (j.is_number_unsigned()) {
    const auto u = j.get<std::uint64_t>();
    if (u > static_cast<std::uint64_t>(hi) || (lo > 0 && u < static_cast<std::uint64_t>(lo))) return false;
    out = static_cast<long long>(u);
    return true;
  }
  if (!j.is_number_integer()) return false;
  out = j.get<long long>();
  return out >= lo && out <= hi;
}

}  // namespace

long count(const json& object, const std::string& where, const char* key) {
  long long x = 0;
  if (!whole_in(member(object, where, key), 0, std::numeric_limits<long>::max(), x))
    bad(where + "." + key, "must be a count");
  return static_cast<long>(x);
}

long long integer_value(const json& j, const std::string& field, long long lo, long long hi) {
  long long x = 0;
  if (!whole_in(j, lo, hi, x)) bad(field, fmt::format("must be an integer in [{}, {}]", lo, hi));
  return x;
}

long long integer(const json& object, const std::string& where, const char* key, long long lo, long long hi) {
  return integer_value(member(object, where, key), where + "." + key, lo, hi);
}

std::uint64_t unsigned_integer(const json& object, const std::string& where, const char* key) {
  const json& j = member(object, where, key);
  if (!j.is_number_unsigned() && !(j.is_number_integer() && j.get<long long>() >= 0))
    bad(where + "." + key, "must be an unsigned integer");
  return j.get<std::uint64_t>();
}

bool flag(const json& object, const std::string& where, const char* key) {
  const json& j = member(object, where, key);
  if (!j.is_boolean()) bad(where + "." + key, "must be true or false");
  return j.get<bool>();
}

bool flag_or_false(const json& object, const std::string& where, const char* key) {
  return object.is_object() && object.contains(key) ? flag(object, where, key) : false;
}

double finite_number(const json& object, const std::string& where, const char* key) {
  const json& j = member(object, where, key);
  if (!j.is_number() || !std::isfinite(j.get<double>())) bad(where + "." + key, "must be a finite number");
  return j.get<double>();
}

std::optional<double> number_or_null(const json& object, const std::string& where, const char* key) {
  const json& j = member(object, where, key);
  if (j.is_null()) return std::nullopt;
  if (!j.is_number()) bad(where + "." + key, "must be a number or null");
  return j.get<double>();
}

std::vector<std::string> texts(const json& object, const std::string& where, const char* key) {
  const json& list = array(object, where, key);
  std::vector<std::string> out;
  for (std::size_t i = 0; i < list.size(); ++i) {
    if (!list[i].is_string()) bad(fmt::format("{}.{}[{}]", where, key, i), "must be a string");
    out.push_back(list[i].get<std::string>());
  }
  return out;
}

std::map<std::string, long> counts(const json& object, const std::string& where, const char* key) {
  const json& j = member(object, where, key);
  if (!j.is_object()) bad(where + "." + key, "must be an object of counts");
  std::map<std::string, long> out;
  for (const auto& [name, value] : j.items()) out[name] = count(j, where + "." + key, name.c_str());
  return out;
}

std::map<std::string, std::string> strings(const json& object, const std::string& where, const char* key) {
  const json& j = member(object, where, key);
  if (!j.is_object()) bad(where + "." + key, "must be an object of texts");
  std::map<std::string, std::string> out;
  for (const auto& [name, value] : j.items()) out[name] = text(j, where + "." + key, name.c_str());
  return out;
}

}  // namespace attest::json_fields
