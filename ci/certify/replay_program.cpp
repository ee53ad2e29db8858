#include "replay_program.h"

#include <string>

namespace attest {
namespace {

std::string& program_storage() {
  static std::string program = "attest";
  return program;
}

}  // namespace

void set_replay_program(const std::string& program) { program_storage() = program; }

std::string replay_program() { return shell_word(program_storage()); }

std::string shell_word(const std::string& word) {
  const bool plain = !word.empty() && word.find_first_not_of(
                                          "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                          "0123456789_-./:=+,@%") == std::string::npos;
  if (plain) return word;
  std::string out = "'";
  for (char c : word) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

}  // namespace attest
