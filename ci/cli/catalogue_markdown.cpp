#include "catalogue_markdown.h"

#include <fmt/format.h>

#include <string>
#include <utility>
#include <vector>

#include "attest/mutants/mutants.h"
#include "attest/properties/properties.h"

namespace attest {
namespace {

// What the property needs beyond a forward kernel, in the words a kernel author declares.
std::string needs_of(const PropertyInfo& p) {
  std::vector<std::string> needs;
  for (const std::string& f : p.required.names()) needs.push_back("`" + f + "`");
  const DeclarationNeeds& d = p.declares;
  const ProblemNeeds& n = p.needs;
  const std::pair<bool, const char*> flags[] = {{d.cache_eviction, "a cache policy that evicts"},
                                                {d.block_tables, "block tables"},
                                                {d.shareable_pages, "pages two sequences may share"},
                                                {d.merge, "`merge` declared"},
                                                {d.packed, "`packed` layout declared"},
                                                {d.exact_sessions, "decode sessions that keep every key"},
                                                {d.deterministic_backward, "`backward` promised deterministic"},
                                                {d.padding, "padding"},
                                                {n.position_free, "a problem without positions"},
                                                {n.rope, "`rope`"},
                                                {n.gqa, "`gqa`"},
                                                {n.masked, "a mask term"},
                                                {n.hides_keys, "keys no row sees"},
                                                {n.several_slices, "B·H > 1"}};
  for (const auto& [needed, text] : flags)
    if (needed) needs.push_back(text);
  if (n.max_keys > 0) needs.push_back(fmt::format("Tk ≤ {}", n.max_keys));
  std::string out;
  for (const std::string& need : needs) out += (out.empty() ? "" : ", ") + need;
  return out;
}

// The mutants whose bug this property must catch (`attest mutants` checks it does).
std::string catches_of(const PropertyInfo& p) {
  std::string out;
  for (const MutantEntry& m : mutant_registry())
    if (m.expected_property == p.name) out += fmt::format("{}`{}`: {}", out.empty() ? "" : "; ", m.name, m.bug_class);
  return out;
}

// A table cell: a '|' would end it early.
std::string cell(const std::string& text) {
  std::string out;
  for (const char c : text) out += c == '|' ? std::string("\\|") : std::string(1, c);
  return out;
}

}  // namespace

std::string catalogue_markdown() {
  std::string out = "| property | checks | needs | catches (mutants) |\n|---|---|---|---|\n";
  for (const PropertyInfo& p : property_catalogue())
    out += fmt::format("| `{}` | {} | {} | {} |\n", p.name, cell(p.summary), cell(needs_of(p)), cell(catches_of(p)));
  return out;
}

}  // namespace attest
