#include "attest/reference.h"

#include <boost/multiprecision/mpfr.hpp>
#include <bit>
#include <cmath>
#include <cstdint>
#include <map>
#include <tuple>

#include "double_double.h"
#include "reference_algorithm.h"

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
template <typename F>
DoubleDouble remembered(char function, DoubleDouble a, DoubleDouble b, F compute) {
  using Bits = std::uint64_t;  // keyed by bit pattern: exact, and NaN-safe
  using Key = std::tuple<char, Bits, Bits, Bits, Bits>;
  thread_local std::map<Key, DoubleDouble> memo;
  const Key key{function, std::bit_cast<Bits>(a.hi()), std::bit_cast<Bits>(a.lo()), std::bit_cast<Bits>(b.hi()),
                std::bit_cast<Bits>(b.lo())};
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

}  // namespace reference_detail

bool Reference::finite() const {
  for (double x : o)
    if (std::isnan(x)) return false;
  for (double x : lse)
    if (std::isnan(x)) return false;
  return true;
}

Reference compute_reference(const Problem& p, ReferenceOptions options) {
  return reference_detail::compute<Oracle136>(p, options, std::numeric_limits<Oracle136>::digits);
}

Reference compute_reference_high(const Problem& p, ReferenceOptions options) {
  return reference_detail::compute<Oracle216>(p, options, std::numeric_limits<Oracle216>::digits);
}

Reference compute_reference_fast(const Problem& p, ReferenceOptions options) {
  // 106-bit double-double; its sums lose up to log2(T) bits in the worst case, so it reports
  // 100 working bits (the bound adds its error as magnitude x 8 x 2^-100) and the tests hold
  // it to 100 correct bits against MPFR.
  return reference_detail::compute<reference_detail::DoubleDouble>(p, options, 100);
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
