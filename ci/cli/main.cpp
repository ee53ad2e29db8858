// The `attest` command line. Exit codes: 0 certified / passed, 1 a check failed,
// 2 usage, load or input error.
#include <CLI/CLI.hpp>
#include <csignal>
#include <cstdlib>
#include <iostream>

#include "bench_command.h"
#include "calibrate_command.h"
#include "certify_command.h"
#include "flags.h"
#include "fuzz_command.h"
#include "invoked_program.h"
#include "kernel_host_command.h"
#include "merge_command.h"
#include "mutants_command.h"
#include "replay_command.h"
#include "replay_program.h"
#include "report_command.h"
#include "selfcheck.h"
#include "shard_environment.h"

namespace {

using namespace attest;

}  // namespace

int main(int argc, char** argv) {
  // A write past the file-size limit (ulimit -f) then fails with EFBIG, and the atomic write
  // removes its temporary file and reports it, instead of the signal killing attest mid-write.
  std::signal(SIGXFSZ, SIG_IGN);
  // Printed replay commands start with the program as the user ran it, so they run as printed.
  const char* path_variable = std::getenv("PATH");
  set_replay_program(invoked_program(argc > 0 ? argv[0] : "", path_variable ? path_variable : "", "/proc/self/exe"));
  CLI::App app{"attest: certify attention kernels against exact attention"};
  app.require_subcommand(1);

  // Numbers arrive as text and are parsed strictly after CLI11 (flags.h): finite, in range, whole.
  CertifyRequest request;
  std::string budget = "default", seed_text, baseline_factor = "2", timeout = "30", deadline = "3600", memory_limit,
              fuzz_seconds = "0";
  CLI::App* cert = app.add_subcommand("certify", "run golden, grid and property checks; print the certificate table");
  cert->add_option("--kernel", request.kernels,
                   "NAME, builtin:NAME, mutant:NAME or a plugin PATH.so (repeatable; default: all built-in)");
  cert->add_option("--kernel-cmd", request.commands, "a program speaking the process protocol (repeatable)");
  cert->add_option("--budget", budget, "cases per property: quick (10), default (100), thorough (1000) or a number");
  cert->add_option("--seed", seed_text, "RapidCheck seed (default: from the clock, printed)");
  cert->add_option("--out", request.options.out_dir, "directory for counterexamples")->capture_default_str();
  cert->add_option(
      "--json", request.json_path,
      "write the certificate as JSON (ci/schema/certificate.schema.json); -: to stdout, the report to stderr");
  cert->add_option("--junit", request.junit_path, "write the results as JUnit XML (-: stdout)");
  cert->add_option("--baseline", request.baseline_path, "fail when worse than this earlier JSON certificate");
  cert->add_option("--baseline-factor", baseline_factor, "allowed growth of worst err/bound (>= 1)")
      ->capture_default_str();
  cert->add_flag("--baseline-any-options", request.baseline_any_options,
                 "compare with a baseline run with other options (lengths, widths, budgets, timeouts); says so");
  cert->add_option("--timeout", timeout,
                   "per call, for kernels in a child process: a hang is no answer after max(this, 10x the call's "
                   "cost predicted from the kernel's measured speed)")
      ->capture_default_str();
  cert->add_option("--deadline", deadline, "seconds for the whole run; checks not finished by then fail")
      ->capture_default_str();
  cert->add_option("--memory-limit", memory_limit,
                   "memory a kernel in a child process may take, e.g. 4G (default: half of this machine's; 0: none)");
  cert->add_flag("--isolate", request.load.isolate, "run built-in kernels in a child process as well");
  std::vector<std::string> required;
  cert->add_option("--require", required,
                   "features that must be declared and exercised, e.g. causal,gqa,lse (else NOT CERTIFIED)")
      ->delimiter(',');
  cert->add_option("--fuzz-seconds", fuzz_seconds,
                   "a short fuzz stage: random inputs through each fuzz target for this long (default 0: off)");
  std::string max_len, jobs, long_seconds;
  std::vector<std::string> lengths, head_dims;
  cert->add_option("--max-len", max_len,
                   "longest sequence of the size ladder and the long stage (default: 4096 quick, 32768 default, "
                   "65536 thorough)");
  cert->add_option("--long-seconds", long_seconds,
                   "time budget of the long stage: lengths the kernel's measured speed cannot afford are listed as "
                   "not reached (default: 8 quick, 20 default, 120 thorough; 0: no time budget)");
  cert->add_option("--lengths", lengths, "these lengths instead of the ladder, e.g. 127,128,129,4096")->delimiter(',');
  cert->add_option("--head-dims", head_dims, "head widths of the ladder and long cases (default 64)")->delimiter(',');
  cert->add_option("--jobs", jobs, "threads for the reference of long problems (default: every core)");
  cert->add_flag(
      "--no-size-stages", [&](std::int64_t) { request.options.sized_stages = false; },
      "skip the ladder and long stages");
  cert->add_flag(
      "--no-shrink", [&](std::int64_t) { request.options.shrink = false; },
      "save each failing property's first counterexample unshrunk (quick triage of a kernel that "
      "fails everywhere)");
  std::vector<std::string> check_items;
  cert->add_option("--check", check_items,
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
  std::string shard;
  cert->add_option(
      "--shard", shard,
      "K/N: run only the checks at positions p with p % N == K - 1 (attest merge joins the N certificates); "
      "auto: K/N from a CI fleet's environment, auto/N with N declared (docs/fleet.md)");

  MergeRequest merge;
  std::string merge_factor = "2";
  CLI::App* mrg =
      app.add_subcommand("merge", "join the certificates of `certify --shard K/N` runs into the run's certificate");
  mrg->add_option("files", merge.inputs, "one certificate per shard (certify --shard K/N --json F)")->required();
  mrg->add_option("--json", merge.json_path, "write the merged certificate (-: stdout, the report to stderr)")
      ->required();
  mrg->add_option("--junit", merge.junit_path, "write the merged results as JUnit XML (-: stdout)");
  mrg->add_option("--baseline", merge.baseline_path, "fail when the merged certificate is worse than this one");
  mrg->add_option("--baseline-factor", merge_factor, "allowed growth of worst err/bound (>= 1)")->capture_default_str();
  mrg->add_flag("--baseline-any-options", merge.baseline_any_options,
                "compare with a baseline run with other options (lengths, widths, budgets, timeouts); says so");
  mrg->add_flag("--verbose", merge.verbose, "the full report, as certify --verbose prints it");

  ReportRequest report;
  CLI::App* rpt =
      app.add_subcommand("report", "write a certificate again for people: Markdown for a CI job summary, an HTML page");
  rpt->add_option("certificate", report.certificate, "a certificate (certify --json F, or attest merge's)")->required();
  rpt->add_option("--markdown", report.markdown_path, "write the Markdown summary here (-: stdout)");
  rpt->add_option("--html", report.html_path, "write a self-contained HTML page here (-: stdout)");

  FuzzRequest fuzz;
  CLI::App* fz = app.add_subcommand("fuzz", "run a libFuzzer target (fuzz preset) and save what it finds");
  bool fuzz_list = false;
  fz->add_option("--target", fuzz.target,
                 "fuzz_mask_leak, fuzz_overflow, fuzz_decode, fuzz_differential or fuzz_backward");
  fz->add_flag("--list", fuzz_list, "print each kernel fuzz target and the mutant it must find, one per line");
  std::string fuzz_target_seconds = "60";
  fz->add_option("--seconds", fuzz_target_seconds, "how long to fuzz")->capture_default_str();
  fz->add_option("--kernel", fuzz.kernel, "NAME, builtin:NAME or mutant:NAME (default: every built-in kernel)");
  fz->add_option("--fuzz-build", fuzz.build_dir, "the fuzz preset's build directory (default: build/fuzz)");
  fz->add_option("--corpus", fuzz.corpus_dir, "seed corpus root (default: corpus/)");
  fz->add_option("--out", fuzz.out_dir, "work corpus, artifacts and counterexamples")->capture_default_str();

  MutantsRequest mutants;
  std::string mutants_budget = "default", mutants_seed, mutants_fuzz_seconds = "0";
  CLI::App* mut = app.add_subcommand("mutants", "certify every mutant kernel; report kills and the mutation score");
  mut->add_option("--budget", mutants_budget, "cases per property, as for certify")->capture_default_str();
  mut->add_option("--seed", mutants_seed, "RapidCheck seed (default: from the clock, printed)");
  mut->add_option("--fuzz-seconds", mutants_fuzz_seconds, "also fuzz each target this long per mutant (fuzz preset)");
  mut->add_option("--fuzz-build", mutants.fuzz_build, "the fuzz preset's build directory (default: build/fuzz)");
  mut->add_option("--json", mutants.json_path, "write the report as JSON");
  mut->add_option("--only", mutants.only, "one mutant by name");
  mut->add_flag("--expected-first", mutants.expected_first,
                "run each mutant's expected check alone first, the whole certification only if it passes (the "
                "same kills; \"caught by\" lists only the checks that ran)");
  std::string mutants_shard;
  mut->add_option("--shard", mutants_shard,
                  "K/N: only the mutants at registry positions p with p % N == K - 1; auto or auto/N: from the "
                  "environment, as certify");
  mut->add_option("--out", mutants.out_dir, "counterexamples per mutant")->capture_default_str();
  std::string mutants_max_len = "512";
  mut->add_option("--max-len", mutants_max_len,
                  "longest length of the ladder and long stages (certify's default is 32768; every mutant's bug "
                  "shows far below)")
      ->capture_default_str();

  BenchRequest bench;
  std::vector<std::string> bench_lengths{"128", "256", "512", "1024", "2048", "4096", "8192", "16384"},
      bench_dims{"64", "128"}, bench_causal{"0", "1"};
  std::string bench_batch = "1", bench_heads = "1", bench_max_seconds = "2", bench_min_time = "0.2",
              bench_repetitions = "5";
  CLI::App* ben = app.add_subcommand("bench", "kernel speed and memory by sequence length, with the OpenBLAS baseline");
  ben->add_option("--kernel", bench.kernels, "kernels (default: every built-in kernel and baseline:blas)");
  ben->add_option("--lengths", bench_lengths, "sequence lengths")->delimiter(',')->capture_default_str();
  ben->add_option("--dims", bench_dims, "head widths (Dk = Dv)")->delimiter(',')->capture_default_str();
  ben->add_option("--causal", bench_causal, "0 (no mask), 1 (causal) or both")->delimiter(',')->capture_default_str();
  ben->add_option("--batch", bench_batch, "batch size B")->capture_default_str();
  ben->add_option("--heads", bench_heads, "heads H (as many KV heads)")->capture_default_str();
  ben->add_option("--max-seconds", bench_max_seconds, "skip cells estimated to take longer")->capture_default_str();
  ben->add_option("--min-time", bench_min_time, "seconds of repetition per cell")->capture_default_str();
  ben->add_option("--repetitions", bench_repetitions, "timed calls per cell, at least")->capture_default_str();
  ben->add_flag("--in-process", bench.in_process,
                "load plugins into attest and call them directly (default: a child process, guard pages)");
  ben->add_flag("!--no-decode", bench.decode, "skip the decode measurements");
  ben->add_flag("!--no-prefill", bench.prefill, "skip the prefill measurements");
  ben->add_flag("--reference", bench.reference, "measure the reference's cost per row against a double loop");
  ben->add_option("--json", bench.json_path, "write the rows as JSON");
  ben->add_option("--svg", bench.svg_path, "plot prefill throughput against T (first width)");

  std::string host_plugin, host_builtin;
  CLI::App* host = app.add_subcommand("kernel-host", "serve a plugin or built-in kernel over the process protocol");
  host->add_option("--plugin", host_plugin, "shared library exporting attest_kernel_entry");
  host->add_option("--builtin", host_builtin, "built-in kernel or mutant name");

  std::string replay_path, replay_kernel, replay_command, replay_timeout = "30", replay_memory;
  CLI::App* rep = app.add_subcommand("replay", "re-run a saved counterexample and print its verdict");
  rep->add_option("file", replay_path, "problem file written by a failing check")->required();
  rep->add_option("--kernel", replay_kernel, "kernel to run (a plugin recorded in the file runs only when named here)");
  rep->add_option("--kernel-cmd", replay_command, "a process kernel to run (never taken from the file)");
  LoadOptions replay_load;
  rep->add_flag("--isolate", replay_load.isolate, "run the kernel in a child process (implied when it was isolated)");
  rep->add_option("--timeout", replay_timeout, "seconds per call in a child process")->capture_default_str();
  rep->add_option("--memory-limit", replay_memory, "memory a kernel in a child process may take (0: none)");

  std::string calibrate_cases = "10000", calibrate_seed;
  std::string calibrate_kernel;
  CLI::App* cal = app.add_subcommand("calibrate", "long run: tolerance gates on random problems, count false alarms");
  cal->add_option("--cases", calibrate_cases, "problems per kernel")->capture_default_str();
  cal->add_option("--seed", calibrate_seed, "first seed (default: from the clock, printed)");
  cal->add_option("--kernel", calibrate_kernel, "one kernel (default: all built-in)");

  SelfcheckOptions selfcheck;
  std::string selfcheck_declarations = "200", selfcheck_seed, selfcheck_budget = "quick";
  std::vector<std::string> selfcheck_only;
  CLI::App* self = app.add_subcommand(
      "selfcheck",
      "certify attest's own exact kernel under N drawn declarations: anything but CERTIFIED is attest's defect");
  self->add_option("--declarations", selfcheck_declarations, "how many declarations to draw")->capture_default_str();
  self->add_option("--seed", selfcheck_seed, "draw seed (default: from the clock, printed)");
  self->add_option("--only", selfcheck_only, "these declarations alone, e.g. 6,11 (as numbered in a run's output)")
      ->delimiter(',');
  std::string selfcheck_known;
  self->add_option("--known", selfcheck_known,
                   "a file of open defects ('SEED INDEX  # why' lines): reported, not counted");
  self->add_option("--budget", selfcheck_budget, "cases per property")->capture_default_str();
  self->add_flag("--protocol", selfcheck.through_protocol, "also serve each model through the C ABI and the protocol");
  self->add_option("--out", selfcheck.out_dir, "directory for findings")->capture_default_str();
  self->add_flag("--draw-only", selfcheck.draw_only,
                 "only draw the declarations and print how often each field was drawn (certifies nothing)");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  try {
    auto seed_of_flag = [](const std::string& text) { return text.empty() ? 0 : parse_seed("--seed", text); };
    auto memory_of_flag = [](const std::string& text) {
      return text.empty() ? default_memory_limit() : parse_bytes("--memory-limit", text);
    };
    if (*cert) {
      request.options.property_cases = parse_budget("--budget", budget);
      request.options.sizes =
          sized_flags(sizes_for_budget(request.options.property_cases), max_len, lengths, head_dims, jobs);
      if (!long_seconds.empty())
        request.options.sizes.time_budget = parse_number("--long-seconds", long_seconds, 0, 86400);
      request.options.seed = seed_of_flag(seed_text);
      request.options.fuzz_seconds = parse_number("--fuzz-seconds", fuzz_seconds, 0, 86400);
      request.baseline_factor = parse_number("--baseline-factor", baseline_factor, 1, 1e6);
      request.load.containment.timeout_seconds = parse_seconds("--timeout", timeout, 86400);
      request.load.containment.memory_limit_bytes = memory_of_flag(memory_limit);
      request.deadline_seconds = parse_seconds("--deadline", deadline, 30 * 86400);
      request.required = parse_features(required);
      if (cert->count("--check")) request.options.checks = CheckSelection(check_items);
      if (cert->count("--shard")) {  // given, even as "": parsed
        const ShardChoice choice = shard_from_flag("--shard", shard, 1000, process_environment());
        if (!choice.source.empty()) std::cerr << shard_origin("certify", choice);
        request.shard = ShardId{choice.index, choice.count};
      }
      return run_certify(std::move(request));
    }
    if (*mrg) {
      merge.baseline_factor = parse_number("--baseline-factor", merge_factor, 1, 1e6);
      return run_merge(merge);
    }
    if (*rpt) return run_report(report);
    if (*fz && fuzz_list) return list_fuzz_targets();
    if (*fz) {
      if (fuzz.target.empty()) throw FlagError("fuzz: --target is required (attest fuzz --list names them)");
      fuzz.seconds = static_cast<int>(parse_integer("--seconds", fuzz_target_seconds, 1, 86400));
      return run_fuzz(fuzz);
    }
    if (*ben) {
      auto integers = [](const std::string& flag, const std::vector<std::string>& texts, long long lo, long long hi) {
        std::vector<int> out;
        for (const std::string& t : texts) out.push_back(static_cast<int>(parse_integer(flag, t, lo, hi)));
        if (out.empty()) throw FlagError(flag + ": at least one value is needed");
        return out;
      };
      bench.lengths = integers("--lengths", bench_lengths, 1, 1 << 20);
      bench.head_dims = integers("--dims", bench_dims, 1, 4096);
      bench.causal = integers("--causal", bench_causal, 0, 1);
      bench.batch = static_cast<int>(parse_integer("--batch", bench_batch, 1, 65536));
      bench.heads = static_cast<int>(parse_integer("--heads", bench_heads, 1, 65536));
      bench.max_seconds = parse_seconds("--max-seconds", bench_max_seconds, 86400);
      bench.min_time = parse_number("--min-time", bench_min_time, 0, 3600);
      bench.repetitions = static_cast<int>(parse_integer("--repetitions", bench_repetitions, 1, 1'000'000));
      return run_bench(bench);
    }
    if (*mut) {
      mutants.property_cases = parse_budget("--budget", mutants_budget);
      mutants.sizes = sized_flags(sizes_for_budget(mutants.property_cases), mutants_max_len, {}, {}, "");
      mutants.sizes.time_budget = 0;  // which check kills a mutant must not depend on the machine's speed
      if (mut->count("--shard")) {
        const ShardChoice choice = shard_from_flag("--shard", mutants_shard, 1000, process_environment());
        if (!choice.source.empty()) std::cerr << shard_origin("mutants", choice);
        mutants.shard_index = choice.index;
        mutants.shard_count = choice.count;
      }
      mutants.seed = seed_or_clock(seed_of_flag(mutants_seed));
      mutants.fuzz_seconds = static_cast<int>(parse_integer("--fuzz-seconds", mutants_fuzz_seconds, 0, 86400));
      std::cerr << "attest mutants: seed " << mutants.seed << "\n";
      return run_mutants(mutants);
    }
    if (*self) {
      selfcheck.declarations = static_cast<int>(parse_integer("--declarations", selfcheck_declarations, 1, 1'000'000));
      selfcheck.seed = seed_or_clock(seed_of_flag(selfcheck_seed));
      for (const std::string& text : selfcheck_only)
        selfcheck.only.push_back(static_cast<int>(parse_integer("--only", text, 0, 1'000'000)));
      if (!selfcheck_known.empty()) selfcheck.known = read_known_false_alarms(selfcheck_known, selfcheck.seed);
      selfcheck.property_cases = parse_budget("--budget", selfcheck_budget);
      return run_selfcheck(selfcheck) == 0 ? 0 : 1;
    }
    if (*host) return host_plugin.empty() ? serve_builtin(host_builtin) : serve_plugin(host_plugin);
    if (*rep) {
      replay_load.containment.timeout_seconds = parse_seconds("--timeout", replay_timeout, 86400);
      replay_load.containment.memory_limit_bytes = memory_of_flag(replay_memory);
      return run_replay(replay_path, replay_kernel, replay_command, replay_load);
    }
    if (*cal) {
      const int cases = static_cast<int>(parse_integer("--cases", calibrate_cases, 1, 100'000'000));
      return calibrate(cases, seed_or_clock(seed_of_flag(calibrate_seed)), calibrate_kernel) == 0 ? 0 : 1;
    }
  } catch (const CLI::ValidationError& e) {
    std::cerr << "attest: " << e.what() << "\n";
    return 2;
  } catch (const std::bad_alloc&) {
    std::cerr << "attest: out of memory: attest could not allocate what this run needs (a ulimit or the machine's "
                 "memory; --max-len or a narrower contract make smaller problems)\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "attest: " << e.what() << "\n";
    return 2;
  }
  return 0;
}
