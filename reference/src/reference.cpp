#include "attest/reference.h"

#include <boost/multiprecision/mpfr.hpp>
#include <cmath>

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

DoubleDouble cos(DoubleDouble a) { return from_mpfr(boost::multiprecision::cos(to_mpfr(a))); }
DoubleDouble sin(DoubleDouble a) { return from_mpfr(boost::multiprecision::sin(to_mpfr(a))); }
DoubleDouble pow(DoubleDouble a, DoubleDouble b) { return from_mpfr(boost::multiprecision::pow(to_mpfr(a), to_mpfr(b))); }

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

Reference compute_reference_long_double(const Problem& p, ReferenceOptions options) {
  return reference_detail::compute<long double>(p, options, std::numeric_limits<long double>::digits);
}

}  // namespace attest
