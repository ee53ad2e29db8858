#include "paged_kv_cache.h"

#include <algorithm>
#include <stdexcept>

namespace attest::kernels {

PagedKvCache::PagedKvCache(int batch, int kv_heads, int head_dim, int value_dim, int page_size)
    : kv_heads_(kv_heads),
      head_dim_(head_dim),
      value_dim_(value_dim),
      page_size_(page_size),
      block_table_(batch),
      lengths_(batch, 0) {
  if (page_size < 1) throw std::invalid_argument("paged KV cache: page_size must be >= 1");
}

std::size_t PagedKvCache::page_floats() const { return std::size_t(kv_heads_) * page_size_ * (head_dim_ + value_dim_); }

void PagedKvCache::append(int b, const float* k, std::size_t k_head_stride, const float* v, std::size_t v_head_stride) {
  const int j = lengths_[b];
  if (j % page_size_ == 0) {  // the sequence's last page is full: take a fresh one from the pool
    block_table_[b].push_back(static_cast<int>(pages_.size()));
    pages_.emplace_back(page_floats());
  }
  ++lengths_[b];
  for (int g = 0; g < kv_heads_; ++g) {
    std::copy_n(k + g * k_head_stride, head_dim_, key_mut(b, g, j));
    std::copy_n(v + g * v_head_stride, value_dim_, const_cast<float*>(value(b, g, j)));
  }
}

const float* PagedKvCache::key(int b, int g, int j) const {
  const std::vector<float>& page = pages_[page_of(b, j)];
  return &page[(std::size_t(g) * page_size_ + j % page_size_) * head_dim_];
}

float* PagedKvCache::key_mut(int b, int g, int j) { return const_cast<float*>(key(b, g, j)); }

const float* PagedKvCache::value(int b, int g, int j) const {
  const std::vector<float>& page = pages_[page_of(b, j)];
  const std::size_t values_start = std::size_t(kv_heads_) * page_size_ * head_dim_;
  return &page[values_start + (std::size_t(g) * page_size_ + j % page_size_) * value_dim_];
}

std::size_t PagedKvCache::bytes() const { return pages_.size() * page_floats() * sizeof(float); }

}  // namespace attest::kernels
