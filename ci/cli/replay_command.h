// `attest replay FILE`: re-run a saved counterexample. A file is data: a plugin or command
// recorded in it runs only when the user names it again (--kernel, --kernel-cmd).
#pragma once

#include <string>

#include "kernel_resolver.h"

namespace attest {

// Exit code: 0 the check passes now, 1 it fails, 2 the file names external code not given again.
int run_replay(const std::string& path, const std::string& kernel_override, const std::string& command_override,
               LoadOptions load);

}  // namespace attest
