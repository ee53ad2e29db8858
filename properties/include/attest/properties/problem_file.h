// A saved counterexample: every input of a problem, plus which property and kernel failed.
// Format "attest-problem", version 1, JSON; floats as numbers, or "nan", "inf", "-inf".
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

#include "attest/model/problem.h"

namespace attest {

inline constexpr int kProblemFileVersion = 1;

struct ProblemFile {
  Problem problem;
  std::string property;   // catalogue name
  std::string kernel;     // how to load the kernel again: "tiled", "mutant:no_rescale", "lib.so", "cmd:PROGRAM ARGS"
  bool isolated = false;  // it ran in a child process (attest certify --isolate, plugins, commands)
  std::string verdict;    // the explanation recorded when it was saved
  std::uint64_t seed = 0;
};

class ProblemFileError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

std::string to_json(const ProblemFile& file);
ProblemFile from_json(const std::string& text);  // throws ProblemFileError naming what is wrong
void save_problem_file(const std::string& path, const ProblemFile& file);
ProblemFile load_problem_file(const std::string& path);

}  // namespace attest
