// A generated case in one printable line, llama.cpp's vars() style: "Tq=5 Tk=9 D=64
// mask=causal+window(3) dtype=bf16". Progress lines and failure lines name a case by it, so a
// user sees which problem failed without opening the counterexample file.
#pragma once

#include <string>

#include "attest/model/problem.h"

namespace attest {

// Only what differs from the plain problem is named: B and H when above 1, Dk and Dv apart when
// they differ, the mask terms, the modifiers, a set scale or query offset, a storage other than f32.
std::string case_id(const Problem& p);

// case_id as a file name part: "B2_Tq5_Tk9_D64_causal+window3_bf16". Counterexample files carry it,
// so a directory listing tells failures apart without opening them.
std::string case_file_stem(const Problem& p);

// DIR/PREFIX__KERNEL__CASE.json: where a failing case of a check is saved.
std::string counterexample_path(const std::string& dir, const std::string& prefix, const std::string& kernel,
                                const Problem& p);

}  // namespace attest
