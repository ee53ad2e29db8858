// Caches reference results so several kernels and properties share one exact computation.
#pragma once

#include <cstdint>
#include <list>
#include <utility>

#include "attest/model/problem.h"
#include "attest/reference/reference.h"

namespace attest {

class Oracle {
 public:
  // Entries past the kKeptEntries most recent also go once the cache holds more than max_bytes: a
  // run's shared oracle (certify's, selfcheck's) keeps many small problems, not many long ones.
  static constexpr std::size_t kKeptEntries = 16, kMaxBytes = std::size_t(256) << 20;
  explicit Oracle(std::size_t capacity = 8, std::size_t max_bytes = kMaxBytes)
      : capacity_(capacity), max_bytes_(max_bytes) {}
  // The reference for p (with weights when asked); computed once per distinct problem.
  const Reference& reference(const Problem& p, bool weights = false);
  std::size_t computations() const { return computations_; }
  void set_jobs(int jobs) { jobs_ = jobs; }  // threads per reference computation

 private:
  struct Entry {
    std::uint64_t key;
    bool weights;
    Reference ref;
    std::size_t bytes;
  };
  std::size_t capacity_, max_bytes_;
  std::size_t bytes_ = 0;  // what the entries hold
  std::size_t computations_ = 0;
  int jobs_ = 1;
  std::list<Entry> entries_;  // most recent first
};

// A fingerprint of every field and buffer of a problem.
std::uint64_t fingerprint(const Problem& p);

}  // namespace attest
