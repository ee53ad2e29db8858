// In-process kernels that need ABI 2.7's contract fields (a Dv of their own, ALiBi or a bias), each
// declaring them or not, and the mutants that declare them falsely.
#pragma once

#include <memory>
#include <string>

#include "attest/kernels/kernel.h"

namespace attest {

// The tiled kernel serving only Dv in {32, 64} (a V quantized in blocks of 32, Dk free), refusing
// every other Dv; with `declared`, its contract says so (value_dims {32, 64}).
std::unique_ptr<Kernel> make_value_widths_kernel(bool declared);
// The tiled kernel with one mask input (as ggml's): ALiBi or a bias, refusing both together; with
// `declared`, its contract says so (alibi_excludes_bias).
std::unique_ptr<Kernel> make_alibi_or_bias_kernel(bool declared);

// Declares Dv in {32, 64} but its V tile is 32 wide: for Dv = 64 only the first 32 columns are written
// (0 after them).
std::unique_ptr<Kernel> make_value_tile_of_32_mutant(const std::string& name);
// Declares ALiBi or a bias, and materialises ALiBi alone into its single [Tq][Tk] mask input, shared
// by every head: head 0's slope for all of them.
std::unique_ptr<Kernel> make_alibi_mask_input_head_0_mutant(const std::string& name);

}  // namespace attest
