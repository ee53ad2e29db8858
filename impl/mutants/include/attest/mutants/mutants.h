// Deliberately broken kernels: each is a correct kernel with one realistic bug switched on.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "attest/kernels/kernel.h"

namespace attest {

struct MutantEntry {
  std::string name;
  std::string bug_class;          // one line: what a real kernel got wrong
  std::string expected_property;  // the property that must catch it
  std::function<std::unique_ptr<Kernel>()> make;
  // Keys its bug needs (a long-stage bug past the mutation run's --max-len): the run's lengths
  // reach at least this far for it. 0: the run's own.
  int needs_len = 0;
};

const std::vector<MutantEntry>& mutant_registry();
const MutantEntry& find_mutant(const std::string& name);  // throws std::invalid_argument

// A kernel that lives in this process by name: NAME or builtin:NAME (the registry),
// mutant:NAME, tiled-scalar[-bf16|-f16] (the mutants' host without a fault, f32 or with
// 16-bit storage: calibration subjects), decode-only (the decode kernel declaring no forward),
// decode_q8_token / decode_q4 / decode_e4m3 / decode_e5m2 (the quantized-cache decoder's other formats), or
// self-attention-only / self-attention-undeclared (the tiled kernel refusing Tq != Tk or q_offset != 0),
// or standard-alibi-only / standard-alibi-undeclared (the tiled kernel using the standard ALiBi
// slopes), or tiled-entry-f16, tiled-f16-kv-unnormalised, tiled-bias-f16, tiled-two-paths (the
// tiled kernel rounding as ABI 2.1's precision declarations say: calibration subjects), or
// tiled-declared-paths (the tiled kernel with a split-KV path, declaring its paths: ABI 2.2), or
// value-widths-only / value-widths-undeclared (Dv in {32, 64} only) and alibi-or-bias-only /
// alibi-or-bias-undeclared (ALiBi or a bias, never both), declared so (ABI 2.7) or not. The lower
// layer of the one resolver (ci/isolation/kernel_resolver.h adds plugin paths, cmd:COMMAND,
// registered names such as baseline:blas, and isolation); throws std::invalid_argument.
std::unique_ptr<Kernel> make_in_process_kernel(const std::string& name);

}  // namespace attest
