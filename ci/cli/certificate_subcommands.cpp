// `attest certify`, `attest merge` and `attest report`: their options, and their runs.
#include <iostream>
#include <memory>

#include "certify_command.h"
#include "merge_command.h"
#include "report_command.h"
#include "shard_environment.h"
#include "subcommands.h"

namespace attest {

namespace {

// certify's options as given, before they are parsed into the request.
struct CertifyFlags {
  CertifyRequest request;
  std::string budget = "default", seed_text, baseline_factor = "2", timeout = "30", deadline = "3600", memory_limit,
              fuzz_seconds = "0";
  std::vector<std::string> required;
  std::string max_len, jobs, long_seconds;
  std::vector<std::string> lengths, head_dims;
  std::vector<std::string> check_items;
  std::string shard;
};

// The options that choose the run's cases, stages and checks.
void add_stage_options(CLI::App* cert, CertifyFlags& f) {
  CertifyRequest& request = f.request;
  cert->add_option("--fuzz-seconds", f.fuzz_seconds,
                   "a short fuzz stage: random inputs through each fuzz target for this long (default 0: off)");
  cert->add_option("--max-len", f.max_len,
                   "longest sequence of the size ladder and the long stage (default: 4096 quick, 32768 default, "
                   "65536 thorough)");
  cert->add_option("--long-seconds", f.long_seconds,
                   "time budget of the long stage: lengths the kernel's measured speed cannot afford are listed as "
                   "not reached (default: 8 quick, 20 default, 120 thorough; 0: no time budget)");
  cert->add_option("--lengths", f.lengths, "these lengths instead of the ladder, e.g. 127,128,129,4096")
      ->delimiter(',');
  cert->add_option("--head-dims", f.head_dims, "head widths of the ladder and long cases (default 64)")->delimiter(',');
  cert->add_option("--jobs", f.jobs, "threads for the reference of long problems (default: every core)");
  cert->add_flag(
      "--no-size-stages", [&request](std::int64_t) { request.options.sized_stages = false; },
      "skip the ladder and long stages");
  cert->add_flag(
      "--no-shrink", [&request](std::int64_t) { request.options.shrink = false; },
      "save each failing property's first counterexample unshrunk (quick triage of a kernel that "
      "fails everywhere)");
  cert->add_option("--check", f.check_items,
                   "run only these checks: names, or regular expressions matching whole names, e.g. "
                   "golden,gradient_.* (--list-checks names them)")
      ->delimiter(',');
  cert->add_flag("--list-checks", request.list_checks, "print every check's stage and name, one per line, and exit");
  cert->add_flag("--markdown", request.catalogue_markdown,
                 "with --list-checks: the property catalogue as a Markdown table (docs/properties.md's)");
  cert->add_flag("--plan", request.plan,
                 "print which checks would run on each kernel and why the others would not, without running any");
  cert->add_flag("--verbose", request.verbose,
                 "the full report: a row and a line for every check that did not run, every case the long stage "
                 "could not afford, each failure in its kernel's report; progress for every check and long case");
  cert->add_option(
      "--shard", f.shard,
      "K/N: run only the checks at positions p with p % N == K - 1 (attest merge joins the N certificates); "
      "auto: K/N from a CI fleet's environment, auto/N with N declared (docs/fleet.md)");
}

int run_certify_flags(CLI::App* cert, CertifyFlags& f) {
  CertifyRequest& request = f.request;
  request.options.property_cases = parse_budget("--budget", f.budget);
  request.options.sizes =
      sized_flags(sizes_for_budget(request.options.property_cases), f.max_len, f.lengths, f.head_dims, f.jobs);
  if (!f.long_seconds.empty())
    request.options.sizes.time_budget = parse_number("--long-seconds", f.long_seconds, 0, 86400);
  request.options.seed = seed_of_flag(f.seed_text);
  request.options.fuzz_seconds = parse_number("--fuzz-seconds", f.fuzz_seconds, 0, 86400);
  request.baseline_factor = parse_number("--baseline-factor", f.baseline_factor, 1, 1e6);
  request.load.containment.timeout_seconds = parse_seconds("--timeout", f.timeout, 86400);
  request.load.containment.memory_limit_bytes = memory_of_flag(f.memory_limit);
  request.deadline_seconds = parse_seconds("--deadline", f.deadline, 30 * 86400);
  request.required = parse_features(f.required);
  if (cert->count("--check")) request.options.checks = CheckSelection(f.check_items);
  if (cert->count("--shard")) {  // given, even as "": parsed
    const ShardChoice choice = shard_from_flag("--shard", f.shard, 1000, process_environment());
    if (!choice.source.empty()) std::cerr << shard_origin("certify", choice);
    request.shard = ShardId{choice.index, choice.count};
    request.shard_source = choice.source;
  }
  return run_certify(std::move(request));
}

}  // namespace

Subcommand add_certify(CLI::App& app) {
  auto f = std::make_shared<CertifyFlags>();
  CertifyRequest& request = f->request;
  CLI::App* cert = app.add_subcommand("certify", "run golden, grid and property checks; print the certificate table");
  cert->add_option("--kernel", request.kernels,
                   "NAME, builtin:NAME, mutant:NAME or a plugin PATH.so (repeatable; default: all built-in)");
  cert->add_option("--kernel-cmd", request.commands, "a program speaking the process protocol (repeatable)");
  cert->add_option("--budget", f->budget, "cases per property: quick (10), default (100), thorough (1000) or a number");
  cert->add_option("--seed", f->seed_text, "RapidCheck seed (default: from the clock, printed)");
  cert->add_option("--out", request.options.out_dir, "directory for counterexamples")->capture_default_str();
  cert->add_option(
      "--json", request.json_path,
      "write the certificate as JSON (ci/schema/certificate.schema.json); -: to stdout, the report to stderr");
  cert->add_option("--junit", request.junit_path, "write the results as JUnit XML (-: stdout)");
  cert->add_option("--baseline", request.baseline_path, "fail when worse than this earlier JSON certificate");
  cert->add_option("--baseline-factor", f->baseline_factor, "allowed growth of worst err/bound (>= 1)")
      ->capture_default_str();
  cert->add_flag("--baseline-any-options", request.baseline_any_options,
                 "compare with a baseline run with other options (lengths, widths, budgets, timeouts); says so");
  cert->add_option("--timeout", f->timeout,
                   "per call, for kernels in a child process: a hang is no answer after max(this, 10x the call's "
                   "cost predicted from the kernel's measured speed)")
      ->capture_default_str();
  cert->add_option("--deadline", f->deadline, "seconds for the whole run; checks not finished by then fail")
      ->capture_default_str();
  cert->add_option("--memory-limit", f->memory_limit,
                   "memory a kernel in a child process may take, e.g. 4G (default: half of this machine's; 0: none)");
  cert->add_flag("--isolate", request.load.isolate, "run built-in kernels in a child process as well");
  cert->add_option("--require", f->required,
                   "features that must be declared and exercised, e.g. causal,gqa,lse (else NOT CERTIFIED)")
      ->delimiter(',');
  add_stage_options(cert, *f);
  return {cert, [cert, f] { return run_certify_flags(cert, *f); }};
}

Subcommand add_merge(CLI::App& app) {
  struct Flags {
    MergeRequest merge;
    std::string factor = "2";
  };
  auto f = std::make_shared<Flags>();
  MergeRequest& merge = f->merge;
  CLI::App* mrg =
      app.add_subcommand("merge", "join the certificates of `certify --shard K/N` runs into the run's certificate");
  mrg->add_option("files", merge.inputs, "one certificate per shard (certify --shard K/N --json F)")->required();
  mrg->add_option("--json", merge.json_path, "write the merged certificate (-: stdout, the report to stderr)")
      ->required();
  mrg->add_option("--junit", merge.junit_path, "write the merged results as JUnit XML (-: stdout)");
  mrg->add_option("--baseline", merge.baseline_path, "fail when the merged certificate is worse than this one");
  mrg->add_option("--baseline-factor", f->factor, "allowed growth of worst err/bound (>= 1)")->capture_default_str();
  mrg->add_flag("--baseline-any-options", merge.baseline_any_options,
                "compare with a baseline run with other options (lengths, widths, budgets, timeouts); says so");
  mrg->add_flag("--verbose", merge.verbose, "the full report, as certify --verbose prints it");
  return {mrg, [f] {
            f->merge.baseline_factor = parse_number("--baseline-factor", f->factor, 1, 1e6);
            return run_merge(f->merge);
          }};
}

Subcommand add_report(CLI::App& app) {
  auto report = std::make_shared<ReportRequest>();
  CLI::App* rpt =
      app.add_subcommand("report", "write a certificate again for people: Markdown for a CI job summary, an HTML page");
  rpt->add_option("certificate", report->certificate, "a certificate (certify --json F, or attest merge's)")
      ->required();
  rpt->add_option("--markdown", report->markdown_path, "write the Markdown summary here (-: stdout)");
  rpt->add_option("--html", report->html_path, "write a self-contained HTML page here (-: stdout)");
  return {rpt, [report] { return run_report(*report); }};
}

}  // namespace attest
