// `attest kernel-host`: serves a plugin (.so) or a built-in kernel over the process protocol
// on stdin/stdout. attest runs kernels under test this way, so a crash kills only the host.
#pragma once

#include <string>

namespace attest {

int serve_plugin(const std::string& path);
int serve_builtin(const std::string& name);

}  // namespace attest
