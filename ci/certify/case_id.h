// A generated case in one printable line, llama.cpp's vars() style: "Tq=5 Tk=9 D=64
// mask=causal+window(3) dtype=bf16". Progress lines and failure lines name a case by it, so a
// user sees which problem failed without opening the counterexample file.
#pragma once

#include <string>

#include "attest/problem.h"

namespace attest {

// Only what differs from the plain problem is named: B and H when above 1, Dk and Dv apart when
// they differ, the mask terms, the modifiers, a set scale or query offset, a storage other than f32.
std::string case_id(const Problem& p);

}  // namespace attest
