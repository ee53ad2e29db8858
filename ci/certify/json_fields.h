// Typed reads of JSON that attest does not trust (a baseline, a shard's certificate): each
// checks that the field is there and has its type, else throws FieldError naming the field as
// "kernels[0].checks[3].cases must be a count". The callers add which document it was.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace attest {

class FieldError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

namespace json_fields {

using nlohmann::json;

[[noreturn]] void bad(const std::string& where, const std::string& why);

const json& member(const json& object, const std::string& where, const char* key);
std::string text(const json& object, const std::string& where, const char* key);  // verbatim
const json& array(const json& object, const std::string& where, const char* key);
long count(const json& object, const std::string& where, const char* key);  // an integer >= 0
long long integer(const json& object, const std::string& where, const char* key, long long lo, long long hi);
long long integer_value(const json& j, const std::string& field, long long lo, long long hi);  // j is the field
std::uint64_t unsigned_integer(const json& object, const std::string& where, const char* key);
bool flag(const json& object, const std::string& where, const char* key);
// A flag added after certificates were first written: absent reads as false.
bool flag_or_false(const json& object, const std::string& where, const char* key);
double finite_number(const json& object, const std::string& where, const char* key);
std::optional<double> number_or_null(const json& object, const std::string& where, const char* key);
std::vector<std::string> texts(const json& object, const std::string& where, const char* key);
std::map<std::string, long> counts(const json& object, const std::string& where, const char* key);  // {name: count}
std::map<std::string, std::string> strings(const json& object, const std::string& where,
                                           const char* key);  // {name: text}

}  // namespace json_fields
}  // namespace attest
