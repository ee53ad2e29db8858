// The kernels of the bench that the `attest` program names (ci/isolation/kernel_resolver.h):
// registered here, in the program's own sources, so that the library (libattest.a) carries no
// bench code and the resolver includes none.
#include "blas_baseline.h"
#include "kernel_resolver.h"

namespace {

[[maybe_unused]] const bool blas_registered =
    (attest::register_named_kernel("baseline:blas", attest::make_blas_baseline_kernel), true);

}  // namespace
