// `attest certify --list-checks --markdown`: the property catalogue as the Markdown table
// docs/properties.md holds, generated from property_catalogue() and the mutant registry so the
// page cannot drift (ctest docs_catalogue_page compares the two).
#pragma once

#include <string>

namespace attest {

// One row per property: its summary, what a kernel's declaration and the problems need for it to
// run, and the mutants it must catch (each with its bug class).
std::string catalogue_markdown();

}  // namespace attest
