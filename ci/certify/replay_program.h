// The program a printed replay command starts with. "attest" alone fails (exit 127) unless attest
// is on PATH, so main sets the path the user ran it by, and every report prints that.
#pragma once

#include <string>

namespace attest {

// Set once by the command line (invoked_program.h); "attest" until then (the library's users).
void set_replay_program(const std::string& program);
// The program as a shell word, ready to be the first word of a command.
std::string replay_program();
// A word the shell takes as it is, or the word in single quotes.
std::string shell_word(const std::string& word);

}  // namespace attest
