#include "fuzz_targets.h"

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <vector>

#include "attest/kernel.h"
#include "attest/oracle.h"
#include "attest/properties.h"
#include "fuzz_input.h"
#include "attest/mutants.h"

namespace attest::fuzz {
namespace {

std::unique_ptr<Kernel> kernel_named(const std::string& name) {
  if (name.starts_with("mutant:")) return find_mutant(name.substr(7)).make();
  if (name.starts_with("builtin:")) return make_kernel(name.substr(8));
  return make_kernel(name);
}

// The kernels under test: ATTEST_FUZZ_KERNEL, or every registered kernel.
const std::vector<std::unique_ptr<Kernel>>& kernels() {
  static const std::vector<std::unique_ptr<Kernel>> all = [] {
    std::vector<std::unique_ptr<Kernel>> out;
    if (const char* chosen = std::getenv("ATTEST_FUZZ_KERNEL"); chosen && *chosen) {
      out.push_back(kernel_named(chosen));
    } else {
      for (const KernelEntry& e : kernel_registry()) out.push_back(e.make());
    }
    return out;
  }();
  return all;
}

Flavor flavor_of(Target t) {
  switch (t) {
    case Target::kMaskLeak: return Flavor::kMasks;
    case Target::kOverflow: return Flavor::kOverflow;
    case Target::kDecode: return Flavor::kDecode;
    case Target::kDifferential: return Flavor::kGeneral;
  }
  return Flavor::kGeneral;
}

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

std::optional<Violation> run_target_on(Target target, const std::uint8_t* data, std::size_t size,
                                       const Kernel& kernel, Oracle& oracle) {
  const FuzzCase c = decode_input(data, size, flavor_of(target));
  if (!kernel.capabilities().supports(c.problem)) return std::nullopt;
  if (target == Target::kDecode && !kernel.capabilities().decode()) return std::nullopt;
  for (const Verdict& v : check(target, c, kernel, oracle))
    if (v.applicable && !v.passed) return Violation{kernel.name(), v, c.problem};
  return std::nullopt;
}

std::optional<Violation> run_target(Target target, const std::uint8_t* data, std::size_t size) {
  // Room for every reference one input needs (a property may ask for several edited problems),
  // so the kernels after the first reuse them instead of recomputing.
  static Oracle oracle(32);
  for (const auto& kernel : kernels())
    if (auto v = run_target_on(target, data, size, *kernel, oracle)) return v;
  return std::nullopt;
}

int fuzz_one_input(Target target, const std::uint8_t* data, std::size_t size) {
  const std::optional<Violation> v = run_target(target, data, size);
  if (!v) return 0;
  const Shape& s = v->problem.shape;
  std::fprintf(stderr, "\n%s: %s violates %s (B=%d H=%d Hkv=%d Tq=%d Tk=%d Dk=%d Dv=%d):\n  %s\n", target_name(target),
               v->kernel.c_str(), v->verdict.property.c_str(), s.batch, s.heads, s.kv_heads, s.q_len, s.k_len,
               s.head_dim, s.value_dim, v->verdict.detail.c_str());
  std::fflush(stderr);
  std::abort();
}

}  // namespace attest::fuzz
