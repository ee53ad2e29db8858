// attest's side of a block-table cache (docs/design.md#serving-caches): it owns the pages and each sequence's
// table, as a serving engine's block manager does, and drives Kernel::decode_paged over a prefill.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "attest/kernels/kernel.h"

namespace attest {

class PagePool {
 public:
  // Room for `pages` pages of the kernel's layout for `config`; free pages are handed out in an
  // order drawn from `seed` (0: ascending), each filled with 0xFF bytes until written (NaN in any
  // float or f16 field, so an unwritten slot that is read shows).
  PagePool(const Kernel& kernel, const DecodeConfig& config, int pages, std::uint64_t seed);

  // Sequence `to` (empty) shares every page of `from`: both tables name the same pages.
  void share(int from, int to);
  // Every page moved to a place drawn from `seed`, the tables renamed to match.
  void permute(std::uint64_t seed);

  // One call: sequence b appends counts[b] tokens; q, k, v, o, lse packed as PagedStep says. A
  // sequence appending into a shared page first gets its own copy of it. Returns why the call
  // broke the contract (it wrote a page that holds none of its new tokens), or empty.
  std::string call(const std::vector<int>& counts, std::span<const float> q, std::span<const float> k,
                   std::span<const float> v, std::span<float> o, std::span<float> lse);

  long long length(int b) const { return lengths_[b]; }

 private:
  int take_page();  // a free page, filled with 0xFF

  const Kernel& kernel_;
  DecodeConfig config_;
  int page_tokens_;
  std::size_t page_bytes_;
  std::unique_ptr<std::byte[], void (*)(std::byte*)> pool_;
  std::size_t pages_;
  std::vector<int> free_;     // taken from the back
  std::vector<int> sharers_;  // per physical page: how many tables name it
  std::vector<std::vector<std::int32_t>> tables_;
  std::vector<std::int64_t> lengths_;
};

// One call of a paged run: how many tokens each sequence appends, and what attest does first.
struct PagedCall {
  std::vector<int> counts;           // [B]
  std::vector<int> share_from_zero;  // sequences that take sequence 0's pages before the call
  bool permute_before = false;       // move every page first
};

// Decodes `prefill` (a causal Tq = Tk problem of B sequences) through the kernel's block tables
// in `calls`; sequence b's token t is the prefill's row t of batch b, and a sequence that takes
// sequence 0's pages continues from sequence 0's length. Outputs as one prefill would have them
// (rows never decoded stay NaN). `broken`: the first contract breach the pool saw, or empty.
Outputs run_paged(const Kernel& kernel, const Problem& prefill, const std::vector<PagedCall>& calls, bool with_lse,
                  std::uint64_t pool_seed, std::string& broken);

}  // namespace attest
