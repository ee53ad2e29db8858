// Which cached positions a decoder keeps (docs/design.md#serving-caches). Declared, never inferred: exact
// attention over the retained positions, each at its original position, is the correct output.
#pragma once

#include <string>

namespace attest {

struct CachePolicy {
  enum class Kind {
    kFull,         // every position
    kWindow,       // the newest `recent`: key j is kept for the query at p iff p - j < recent
    kSinksRecent,  // the first `sinks` and the newest `recent`: j < sinks or p - j < recent
    kExplicit,     // the session reports, per step and query, the positions it attended
  };
  Kind kind = Kind::kFull;
  int sinks = 0;
  int recent = 0;

  bool evicts() const { return kind != Kind::kFull; }
  // Whether key position j is kept for the query at position p >= j (kWindow, kSinksRecent).
  bool retains(long long j, long long p) const;
  // Up to this many positions nothing is evicted (kWindow, kSinksRecent; kFull: unlimited, -1;
  // kExplicit: unknown, 0).
  long long exact_up_to() const;
  // "sinks 4 + recent 32", "window 64", "explicit", "full".
  std::string summary() const;
  // Throws std::invalid_argument naming the field.
  void validate() const;
  bool operator==(const CachePolicy&) const = default;
};

const char* to_string(CachePolicy::Kind kind);

}  // namespace attest
