#include "attest/reference/reference.h"

#include <array>
#include <bit>
#include <boost/multiprecision/mpfr.hpp>
#include <cmath>
#include <cstdint>
#include <unordered_map>

#include "double_double.h"
#include "four_key_dot.h"
#include "reference_algorithm.h"
#include "x86_64_v3.h"

namespace attest {
namespace {

namespace mp = boost::multiprecision;
// Digits are decimal: 41 digits = 136 bits, 65 digits = 216 bits. Stack storage avoids
// a heap allocation per temporary.
using Oracle136 = mp::number<mp::mpfr_float_backend<41, mp::allocate_stack>, mp::et_off>;
using Oracle216 = mp::number<mp::mpfr_float_backend<65, mp::allocate_stack>, mp::et_off>;

using Mpfr136 = Oracle136;

Mpfr136 to_mpfr(reference_detail::DoubleDouble a) { return Mpfr136(a.hi()) + Mpfr136(a.lo()); }

reference_detail::DoubleDouble from_mpfr(const Mpfr136& x) {
  const double hi = static_cast<double>(x);
  return reference_detail::DoubleDouble::from_parts(hi, static_cast<double>(x - Mpfr136(hi)));
}

}  // namespace

namespace reference_detail {

// RoPE needs cos, sin and pow of the same few arguments over and over (the same positions and
// frequencies in every problem); each takes microseconds in MPFR, so results are remembered.
struct MemoKey {
  char function;
  std::array<std::uint64_t, 4> bits;  // the arguments' bit patterns: exact, and NaN-safe
  bool operator==(const MemoKey&) const = default;
};
struct MemoKeyHash {
  std::size_t operator()(const MemoKey& k) const {
    std::uint64_t h = static_cast<unsigned char>(k.function);
    for (std::uint64_t b : k.bits) h = (h ^ b) * 0x9e3779b97f4a7c15ULL, h ^= h >> 31;
    return h;
  }
};

template <typename F>
DoubleDouble remembered(char function, DoubleDouble a, DoubleDouble b, F compute) {
  thread_local std::unordered_map<MemoKey, DoubleDouble, MemoKeyHash> memo;
  const MemoKey key{function,
                    {std::bit_cast<std::uint64_t>(a.hi()), std::bit_cast<std::uint64_t>(a.lo()),
                     std::bit_cast<std::uint64_t>(b.hi()), std::bit_cast<std::uint64_t>(b.lo())}};
  if (auto it = memo.find(key); it != memo.end()) return it->second;
  if (memo.size() >= (1u << 16)) memo.clear();  // bounded: long runs with many angles
  return memo.emplace(key, compute()).first->second;
}

DoubleDouble cos(DoubleDouble a) {
  return remembered('c', a, {}, [&] { return from_mpfr(boost::multiprecision::cos(to_mpfr(a))); });
}
DoubleDouble sin(DoubleDouble a) {
  return remembered('s', a, {}, [&] { return from_mpfr(boost::multiprecision::sin(to_mpfr(a))); });
}
DoubleDouble pow(DoubleDouble a, DoubleDouble b) {
  return remembered('p', a, b, [&] { return from_mpfr(boost::multiprecision::pow(to_mpfr(a), to_mpfr(b))); });
}

void release_thread_caches() {
  // MPFR keeps its constants (pi for cos and sin, log 2 for pow) per thread; a worker thread
  // that ends without freeing them leaks them.
  mpfr_free_cache2(MPFR_FREE_LOCAL_CACHE);
}

}  // namespace reference_detail

namespace {

#ifdef ATTEST_X86_64_V3_CLONES
// A worker thread's entry is compiled apart from the clone (it is not flattened into it): its
// rows run the clone's code only through a function compiled like the clone.
struct CloneWorkers {
  template <typename Body>
  [[gnu::target("arch=x86-64-v3") ATTEST_FLATTEN_ORACLE]] void operator()(Body& body, int job) const {
    body(job);
  }
};

// The same instantiation compiled for x86-64-v3 (and flattened into one function), so that each
// double-double product is an FMA instruction instead of a call to the library's fma (both are
// exact: the results are identical bit for bit), and the four keys' lanes are AVX vectors.
// Picked at run time.
[[gnu::target("arch=x86-64-v3") ATTEST_FLATTEN_ORACLE]] Reference compute_fast_with_fma(const Problem& p,
                                                                                        ReferenceOptions options,
                                                                                        bool four_wide) {
  return reference_detail::compute<reference_detail::DoubleDouble>(
      p, options, 100, reference_detail::FourKeyDots(four_wide), CloneWorkers{});
}
#endif

Reference compute_fast(const Problem& p, ReferenceOptions options, bool four_wide) {
  // 106-bit double-double; its sums lose up to log2(T) bits in the worst case, so it reports
  // 100 working bits (the bound adds its error as magnitude x 8 x 2^-100) and the tests hold
  // it to 100 correct bits against MPFR.
#if defined(__x86_64__) && defined(__GNUC__)
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    return compute_fast_with_fma(p, options, four_wide);
#endif
  return reference_detail::compute<reference_detail::DoubleDouble>(p, options, 100,
                                                                   reference_detail::FourKeyDots(four_wide));
}

}  // namespace

bool Reference::finite() const {
  const std::size_t width = lse.empty() ? 0 : o.size() / lse.size();
  for (std::size_t row = 0; row < lse.size(); ++row) {
    if (!has_row(row)) continue;
    if (std::isnan(lse[row])) return false;
    for (std::size_t c = 0; c < width; ++c)
      if (std::isnan(o[row * width + c])) return false;
  }
  return true;
}

Reference compute_reference(const Problem& p, ReferenceOptions options) {
  return reference_detail::compute<Oracle136>(p, options, std::numeric_limits<Oracle136>::digits);
}

Reference compute_reference_high(const Problem& p, ReferenceOptions options) {
  return reference_detail::compute<Oracle216>(p, options, std::numeric_limits<Oracle216>::digits);
}

Reference compute_reference_fast(const Problem& p, ReferenceOptions options) { return compute_fast(p, options, true); }

Reference reference_detail::compute_reference_fast_one_key(const Problem& p, ReferenceOptions options) {
  return compute_fast(p, options, false);
}

std::vector<std::uint8_t> reference_mask(const Problem& p) {
  p.validate();
  const Shape& s = p.shape;
  std::vector<std::uint8_t> mask;
  mask.reserve(std::size_t(s.batch) * s.q_len * s.k_len);
  std::vector<char> allowed;
  for (int b = 0; b < s.batch; ++b)
    for (int i = 0; i < s.q_len; ++i) {
      reference_detail::visible_keys_of_row(p, b, i, allowed);
      mask.insert(mask.end(), allowed.begin(), allowed.end());
    }
  return mask;
}

Reference compute_reference_long_double(const Problem& p, ReferenceOptions options) {
  return reference_detail::compute<long double>(p, options, std::numeric_limits<long double>::digits);
}

}  // namespace attest
