// Gate 2 behind an entry rounding: a kernel declaring Q, K and V rounded to f16 on entry is judged
// from the exact result of the rounded inputs, in its arithmetic's units (f32), so an undeclared
// f16 accumulator fails gate 2 itself (before, in f16 units, only gate 1 caught it); the honest
// f16-entry kernel passes it.
#include <gtest/gtest.h>

#include <algorithm>
#include <iostream>
#include <string>
#include <vector>

#include "attest/kernels/builtin_kernels.h"
#include "attest/mutants/mutants.h"
#include "attest/properties/generators.h"
#include "attest/properties/precision_gate.h"
#include "quick_certification.h"

namespace attest {
namespace {

TEST(GateTwoBehindEntryRounding, UndeclaredF16AccumulatorFailsGateTwo) {
  const auto kernel = make_in_process_kernel("mutant:entry_f16_accumulator_fp16");
  const std::vector<std::string> names = blocking_checks(certify_quick(*kernel, "entry-f16-acc"));
  EXPECT_NE(std::find(names.begin(), names.end(), "precision_gate"), names.end()) << ::testing::PrintToString(names);
}

// What main measured: the same problems judged from the unrounded inputs' exact result in the
// declared (f16) units pass the mutant; from the rounded inputs', in f32 units, gate 2 fails it.
TEST(GateTwoBehindEntryRounding, TheF16UnitsPassedWhatTheArithmeticsUnitsFail) {
  const auto kernel = make_in_process_kernel("mutant:entry_f16_accumulator_fp16");
  const Capabilities caps = kernel->capabilities();
  const rc::Gen<ProblemSpec> gen = gen_spec(caps);
  Oracle oracle(2);
  int failed_now = 0, failed_before = 0;
  for (int i = 0; i < 100; ++i) {
    const Problem p = build_problem(gen(rc::Random(20261207 + i), 100).value(), caps);
    if (!caps.supports(p)) continue;
    const Reference& ref = oracle.reference(p);
    if (!ref.finite()) continue;
    const Outputs out = run_forward(*kernel, p), model = run_forward(*make_model_kernel(caps.precision), p);
    if (const auto now = gate_errors(p, ref, out, model, caps.precision, oracle))
      failed_now += !precision_gate_verdict(*now, now->declared).passed;
    if (const auto before = precision_gate_errors_of(p, ref, out, model, caps.precision))
      failed_before += !precision_gate_verdict(*before, caps.precision).passed;
  }
  std::cout << "gate 2 failed " << failed_before << " problems in f16 units, " << failed_now << " in f32 units\n";
  EXPECT_GT(failed_now, 2 * failed_before);
}

TEST(GateTwoBehindEntryRounding, HonestF16EntryKernelIsCertified) {
  const auto kernel = make_in_process_kernel("tiled-entry-f16");
  const std::vector<std::string> names = blocking_checks(certify_quick(*kernel, "entry-f16"));
  EXPECT_TRUE(names.empty()) << ::testing::PrintToString(names);
}

}  // namespace
}  // namespace attest
