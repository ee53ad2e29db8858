// Caches reference results so several kernels and properties share one exact computation.
#pragma once

#include <cstdint>
#include <list>
#include <utility>

#include "attest/problem.h"
#include "attest/reference.h"

namespace attest {

class Oracle {
 public:
  explicit Oracle(std::size_t capacity = 8) : capacity_(capacity) {}
  // The reference for p (with weights when asked); computed once per distinct problem.
  const Reference& reference(const Problem& p, bool weights = false);
  std::size_t computations() const { return computations_; }
  void set_jobs(int jobs) { jobs_ = jobs; }  // threads per reference computation

 private:
  struct Entry {
    std::uint64_t key;
    bool weights;
    Reference ref;
  };
  std::size_t capacity_;
  std::size_t computations_ = 0;
  int jobs_ = 1;
  std::list<Entry> entries_;  // most recent first
};

// A fingerprint of every field and buffer of a problem.
std::uint64_t fingerprint(const Problem& p);

}  // namespace attest
