// Resolves a kernel name given on the command line: "NAME" or "builtin:NAME" for the
// registry, "mutant:NAME" for a deliberately broken kernel.
#pragma once

#include <memory>
#include <string>

#include "attest/kernel.h"

namespace attest {

std::unique_ptr<Kernel> resolve_kernel(const std::string& name);  // throws std::invalid_argument

}  // namespace attest
