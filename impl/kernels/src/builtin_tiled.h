// The built-in "tiled" as the kernel registry makes it: tiled_fast_kernel.cpp with 128 x 64 tiles,
// declaring the packed layout too. make_tiled_kernel() alone does not declare it: the wrappers
// around it (mutants, test subjects) copy its capabilities and would inherit a packed layout
// they do not serve.
#pragma once

#include <memory>

#include "attest/kernels/kernel.h"

namespace attest {

std::unique_ptr<Kernel> make_builtin_tiled_kernel();

}  // namespace attest
