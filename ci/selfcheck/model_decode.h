// The decode session of a declaration's exact kernel: it keeps every appended token exactly as
// sent, and attends each step's queries by the kernel's own forward over the whole cache (the
// step's n queries at positions length() .. length() + n - 1, causally, with the session's integer
// mask terms and score modifiers). Whatever the forward rounds, the session rounds the same.
#pragma once

#include <memory>

#include "attest/kernel.h"

namespace attest {

// `forward` must outlive the session.
std::unique_ptr<DecodeSession> open_model_decode(const Kernel& forward, const DecodeConfig& config,
                                                 Problem::Storage storage);

}  // namespace attest
