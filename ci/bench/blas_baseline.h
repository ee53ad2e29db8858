// The peer baseline: attention as a user writes it without a fused kernel. The score matrix
// S = Q K^T is materialized with OpenBLAS sgemm, masked, softmaxed row by row, then O = P V.
// A correct kernel (certify it as baseline:blas); its memory grows as Tq x Tk.
#pragma once

#include <memory>

#include "attest/kernels/kernel.h"

namespace attest {

std::unique_ptr<Kernel> make_blas_baseline_kernel();
void set_blas_threads(int threads);  // the bench runs it single-threaded like every kernel

}  // namespace attest
