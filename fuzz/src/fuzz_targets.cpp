#include "fuzz_targets.h"

#include "attest/kernel.h"
#include "attest/oracle.h"
#include "attest/properties.h"
#include "attest/mutants.h"
#include "fuzz_input.h"

namespace attest::fuzz {
namespace {

std::vector<Verdict> check(Target target, const FuzzCase& c, const Kernel& kernel, Oracle& oracle) {
  const Problem& p = c.problem;
  switch (target) {
    case Target::kMaskLeak:
      return {masked_inputs_have_no_influence(p, kernel, oracle), zero_masked_weight(p, kernel, oracle)};
    case Target::kOverflow:
      // Only where a float32 kernel can hold the intermediates and the exact result is finite.
      if (!within_float_range(p) || !oracle.reference(p).finite()) return {};
      return {matches_reference(p, kernel, oracle)};
    case Target::kDecode: {
      std::vector<int> by_token(p.shape.k_len, 1);
      return {decode_matches_prefill_in_chunks(p, kernel, oracle, {c.chunks, by_token})};
    }
    case Target::kDifferential:
      return {matches_reference(p, kernel, oracle), precision_gate(p, kernel, oracle)};
  }
  return {};
}

}  // namespace

Flavor flavor_of(Target t) {
  switch (t) {
    case Target::kMaskLeak: return Flavor::kMasks;
    case Target::kOverflow: return Flavor::kOverflow;
    case Target::kDecode: return Flavor::kDecode;
    case Target::kDifferential: return Flavor::kGeneral;
  }
  return Flavor::kGeneral;
}

const char* target_name(Target t) {
  switch (t) {
    case Target::kMaskLeak: return "fuzz_mask_leak";
    case Target::kOverflow: return "fuzz_overflow";
    case Target::kDecode: return "fuzz_decode";
    case Target::kDifferential: return "fuzz_differential";
  }
  return "?";
}

std::optional<Target> target_from_name(const std::string& name) {
  for (Target t : {Target::kMaskLeak, Target::kOverflow, Target::kDecode, Target::kDifferential})
    if (name == target_name(t)) return t;
  return std::nullopt;
}

Kernels kernels_named(const std::string& name) {
  Kernels out;
  if (name.empty()) {
    for (const KernelEntry& e : kernel_registry()) out.push_back(e.make());
  } else if (name.starts_with("mutant:")) {
    out.push_back(find_mutant(name.substr(7)).make());
  } else {
    out.push_back(make_kernel(name.starts_with("builtin:") ? name.substr(8) : name));
  }
  return out;
}

std::optional<Violation> run_target_on(Target target, const std::uint8_t* data, std::size_t size,
                                       const Kernel& kernel, Oracle& oracle) {
  const FuzzCase c = decode_input(data, size, flavor_of(target));
  if (!kernel.capabilities().supports(c.problem)) return std::nullopt;
  if (target == Target::kDecode && !kernel.capabilities().decode()) return std::nullopt;
  for (const Verdict& v : check(target, c, kernel, oracle))
    if (v.applicable && !v.passed) return Violation{kernel.name(), v, c.problem};
  return std::nullopt;
}

std::optional<Violation> run_target(Target target, const std::uint8_t* data, std::size_t size,
                                    const Kernels& kernels, Oracle& oracle) {
  for (const auto& kernel : kernels)
    if (auto v = run_target_on(target, data, size, *kernel, oracle)) return v;
  return std::nullopt;
}

}  // namespace attest::fuzz
