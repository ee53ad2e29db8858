// libFuzzer target: the problem-file reader (`attest replay` input). Any bytes must give either
// a problem or ProblemFileError, never a crash, hang or unbounded allocation; a file that reads
// must write back to a file that reads to the same problem.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "attest/properties/oracle.h"
#include "attest/properties/problem_file.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  attest::ProblemFile file;
  try {
    file = attest::from_json(text);
  } catch (const attest::ProblemFileError&) {
    return 0;
  }
  const attest::ProblemFile again = attest::from_json(attest::to_json(file));
  if (attest::fingerprint(again.problem) != attest::fingerprint(file.problem)) std::abort();
  return 0;
}
