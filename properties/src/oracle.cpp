#include "attest/properties/oracle.h"

#include <cstring>

#include "attest/model/problem_fields.h"

namespace attest {
namespace {

// FNV-1a over 8-byte words (bytes at a time made the hash cost more than a small problem's
// kernel run), with a fold after each multiply so high input bits reach the low hash bits.
class WordHash {
 public:
  void bytes(const void* data, std::size_t n) {
    const auto* c = static_cast<const unsigned char*>(data);
    std::size_t i = 0;
    for (; i + 8 <= n; i += 8) {
      std::uint64_t w;
      std::memcpy(&w, c + i, 8);
      mix(w);
    }
    std::uint64_t tail = 0;
    if (i < n) std::memcpy(&tail, c + i, n - i);  // never memcpy from an empty vector's null data()
    mix(tail ^ (std::uint64_t(n - i) << 59));
  }
  template <typename T>
  void value(const T& x) {
    bytes(&x, sizeof x);
  }
  template <typename T>
  void vector(const std::vector<T>& v) {
    value(v.size());
    bytes(v.data(), v.size() * sizeof(T));
  }
  std::uint64_t get() const { return hash_; }

 private:
  void mix(std::uint64_t w) {
    hash_ = (hash_ ^ w) * 0x100000001b3ULL;
    hash_ ^= hash_ >> 29;
  }
  std::uint64_t hash_ = 0xcbf29ce484222325ULL;
};

// Hashes every field the field list names, so a field added there is never missed here.
struct FieldHasher {
  WordHash& h;
  template <typename T>
  void integer(const char*, const T& x, long long, long long, bool = false) {
    h.value(x);
  }
  template <typename T>
  void optional_integer(const char*, const std::optional<T>& x, long long, long long) {
    h.value(x.has_value());
    h.value(x.value_or(0));
  }
  void number(const char*, double x, bool = false) { h.value(x); }
  void optional_number(const char*, const std::optional<double>& x) {
    h.value(x.has_value());
    h.value(x.value_or(0.0));
  }
  void boolean(const char*, bool x) { h.value(x); }
  void precision(const char*, Scalar x) { h.value(x); }
  void integers(const char*, const std::vector<int>& x, long long, long long) { h.vector(x); }
  void flags(const char*, const std::vector<std::uint8_t>& x) { h.vector(x); }
  void floats(const char*, const std::vector<float>& x, bool = false) { h.vector(x); }
};

template <typename T>
std::size_t bytes_of(const std::vector<T>& v) {
  return v.capacity() * sizeof(T);
}

std::size_t bytes_of(const Reference& r) {
  std::size_t n = sizeof r;
  for (const auto* v :
       {&r.o, &r.o_residual, &r.spread, &r.spread_cond, &r.spread_logit, &r.max_abs_value, &r.value_min, &r.value_max,
        &r.lse, &r.lse_residual, &r.cond_max, &r.mean_cond, &r.logit_spread, &r.logit_range, &r.weights})
    n += bytes_of(*v);
  return n + bytes_of(r.empty) + bytes_of(r.visible_keys) + bytes_of(r.visible) + bytes_of(r.computed);
}

}  // namespace

std::uint64_t fingerprint(const Problem& p) {
  WordHash h;
  FieldHasher visitor{h};
  visit_problem_fields(p, visitor);
  return h.get();
}

const Reference& Oracle::reference(const Problem& p, bool weights) {
  const std::uint64_t key = fingerprint(p);
  for (auto it = entries_.begin(); it != entries_.end(); ++it) {
    if (it->key == key && (it->weights || !weights)) {
      entries_.splice(entries_.begin(), entries_, it);
      return entries_.front().ref;
    }
  }
  ++computations_;
  // The double-double path: 100+ correct bits (cross-checked against MPFR in reference tests).
  Reference ref = compute_reference_fast(p, {.weights = weights, .jobs = jobs_});
  const std::size_t bytes = bytes_of(ref);
  entries_.push_front({key, weights, std::move(ref), bytes});
  bytes_ += bytes;
  // The most recent entries stay whatever they hold: a check keeps references to its last few.
  while (entries_.size() > capacity_ || (bytes_ > max_bytes_ && entries_.size() > kKeptEntries)) {
    bytes_ -= entries_.back().bytes;
    entries_.pop_back();
  }
  return entries_.front().ref;
}

}  // namespace attest
