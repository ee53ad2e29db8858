#include "attest/reference.h"

#include <boost/multiprecision/mpfr.hpp>
#include <cmath>

#include "reference_algorithm.h"

namespace attest {
namespace {

namespace mp = boost::multiprecision;
// Digits are decimal: 41 digits = 136 bits, 65 digits = 216 bits. Stack storage avoids
// a heap allocation per temporary.
using Oracle136 = mp::number<mp::mpfr_float_backend<41, mp::allocate_stack>, mp::et_off>;
using Oracle216 = mp::number<mp::mpfr_float_backend<65, mp::allocate_stack>, mp::et_off>;

}  // namespace

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

Reference compute_reference_long_double(const Problem& p, ReferenceOptions options) {
  return reference_detail::compute<long double>(p, options, std::numeric_limits<long double>::digits);
}

}  // namespace attest
