#include "kernel_lookup.h"

#include "mutants.h"

namespace attest {

std::unique_ptr<Kernel> resolve_kernel(const std::string& name) {
  const std::string builtin = "builtin:", mutant = "mutant:";
  if (name.rfind(mutant, 0) == 0) return find_mutant(name.substr(mutant.size())).make();
  if (name.rfind(builtin, 0) == 0) return make_kernel(name.substr(builtin.size()));
  return make_kernel(name);
}

}  // namespace attest
