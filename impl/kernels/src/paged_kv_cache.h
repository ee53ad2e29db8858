// A paged KV cache: fixed-size pages from one pool, a block table per sequence.
#pragma once

#include <cstddef>
#include <vector>

namespace attest::kernels {

class PagedKvCache {
 public:
  PagedKvCache(int batch, int kv_heads, int head_dim, int value_dim, int page_size);

  // Appends one token's K [Hkv][Dk] and V [Hkv][Dv] for sequence b (strided by the caller).
  void append(int b, const float* k, std::size_t k_head_stride, const float* v, std::size_t v_head_stride);

  int length(int b) const { return lengths_[b]; }
  int page_size() const { return page_size_; }
  const float* key(int b, int g, int j) const;
  const float* value(int b, int g, int j) const;
  // Mutable key row, so the decoder can rotate keys once when they enter the cache.
  float* key_mut(int b, int g, int j);
  std::size_t bytes() const;  // pages allocated x page bytes

 private:
  std::size_t page_floats() const;
  int page_of(int b, int j) const { return block_table_[b][j / page_size_]; }

  int kv_heads_, head_dim_, value_dim_, page_size_;
  std::vector<std::vector<float>> pages_;      // each [K: Hkv][P][Dk] then [V: Hkv][P][Dv]
  std::vector<std::vector<int>> block_table_;  // logical page -> physical page, per sequence
  std::vector<int> lengths_;
};

}  // namespace attest::kernels
