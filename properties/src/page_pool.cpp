#include "page_pool.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <new>
#include <random>
#include <stdexcept>

#include "attest/properties/harness.h"
#include "attest/properties/session_forward.h"
#include "problem_edits.h"

namespace attest {
namespace {

constexpr std::align_val_t kPoolAlignment{64};

std::unique_ptr<std::byte[], void (*)(std::byte*)> aligned_bytes(std::size_t n) {
  auto* bytes = static_cast<std::byte*>(::operator new[](std::max<std::size_t>(n, 1), kPoolAlignment));
  return {bytes, [](std::byte* p) { ::operator delete[](p, kPoolAlignment); }};
}

// The largest pool attest builds (the kernel names the page size: a reply may not make it allocate
// without bound). A paged call holds the pool kPoolCopies times in attest (its pages, their bytes
// before the call, to find stray writes, and the kernel's reply carrying them back), and a process
// kernel's call ships it there and back: the limit counts every copy, together at most 128 MiB,
// so that attest stays far below 2 GiB and a run of a few thousand calls ends in minutes.
constexpr std::size_t kPoolCopies = 3;
constexpr std::size_t kMaxPoolBytes = (std::size_t{128} << 20) / kPoolCopies;

std::size_t checked_pool_bytes(const Kernel& kernel, const DecodeConfig& config, int pages) {
  const std::size_t page_bytes = guarded_page_bytes(kernel, config);
  if (kernel.capabilities().page_tokens < 1 || page_bytes == 0)
    throw KernelLoadError(kernel.name() + " declares a block-table cache with no page size");
  if (page_bytes > kMaxPoolBytes / std::size_t(pages))
    throw KernelFailure(KernelFailure::Kind::kRefused,
                        fmt::format("the kernel's page pool of {} bytes ({} pages of its page_bytes {}) is over "
                                    "attest's pool limit of {} bytes (attest holds a pool {} times per call)",
                                    std::size_t(pages) * page_bytes, pages, page_bytes, kMaxPoolBytes, kPoolCopies));
  return page_bytes;
}

}  // namespace

PagePool::PagePool(const Kernel& kernel, const DecodeConfig& config, int pages, std::uint64_t seed)
    : kernel_(kernel),
      config_(config),
      page_tokens_(kernel.capabilities().page_tokens),
      page_bytes_(checked_pool_bytes(kernel, config, pages)),
      pool_(aligned_bytes(pages * page_bytes_)),
      pages_(pages),
      sharers_(pages, 0),
      tables_(config.batch),
      lengths_(config.batch, 0) {
  std::memset(pool_.get(), 0xFF, pages_ * page_bytes_);
  free_ = seed == 0 ? std::vector<int>() : shuffled(pages, seed);
  if (seed == 0)
    for (int p = pages - 1; p >= 0; --p) free_.push_back(p);  // page 0 first
}

int PagePool::take_page() {
  if (free_.empty()) throw std::logic_error("attest page pool exhausted (sized too small for the run)");
  const int page = free_.back();
  free_.pop_back();
  std::memset(pool_.get() + std::size_t(page) * page_bytes_, 0xFF, page_bytes_);
  sharers_[page] = 1;
  return page;
}

void PagePool::share(int from, int to) {
  for (std::int32_t page : tables_[to]) --sharers_[page];
  tables_[to] = tables_[from];
  for (std::int32_t page : tables_[to]) ++sharers_[page];
  lengths_[to] = lengths_[from];
}

void PagePool::permute(std::uint64_t seed) {
  const std::vector<int> to = shuffled(static_cast<int>(pages_), seed);  // page p moves to to[p]
  auto moved = aligned_bytes(pages_ * page_bytes_);
  std::vector<int> sharers(pages_);
  for (std::size_t p = 0; p < pages_; ++p) {
    std::memcpy(moved.get() + std::size_t(to[p]) * page_bytes_, pool_.get() + p * page_bytes_, page_bytes_);
    sharers[to[p]] = sharers_[p];
  }
  pool_ = std::move(moved);
  sharers_ = std::move(sharers);
  for (auto& table : tables_)
    for (std::int32_t& page : table) page = to[page];
  for (int& page : free_) page = to[page];
}

std::string PagePool::call(const std::vector<int>& counts, std::span<const float> q, std::span<const float> k,
                           std::span<const float> v, std::span<float> o, std::span<float> lse) {
  const int batch = config_.batch;
  std::vector<char> written(pages_, 0);  // pages holding a slot of the call's new tokens
  for (int b = 0; b < batch; ++b) {
    if (counts[b] == 0) continue;
    std::vector<std::int32_t>& table = tables_[b];
    const long long first = lengths_[b], end = first + counts[b];
    const std::size_t last = first / page_tokens_;
    if (first % page_tokens_ != 0 && sharers_[table[last]] > 1) {  // copy on write
      const int copy = take_page();
      std::memcpy(pool_.get() + std::size_t(copy) * page_bytes_, pool_.get() + std::size_t(table[last]) * page_bytes_,
                  page_bytes_);
      --sharers_[table[last]];
      table[last] = copy;
    }
    while (table.size() * page_tokens_ < std::size_t(end)) table.push_back(take_page());
    for (std::size_t e = last; e * page_tokens_ < std::size_t(end); ++e) written[table[e]] = 1;
  }
  std::size_t width = 1;
  for (const auto& table : tables_) width = std::max(width, table.size());
  std::vector<std::int32_t> tables(batch * width, -1);  // entries past a sequence's pages: none
  for (int b = 0; b < batch; ++b) std::copy(tables_[b].begin(), tables_[b].end(), tables.begin() + b * width);
  const std::vector<std::byte> before(pool_.get(), pool_.get() + pages_ * page_bytes_);

  PagedStep step{.pool = {pool_.get(), pages_ * page_bytes_},
                 .tables = tables,
                 .table_width = static_cast<int>(width),
                 .lengths = lengths_,
                 .counts = counts,
                 .q = q,
                 .k = k,
                 .v = v,
                 .o = o,
                 .lse = lse};
  run_paged_guarded(kernel_, config_, step);

  for (std::size_t page = 0; page < pages_; ++page) {
    if (written[page] || !std::memcmp(&before[page * page_bytes_], pool_.get() + page * page_bytes_, page_bytes_))
      continue;
    std::string owners;
    for (int b = 0; b < batch; ++b)
      for (std::size_t e = 0; e < tables_[b].size(); ++e)
        if (tables_[b][e] == std::int32_t(page))
          owners += fmt::format("{}sequence {}'s page {}", owners.empty() ? "" : ", ", b, e);
    return fmt::format(
        "the call (appending {} tokens per sequence) wrote physical page {} ({}), which holds none of "
        "its new tokens",
        fmt::join(counts, ", "), page, owners.empty() ? "a free page" : owners);
  }
  for (int b = 0; b < batch; ++b) lengths_[b] += counts[b];
  return {};
}

Outputs run_paged(const Kernel& kernel, const Problem& prefill, const std::vector<PagedCall>& calls, bool with_lse,
                  std::uint64_t pool_seed, std::string& broken) {
  const Shape& s = prefill.shape;
  const int T = s.k_len, page_tokens = kernel.capabilities().page_tokens;
  const int pages = s.batch * ((T + page_tokens - 1) / page_tokens + 1) + 1;  // every sequence private, plus copies
  PagePool pool(kernel, session_config_of(prefill), pages, pool_seed);
  std::mt19937_64 rng(pool_seed);
  Outputs out;
  out.o.assign(prefill.o_size(), NAN);
  if (with_lse) out.lse.assign(prefill.lse_size(), NAN);
  broken.clear();
  // Rows [from, from + n) of block `outer` of a [..][T][width] buffer, appended to `to`.
  auto rows = [&](const std::vector<float>& from, std::size_t outer, long long first, int n, int width,
                  std::vector<float>& to) {
    const auto start = from.begin() + (outer * T + first) * width;
    to.insert(to.end(), start, start + std::size_t(n) * width);
  };
  for (const PagedCall& call : calls) {
    for (int b : call.share_from_zero) pool.share(0, b);
    if (call.permute_before) pool.permute(rng());
    std::vector<float> q, k, v;
    std::size_t tokens = 0;
    for (int b = 0; b < s.batch; ++b) {
      const int n = call.counts[b];
      const long long first = pool.length(b);
      for (int h = 0; h < s.heads; ++h) rows(prefill.q, std::size_t(b) * s.heads + h, first, n, s.head_dim, q);
      for (int g = 0; g < s.kv_heads; ++g) {
        rows(prefill.k, std::size_t(b) * s.kv_heads + g, first, n, s.head_dim, k);
        rows(prefill.v, std::size_t(b) * s.kv_heads + g, first, n, s.value_dim, v);
      }
      tokens += n;
    }
    std::vector<float> o(tokens * s.heads * s.value_dim, NAN), lse(with_lse ? tokens * s.heads : 0, NAN);
    std::vector<long long> firsts(s.batch);
    for (int b = 0; b < s.batch; ++b) firsts[b] = pool.length(b);
    broken = pool.call(call.counts, q, k, v, o, lse);
    if (!broken.empty()) return out;
    std::size_t row = 0;
    for (int b = 0; b < s.batch; ++b)
      for (int h = 0; h < s.heads; ++h)
        for (int t = 0; t < call.counts[b]; ++t, ++row) {
          const std::size_t to = (std::size_t(b) * s.heads + h) * T + firsts[b] + t;
          std::copy_n(&o[row * s.value_dim], s.value_dim, &out.o[to * s.value_dim]);
          if (with_lse) out.lse[to] = lse[row];
        }
  }
  return out;
}

}  // namespace attest
