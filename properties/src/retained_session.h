// A long decode session through an evicting cache (the long stage): every token decoded, sampled
// steps judged against exact attention over the positions the cache declares it keeps.
#pragma once

#include <vector>

#include "attest/kernels/kernel.h"
#include "attest/properties/verdict.h"

namespace attest {

// The session of `prefill` in `chunks`; the query rows `rows` (positions) compared, each against
// the exact attention of its query over its retained keys (the declared rule's, or for an explicit
// policy those the session reported). `kernel_seconds`, when given, receives the session's time.
Verdict retained_session_matches(const Problem& prefill, const std::vector<int>& chunks, const std::vector<int>& rows,
                                 const Kernel& kernel, int jobs, double* kernel_seconds = nullptr);

}  // namespace attest
