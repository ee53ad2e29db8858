// The independent high-precision reference (docs/design.md#tolerance-model). Shares no code with the kernels.
#pragma once

#include <cstdint>
#include <vector>

#include "attest/model/problem.h"

namespace attest {

// Exact attention for one problem, rounded to double, with what the error bound needs.
struct Reference {
  int working_bits = 0;  // precision the reference computed in

  // Per output element [B][H][Tq][Dv].
  std::vector<double> o;
  std::vector<double> o_residual;     // exact o minus o rounded to double (shows the extra bits)
  std::vector<double> spread;         // S_r = sum_j p_j |v_jr|
  std::vector<double> spread_cond;    // sum_j p_j |v_jr| A_j
  std::vector<double> spread_logit;   // sum_j p_j |v_jr| |s_j - m|
  std::vector<double> max_abs_value;  // max over visible j of |v_jr|
  std::vector<double> value_min;      // min over visible j of v_jr, and 0 with a sink (the convex hull)
  std::vector<double> value_max;      // max over visible j of v_jr

  // Per row [B][H][Tq].
  std::vector<double> lse;  // -inf for an empty row
  std::vector<double> lse_residual;
  std::vector<std::uint8_t> empty;   // 1 when the row sees no key
  std::vector<int> visible_keys;     // number of visible keys
  std::vector<double> cond_max;      // A_max = max_j A_j
  std::vector<double> mean_cond;     // sum_j p_j A_j
  std::vector<double> logit_spread;  // R = sum_j p_j |s_j - m|
  std::vector<double> logit_range;   // max over visible j of |s_j - m|

  // Weights and the mask [B][H][Tq][Tk] (only when asked for).
  std::vector<double> weights;
  std::vector<std::uint8_t> visible;

  // Per row [B][H][Tq]: 1 where the row was computed. Empty: every row was (the default);
  // rows not computed hold NaN and are never compared.
  std::vector<std::uint8_t> computed;
  bool has_row(std::size_t row) const { return computed.empty() || computed[row] != 0; }

  bool finite() const;  // no NaN in o or lse of a computed row (a NaN is a reference failure)
};

struct ReferenceOptions {
  bool weights = false;
  // Only these query rows (of every batch entry and head); empty: all. A long problem is
  // checked on a sample of rows: each row costs Tk exact dot products.
  std::vector<int> query_rows;
  int jobs = 1;  // threads; rows are independent
};

// mpfr_float with 136 bits (correctly rounded exp and log): the oracle used everywhere.
Reference compute_reference(const Problem& p, ReferenceOptions options = {});
// The same algorithm at 216 bits, to cross-check the oracle.
Reference compute_reference_high(const Problem& p, ReferenceOptions options = {});
// The same algorithm in double-double (106 bits, at least 100 correct): about 10x faster than
// MPFR at 136 bits, which cross-checks it in tests.
Reference compute_reference_fast(const Problem& p, ReferenceOptions options = {});
// The mask as the reference evaluates it, [B][Tq][Tk] (1 = visible; it is the same for every
// head): what the weights' `visible` holds, without computing any attention.
std::vector<std::uint8_t> reference_mask(const Problem& p);
// The same algorithm in long double: for cross-checks of fast paths only, not an oracle.
Reference compute_reference_long_double(const Problem& p, ReferenceOptions options = {});

}  // namespace attest
