// How the user ran attest, for the commands attest prints (replay_program.h): argv[0] as given
// when it holds a slash (the shell found it by that path), the bare name when PATH finds this very
// executable by it, else this executable's resolved path (started by a program with another argv[0]).
#pragma once

#include <string>

namespace attest {

// `path_variable`: the PATH the user's shell searches; `self`: this executable (/proc/self/exe).
std::string invoked_program(const std::string& argv0, const std::string& path_variable, const std::string& self);

}  // namespace attest
