// The property catalogue (DESIGN.md §5). Each property is a plain function; RapidCheck
// suites, fuzz targets and `attest certify` are thin drivers over the same functions.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "attest/kernel.h"
#include "attest/oracle.h"
#include "attest/verdict.h"

namespace attest {

using PropertyCheck = std::function<Verdict(const Problem&, const Kernel&, Oracle&)>;

// O and LSE within the hard bound; empty rows exactly per the declared policy.
Verdict matches_reference(const Problem& p, const Kernel& kernel, Oracle& oracle);

}  // namespace attest
