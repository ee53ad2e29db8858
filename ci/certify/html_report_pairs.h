// The HTML report's pair matrix: per internal path, the coverage model's pairs of classes of two
// axes (docs/design.md#coverage-model) drawn cell by cell, so a reader sees which pair of classes
// was never reached, and which of those a check required.
#pragma once

#include <string>

#include "certificate.h"

namespace attest {

// One table per path that has pair evidence ("pair_cases" in the certificate): a row and a column
// per class; a cell the effective cases of that pair over every check, red where a check required
// the pair and never reached it, empty where it was never reached and not required.
std::string html_pair_matrices(const KernelReport& k);

}  // namespace attest
