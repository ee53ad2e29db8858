#include "attest/properties/compare.h"
#include "attest/properties/harness.h"
#include "attest/properties/properties.h"

namespace attest {

Verdict matches_reference(const Problem& p, const Kernel& kernel, Oracle& oracle) {
  const Reference& ref = oracle.reference(p);
  return compare_with_reference(p, ref, run_guarded(kernel, p), kernel.capabilities()).verdict;
}

}  // namespace attest
