// The regression gate compares claims, not just errors: a certificate written by this attest,
// read back as a baseline, against a later run that claims less in each way the gate knows.
#include <gtest/gtest.h>

#include <algorithm>

#include "certificate.h"

namespace attest {
namespace {

CheckResult check(const std::string& name, long cases, long effective, double utilisation = 0.1) {
  CheckResult r{"k", "property", name};
  r.cases = cases, r.effective = effective, r.floor = effective_floor(cases), r.worst_utilisation = utilisation;
  r.feature_cases = {{"causal", effective}, {"gqa", effective}};
  r.paths["tile-path"] = {cases, utilisation};
  return r;
}

KernelReport full_report() {
  KernelReport k{"plugin.so", "k", Capabilities{}, {}, {}};
  k.checks = {check("matches_reference", 100, 100), check("zero_masked_weight", 100, 80),
              check("gqa_matches_repeated_heads", 100, 100)};
  return k;
}

// Reasons the gate gives for `now` against a baseline certified from `before`.
std::vector<std::string> gate(const KernelReport& before, const KernelReport& now) {
  const Baseline baseline = parse_baseline(certificate_json({1, 100, {before}}));
  return regressions(baseline, {1, 100, {now}}, 2.0);
}

bool mentions(const std::vector<std::string>& reasons, const std::string& text) {
  return std::any_of(reasons.begin(), reasons.end(),
                     [&](const std::string& r) { return r.find(text) != std::string::npos; });
}

TEST(RegressionGate, TheSameClaimsAreNoRegression) { EXPECT_TRUE(gate(full_report(), full_report()).empty()); }

// A run made with other options (here a shorter long stage) is refused as a comparison unless
// --baseline-any-options, and then the caller prints the difference.
TEST(RegressionGate, OtherOptionsAreARegressionUnlessAllowed) {
  Baseline baseline = parse_baseline(certificate_json({1, 100, {full_report()}, std::nullopt, {{"max_len", "32768"}}}));
  const CertificateInfo now{1, 100, {full_report()}, std::nullopt, {{"max_len", "1024"}}};
  EXPECT_TRUE(mentions(regressions(baseline, now, 2.0), "option max_len is 1024, the baseline's 32768"));
  baseline.any_options = true;
  EXPECT_TRUE(regressions(baseline, now, 2.0).empty());
  EXPECT_EQ(options_difference(baseline, now).value_or(""), "option max_len is 1024, the baseline's 32768");
  // A baseline written before options were recorded is compared as before.
  EXPECT_TRUE(regressions(parse_baseline(certificate_json({1, 100, {full_report()}})), now, 2.0).empty());
}

TEST(RegressionGate, EachWayOfClaimingLessIsNamed) {
  KernelReport now = full_report();
  now.capabilities.features.erase(Feature::kGqa);                 // a capability lost
  now.checks[2].not_covered = "the kernel does not declare gqa";  // a passing check not covered now
  now.checks[1].effective = 30;  // fewer effective cases: above its floor, below 80 / 2
  now.checks[0].paths.clear();   // an internal path no longer seen
  now.checks[1].paths.clear();
  now.checks[2].paths.clear();
  now.capabilities.precision.accumulator = Scalar::kBF16;  // a looser precision
  now.capabilities.contract.causal_required = true;        // a narrower contract
  now.capabilities.contract.head_dims = {64};
  const std::vector<std::string> reasons = gate(full_report(), now);
  for (const char* expected :
       {"no longer declares gqa", "gqa_matches_repeated_heads: passed in the baseline, not covered now",
        "zero_masked_weight: 30 effective cases, the baseline had 80", "internal path 'tile-path'",
        "looser precision: accumulator bf16", "contract narrowed: causal_required", "contract narrowed to head widths"})
    EXPECT_TRUE(mentions(reasons, expected)) << "missing: " << expected;
}

// Every declaration field the certificate records is compared: a smaller cache, another input
// domain or empty-row policy, other declared paths.
TEST(RegressionGate, AChangedDeclarationIsNamed) {
  KernelReport before = full_report();
  before.capabilities.cache = {CachePolicy::Kind::kSinksRecent, 4, 100};
  KernelReport now = before;
  now.capabilities.cache.recent = 32;
  now.capabilities.inputs = InputDomain::kFinite;
  now.capabilities.empty_rows = EmptyRowPolicy::kNan;
  const std::vector<std::string> reasons = gate(before, now);
  for (const char* expected :
       {"declaration changed: cache", "declaration changed: inputs", "declaration changed: empty_rows"})
    EXPECT_TRUE(mentions(reasons, expected)) << "missing: " << expected;
  EXPECT_TRUE(gate(before, before).empty());
}

TEST(RegressionGate, InsufficientAndAnotherKernelAreRegressions) {
  KernelReport now = full_report();
  now.checks[1].effective = 0;  // below its floor: insufficient
  EXPECT_TRUE(mentions(gate(full_report(), now), "zero_masked_weight: passed in the baseline, insufficient now"));
  now = full_report();
  now.name = "other";
  EXPECT_TRUE(mentions(gate(full_report(), now), "the baseline certified kernel k, this run certifies other"));
}

// The long stage's case count follows the machine's speed: a busier run reaching fewer lengths is
// no regression while it reaches its required length, and one short of it is.
TEST(RegressionGate, ATimeBudgetedStageIsJudgedByItsRequiredLength) {
  KernelReport before = full_report();
  CheckResult long_stage = check("sampled_rows", 13, 13);
  long_stage.stage = "long";
  long_stage.time_budget = 20, long_stage.required_len = 1024, long_stage.reached_len = 32768;
  before.checks.push_back(long_stage);
  KernelReport now = before;
  now.checks.back().cases = now.checks.back().effective = 4;
  now.checks.back().reached_len = 4096;
  now.checks.back().not_reached = {
      "square_t8192_d64 (Tq 8192, Tk 8192): predicted 30 s, 9 s of the 20 s time budget left"};
  EXPECT_TRUE(gate(before, now).empty());
  now.checks.back().reached_len = 512;
  EXPECT_TRUE(mentions(gate(before, now), "sampled_rows: passed in the baseline, insufficient now"));
  before.checks.back().time_budget = 0;  // without a time budget, fewer cases are a regression as ever
  now = before;
  now.checks.back().cases = now.checks.back().effective = 4;
  EXPECT_TRUE(mentions(gate(before, now), "sampled_rows: 4 effective cases, the baseline had 13"));
}

TEST(RegressionGate, VersionOneBaselinesStillRead) {
  const std::string v1 = R"({"format": "attest-certificate", "version": 1, "kernels": [{"name": "k", "paths": [],
    "checks": [{"stage": "property", "check": "matches_reference", "verdict": "pass", "cases": 100,
                "worst_utilisation": 0.1}]}]})";
  KernelReport now = full_report();
  now.checks[0].failures = 1;
  now.checks[0].first_failure = "boom";
  const std::vector<std::string> reasons = regressions(parse_baseline(v1), {1, 100, {now}}, 2.0);
  EXPECT_TRUE(mentions(reasons, "matches_reference: passed in the baseline, fails now: boom"));
}

// The declarations that narrow what a verdict vouches for appear in the header and in the verdict
// line, and survive a certificate written and read back (merge reads a shard's declaration).
TEST(Report, DeclarationsAppearInTheHeaderAndTheVerdictLine) {
  KernelReport k = full_report();
  k.capabilities.inputs = InputDomain::kFinite;
  k.capabilities.contract.self_attention_only = true;
  const std::string text = format_report(k);
  EXPECT_NE(text.find("empty rows zero, inputs finite; contract: self-attention only (Tq == Tk, q_offset 0)"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("(contract: self-attention only (Tq == Tk, q_offset 0)); not covered"), std::string::npos)
      << text;
  EXPECT_NE(text.find("; for finite inputs only (masked and bias-hidden keys never NaN or inf)"), std::string::npos)
      << text;
  const std::string document = certificate_json({1, 100, {k}});
  EXPECT_NE(document.find("\"inputs\": \"finite\""), std::string::npos) << document;
  EXPECT_NE(document.find("\"self_attention_only\": true"), std::string::npos) << document;
  // A narrower contract than the baseline's is a regression.
  EXPECT_TRUE(mentions(gate(full_report(), k), "contract narrowed: self_attention_only"));
}

}  // namespace
}  // namespace attest
