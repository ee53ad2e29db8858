// Every check a certification can run, by name, and `--check`: which of them a run runs.
#pragma once

#include <regex>
#include <set>
#include <string>
#include <vector>

namespace attest {

// The checks of the sized stages (the others are named by deterministic_plans(), the property
// catalogue and the fuzz target table).
inline constexpr const char* kDeclaredPathsCheck = "declared_paths";
inline constexpr const char* kLadderCheck = "sizes";
inline constexpr const char* kLongCheck = "sampled_rows";
inline constexpr const char* kLongBackwardCheck = "backward_sampled_rows";
inline constexpr const char* kLongEvictionCheck = "eviction_sampled_steps";
inline constexpr const char* kLongPagedCheck = "paged_sampled_steps";

struct CheckName {
  std::string stage;
  std::string name;
};
// In the order a run takes them: deterministic, ladder, long, property, fuzz.
std::vector<CheckName> every_check();

// `--check golden,gradient_.*`: an item of name characters alone ([a-z0-9_]) must name a check;
// any other item is a regular expression that must match at least one whole name. Each refusal
// throws std::invalid_argument with a one-line message naming --check.
class CheckSelection {
 public:
  explicit CheckSelection(const std::vector<std::string>& items);
  bool selects(const std::string& check) const;
  const std::string& text() const { return text_; }  // the items, comma-joined, for the report

 private:
  std::set<std::string> names_;
  std::vector<std::regex> patterns_;
  std::string text_;
};

}  // namespace attest
