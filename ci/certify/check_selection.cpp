#include "check_selection.h"

#include <algorithm>
#include <stdexcept>

#include "attest/properties/properties.h"
#include "certify.h"
#include "fuzz_targets.h"

namespace attest {

std::vector<CheckName> every_check() {
  std::vector<CheckName> out;
  for (const CheckPlan& plan : deterministic_plans()) out.push_back({plan.stage, plan.check});
  out.push_back({"deterministic", kDeclaredPathsCheck});
  out.push_back({"ladder", kLadderCheck});
  for (const char* name : {kLongCheck, kLongBackwardCheck, kLongEvictionCheck, kLongPagedCheck})
    out.push_back({"long", name});
  for (const PropertyInfo& property : property_catalogue()) out.push_back({"property", property.name});
  for (const fuzz::TargetInfo& target : fuzz::target_table()) out.push_back({"fuzz", target.name});
  return out;
}

CheckSelection::CheckSelection(const std::vector<std::string>& items) {
  const std::vector<CheckName> known = every_check();
  auto matches = [&](const std::regex& pattern) {
    return std::any_of(known.begin(), known.end(),
                       [&](const CheckName& c) { return std::regex_match(c.name, pattern); });
  };
  if (items.empty()) throw std::invalid_argument("--check: no check named (attest certify --list-checks names them)");
  for (const std::string& item : items) {
    text_ += (text_.empty() ? "" : ",") + item;
    const bool plain =
        !item.empty() && item.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789_") == std::string::npos;
    if (plain) {
      if (std::none_of(known.begin(), known.end(), [&](const CheckName& c) { return c.name == item; }))
        throw std::invalid_argument("--check: unknown check '" + item.substr(0, 60) +
                                    "' (attest certify --list-checks names them)");
      names_.insert(item);
      continue;
    }
    try {
      patterns_.emplace_back(item, std::regex::ECMAScript);
    } catch (const std::regex_error& e) {
      throw std::invalid_argument("--check: '" + item.substr(0, 60) +
                                  "' is neither a check name nor a regular expression (" + e.what() + ")");
    }
    if (!matches(patterns_.back()))
      throw std::invalid_argument("--check: '" + item.substr(0, 60) +
                                  "' matches no check (attest certify --list-checks names them)");
  }
}

bool CheckSelection::selects(const std::string& check) const {
  return names_.contains(check) || std::any_of(patterns_.begin(), patterns_.end(),
                                               [&](const std::regex& p) { return std::regex_match(check, p); });
}

}  // namespace attest
