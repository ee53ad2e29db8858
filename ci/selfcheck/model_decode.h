// The decode of a declaration's exact kernel: its sessions keep every appended token exactly as
// sent, and attend each step's queries by the kernel's own forward over the whole cache (the
// step's n queries at positions length() .. length() + n - 1, causally, with the session's integer
// mask terms and score modifiers). Whatever the forward rounds, the decode rounds the same.
// A declared cache policy evicts: each query attends only the positions the policy keeps for it.
// A declared block table (page_tokens) holds each token's K and V in float32 in its slot of
// attest's pages, read back through the tables for each call.
#pragma once

#include <memory>

#include "attest/kernels/cache_policy.h"
#include "attest/kernels/kernel.h"

namespace attest {

// `forward` must outlive the session.
std::unique_ptr<DecodeSession> open_model_decode(const Kernel& forward, const DecodeConfig& config,
                                                 Problem::Storage storage, const CachePolicy& cache);

// The bytes of one page of `page_tokens` tokens: every kv head's K and V rows, float32.
std::size_t model_page_bytes(const DecodeConfig& config, int page_tokens);

// One block-table call (Kernel::decode_paged) attended by `forward`.
void model_decode_paged(const Kernel& forward, const DecodeConfig& config, Problem::Storage storage,
                        const CachePolicy& cache, int page_tokens, const PagedStep& step);

// What an explicit (decode_retained) policy's model keeps: the first 2 positions and the newest 24,
// reported per query by its sessions.
CachePolicy model_explicit_retention();

}  // namespace attest
