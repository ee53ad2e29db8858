#include "catalogue_markdown.h"

#include <fmt/format.h>

#include <string>
#include <vector>

#include "attest/mutants.h"
#include "attest/properties.h"

namespace attest {
namespace {

// What the property needs beyond a forward kernel, in the words a kernel author declares.
std::string needs_of(const PropertyInfo& p) {
  std::vector<std::string> needs;
  for (const std::string& f : p.required.names()) needs.push_back("`" + f + "`");
  const DeclarationNeeds& d = p.declares;
  if (d.cache_eviction) needs.push_back("a cache policy that evicts");
  if (d.block_tables) needs.push_back("block tables");
  if (d.shareable_pages) needs.push_back("pages two sequences may share");
  if (d.merge) needs.push_back("`merge` declared");
  if (d.exact_sessions) needs.push_back("decode sessions that keep every key");
  if (d.deterministic_backward) needs.push_back("`backward` promised deterministic");
  if (d.padding) needs.push_back("padding");
  const ProblemNeeds& n = p.needs;
  if (n.position_free) needs.push_back("a problem without positions");
  if (n.rope) needs.push_back("`rope`");
  if (n.gqa) needs.push_back("`gqa`");
  if (n.masked) needs.push_back("a mask term");
  if (n.hides_keys) needs.push_back("keys no row sees");
  if (n.several_slices) needs.push_back("B·H > 1");
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
