#include "check_plan.h"

#include <fmt/format.h>

#include <algorithm>
#include <memory>

#include "attest/properties/properties.h"
#include "attest/properties/session_forward.h"
#include "attest/properties/size_ladder.h"
#include "check_selection.h"
#include "fuzz_targets.h"

namespace attest {
namespace {

using Outcome = PlannedCheck::Outcome;

PlannedCheck judged(const std::string& stage, const std::string& check, const std::string& not_covered) {
  return {stage, check, not_covered.empty() ? Outcome::kRuns : Outcome::kNotCovered, not_covered};
}

}  // namespace

std::vector<PlannedCheck> plan_checks(const Kernel& kernel, const CertifyOptions& options) {
  const Capabilities caps = kernel.capabilities();
  std::vector<PlannedCheck> plan;
  // A stage that is off, or a check --check left out, is absent from the certificate.
  auto add = [&](PlannedCheck c, const std::string& stage_off) {
    if (!stage_off.empty())
      c = {c.stage, c.check, Outcome::kAbsent, stage_off};
    else if (options.checks && !options.checks->selects(c.check))
      c = {c.stage, c.check, Outcome::kAbsent, "--check left it out"};
    plan.push_back(std::move(c));
  };
  for (const CheckPlan& p : deterministic_plans())
    add(judged(p.stage, p.check, not_covered_because(find_property(p.property), caps)), "");
  if (caps.paths.empty() || !caps.forward())
    add({"deterministic", kDeclaredPathsCheck, Outcome::kAbsent,
         caps.paths.empty() ? "the kernel declares no paths" : "the kernel is decode-only"},
        "");
  else
    add(judged("deterministic", kDeclaredPathsCheck, ""), "");

  const std::string sized_off = options.sized_stages ? "" : "--no-size-stages";
  const bool ladder_empty = options.sized_stages && ladder_cases(caps, options.sizes).empty();
  add(judged("ladder", kLadderCheck, ladder_empty ? sized_not_covered(caps) : ""), sized_off);
  const LongCases long_cases = options.sized_stages ? split_long_cases(caps, options.sizes) : LongCases{};
  add(judged("long", kLongCheck, options.sized_stages && long_cases.forward.empty() ? sized_not_covered(caps) : ""),
      sized_off);
  auto present = [&](const char* check, bool has_cases, const char* why_none) {
    add(has_cases ? judged("long", check, "") : PlannedCheck{"long", check, Outcome::kAbsent, why_none}, sized_off);
  };
  present(kLongBackwardCheck, !long_cases.backward.empty(), "no backward case: the kernel declares no backward");
  present(kLongEvictionCheck, !long_cases.retained.empty(),
          "no session past an eviction: the kernel's cache evicts nothing");
  present(kLongPagedCheck, !long_cases.paged.empty(), "no paged session: the kernel declares no block-table cache");

  const std::string properties_off = options.property_cases > 0 ? "" : "--budget 0: no property stage";
  for (const PropertyInfo& property : property_catalogue()) {
    // A decode-only kernel meets a property through its decode sessions, as drive_property does.
    const std::unique_ptr<Kernel> sessions = session_stand_in(property, kernel);
    add(judged("property", property.name,
               not_covered_because(property, (sessions ? *sessions : kernel).capabilities())),
        properties_off);
  }
  const std::string fuzz_off = options.fuzz_seconds > 0 ? "" : "no fuzz stage (--fuzz-seconds is 0)";
  for (const fuzz::TargetInfo& target : fuzz::target_table())
    add(judged("fuzz", target.name, fuzz_not_covered(target, caps)), fuzz_off);
  return plan;
}

std::string format_plan(const std::string& source, const std::string& name, const std::vector<PlannedCheck>& plan) {
  long runs = 0, listed = 0;
  std::size_t width = 5;
  for (const PlannedCheck& c : plan) {
    runs += c.outcome == Outcome::kRuns;
    listed += c.outcome != Outcome::kAbsent;
    width = std::max(width, c.check.size());
  }
  std::string out = fmt::format("{} ({}): {} of {} checks apply\n", name, source, runs, listed);
  for (const PlannedCheck& c : plan) {
    const std::string outcome = c.outcome == Outcome::kRuns         ? "runs"
                                : c.outcome == Outcome::kNotCovered ? "not covered: " + c.why
                                                                    : "not run: " + c.why;
    out += fmt::format("  {:<14} {:<{}}  {}\n", c.stage, c.check, width, outcome);
  }
  return out;
}

}  // namespace attest
