// Peak heap bytes allocated through operator new while a measurement runs. The operators are
// replaced in the attest executable (memory_meter.cpp); memory that a library takes with
// malloc directly (OpenBLAS's own buffers) is not seen.
#pragma once

#include <cstddef>

namespace attest::memory_meter {

void start();              // peak := current
std::size_t peak_extra();  // peak since start() minus what was live at start()

}  // namespace attest::memory_meter
