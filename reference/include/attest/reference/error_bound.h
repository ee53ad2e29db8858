// The hard error bound of docs/design.md#tolerance-model: a rigorous first-order bound on a kernel's error,
// per output element, from its declared arithmetic. Never a false alarm on a correct kernel.
#pragma once

#include <cstddef>

#include "attest/model/problem.h"
#include "attest/reference/reference.h"

namespace attest {

// What the bound needs to know about the kernel's arithmetic: each rounding at its own unit
// roundoff (a bf16-storage kernel that accumulates in f32 keeps an f32 sum term).
struct KernelNumerics {
  double score_roundoff = 0x1p-24;       // u of the q.k accumulation and the logit arithmetic
  double sum_roundoff = 0x1p-24;         // u of the P.V accumulator and the final division
  double weight_sum_roundoff = 0x1p-24;  // u of the softmax sum (the P.V accumulator's unless declared apart)
  double entry_score = 0.0;              // relative error of each product q_i k_i from Q and K rounded on entry
  double entry_value = 0.0;              // relative error of each v_jr from V rounded on entry
  // Absolute errors of entry rounding below the entry format's normal range (a value flushed to a
  // subnormal or zero): of each logit, and of each value (half the format's smallest spacing).
  double entry_score_absolute = 0.0;
  double entry_value_absolute = 0.0;
  double output_roundoff = 0x1p-24;     // u of O's storage format (its final rounding)
  double exp_error = 0x1p-23;           // u_e, relative error of one exp (about 2u for glibc)
  double underflow_quantum = 0x1p-149;  // spacing of the smallest subnormals of the accumulator
  double output_quantum = 0x1p-149;     // ... of O's storage format (O below it rounds to a multiple)
  double weight_quantum = 0.0;          // ... of P's format when P is rounded (a weight below it flushes)
  int key_tile = 0;                     // keys per online-softmax tile; 0 = a single pass over all keys
  double weight_rounding = 0.0;         // u_P when P is rounded below the accumulation precision
  int extra_tiles = 0;                  // key tiles beyond those of the problem's own Tk

  static KernelNumerics f32(int key_tile);
};

// Terms each summed value passes through: within a tile of key_tile keys, then one rescale and
// one add per tile (a single pass: every visible key).
double summation_terms(int visible_keys, int key_tile, int tiles);

// gamma(n) = n u / (1 - n u); infinity once n u >= 1.
double gamma_n(double n, double u);

// Bound on |o_kernel - o_exact| for output element `element` ([B][H][Tq][Dv] index).
double output_bound(const Problem& p, const Reference& ref, std::size_t element, const KernelNumerics& k);
// The part of output_bound that is absolute (underflow and flushes, whatever the output's size).
double absolute_bound(const Problem& p, const Reference& ref, std::size_t element, const KernelNumerics& k);
// Bound on |lse_kernel - lse_exact| for row `row` ([B][H][Tq] index).
double lse_bound(const Problem& p, const Reference& ref, std::size_t row, const KernelNumerics& k);

}  // namespace attest
