// `attest fuzz`, `mutants`, `bench`, `kernel-host`, `replay`, `calibrate` and `selfcheck`: their
// options, and their runs.
#include <iostream>
#include <memory>

#include "bench_command.h"
#include "calibrate_command.h"
#include "certify.h"
#include "fuzz_command.h"
#include "kernel_host_command.h"
#include "mutants_command.h"
#include "replay_command.h"
#include "selfcheck.h"
#include "shard_environment.h"
#include "subcommands.h"

namespace attest {

Subcommand add_fuzz(CLI::App& app) {
  struct Flags {
    FuzzRequest fuzz;
    bool list = false;
    std::string seconds = "60";
  };
  auto f = std::make_shared<Flags>();
  FuzzRequest& fuzz = f->fuzz;
  CLI::App* fz = app.add_subcommand("fuzz", "run a libFuzzer target (fuzz preset) and save what it finds");
  fz->add_option("--target", fuzz.target,
                 "fuzz_mask_leak, fuzz_overflow, fuzz_decode, fuzz_differential or fuzz_backward");
  fz->add_flag("--list", f->list, "print each kernel fuzz target and the mutant it must find, one per line");
  fz->add_option("--seconds", f->seconds, "how long to fuzz")->capture_default_str();
  fz->add_option("--kernel", fuzz.kernel, "NAME, builtin:NAME or mutant:NAME (default: every built-in kernel)");
  fz->add_option("--fuzz-build", fuzz.build_dir, "the fuzz preset's build directory (default: build/fuzz)");
  fz->add_option("--corpus", fuzz.corpus_dir, "seed corpus root (default: corpus/)");
  fz->add_option("--out", fuzz.out_dir, "work corpus, artifacts and counterexamples")->capture_default_str();
  return {fz, [f] {
            if (f->list) return list_fuzz_targets();
            if (f->fuzz.target.empty()) throw FlagError("fuzz: --target is required (attest fuzz --list names them)");
            f->fuzz.seconds = static_cast<int>(parse_integer("--seconds", f->seconds, 1, 86400));
            return run_fuzz(f->fuzz);
          }};
}

Subcommand add_mutants(CLI::App& app) {
  struct Flags {
    MutantsRequest mutants;
    std::string budget = "default", seed, fuzz_seconds = "0", shard, max_len = "512";
  };
  auto f = std::make_shared<Flags>();
  MutantsRequest& mutants = f->mutants;
  CLI::App* mut = app.add_subcommand("mutants", "certify every mutant kernel; report kills and the mutation score");
  mut->add_option("--budget", f->budget, "cases per property, as for certify")->capture_default_str();
  mut->add_option("--seed", f->seed, "RapidCheck seed (default: from the clock, printed)");
  mut->add_option("--fuzz-seconds", f->fuzz_seconds, "also fuzz each target this long per mutant (fuzz preset)");
  mut->add_option("--fuzz-build", mutants.fuzz_build, "the fuzz preset's build directory (default: build/fuzz)");
  mut->add_option("--json", mutants.json_path, "write the report as JSON");
  mut->add_option("--only", mutants.only, "one mutant by name");
  mut->add_flag("--expected-first", mutants.expected_first,
                "run each mutant's expected check alone first, the whole certification only if it passes (the "
                "same kills; \"caught by\" lists only the checks that ran)");
  mut->add_option("--shard", f->shard,
                  "K/N: only the mutants at registry positions p with p % N == K - 1; auto or auto/N: from the "
                  "environment, as certify");
  mut->add_option("--out", mutants.out_dir, "counterexamples per mutant")->capture_default_str();
  mut->add_option("--max-len", f->max_len,
                  "longest length of the ladder and long stages (certify's default is 32768; every mutant's bug "
                  "shows far below)")
      ->capture_default_str();
  return {mut, [mut, f] {
            MutantsRequest& m = f->mutants;
            m.property_cases = parse_budget("--budget", f->budget);
            m.sizes = sized_flags(sizes_for_budget(m.property_cases), f->max_len, {}, {}, "");
            m.sizes.time_budget = 0;  // which check kills a mutant must not depend on the machine's speed
            if (mut->count("--shard")) {
              const ShardChoice choice = shard_from_flag("--shard", f->shard, 1000, process_environment());
              if (!choice.source.empty()) std::cerr << shard_origin("mutants", choice);
              m.shard_index = choice.index;
              m.shard_count = choice.count;
            }
            m.seed = seed_or_clock(seed_of_flag(f->seed));
            m.fuzz_seconds = static_cast<int>(parse_integer("--fuzz-seconds", f->fuzz_seconds, 0, 86400));
            std::cerr << "attest mutants: seed " << m.seed << "\n";
            return run_mutants(m);
          }};
}

namespace {

struct BenchFlags {
  BenchRequest bench;
  std::vector<std::string> lengths{"128", "256", "512", "1024", "2048", "4096", "8192", "16384"}, dims{"64", "128"},
      causal{"0", "1"};
  std::string batch = "1", heads = "1", max_seconds = "2", min_time = "0.2", repetitions = "5";
};

int run_bench_flags(BenchFlags& f) {
  auto integers = [](const std::string& flag, const std::vector<std::string>& texts, long long lo, long long hi) {
    std::vector<int> out;
    for (const std::string& t : texts) out.push_back(static_cast<int>(parse_integer(flag, t, lo, hi)));
    if (out.empty()) throw FlagError(flag + ": at least one value is needed");
    return out;
  };
  BenchRequest& bench = f.bench;
  bench.lengths = integers("--lengths", f.lengths, 1, 1 << 20);
  bench.head_dims = integers("--dims", f.dims, 1, 4096);
  bench.causal = integers("--causal", f.causal, 0, 1);
  bench.batch = static_cast<int>(parse_integer("--batch", f.batch, 1, 65536));
  bench.heads = static_cast<int>(parse_integer("--heads", f.heads, 1, 65536));
  bench.max_seconds = parse_seconds("--max-seconds", f.max_seconds, 86400);
  bench.min_time = parse_number("--min-time", f.min_time, 0, 3600);
  bench.repetitions = static_cast<int>(parse_integer("--repetitions", f.repetitions, 1, 1'000'000));
  return run_bench(bench);
}

}  // namespace

Subcommand add_bench(CLI::App& app) {
  auto f = std::make_shared<BenchFlags>();
  BenchRequest& bench = f->bench;
  CLI::App* ben = app.add_subcommand("bench", "kernel speed and memory by sequence length, with the OpenBLAS baseline");
  ben->add_option("--kernel", bench.kernels, "kernels (default: every built-in kernel and baseline:blas)");
  ben->add_option("--lengths", f->lengths, "sequence lengths")->delimiter(',')->capture_default_str();
  ben->add_option("--dims", f->dims, "head widths (Dk = Dv)")->delimiter(',')->capture_default_str();
  ben->add_option("--causal", f->causal, "0 (no mask), 1 (causal) or both")->delimiter(',')->capture_default_str();
  ben->add_option("--batch", f->batch, "batch size B")->capture_default_str();
  ben->add_option("--heads", f->heads, "heads H (as many KV heads)")->capture_default_str();
  ben->add_option("--max-seconds", f->max_seconds, "skip cells estimated to take longer")->capture_default_str();
  ben->add_option("--min-time", f->min_time, "seconds of repetition per cell")->capture_default_str();
  ben->add_option("--repetitions", f->repetitions, "timed calls per cell, at least")->capture_default_str();
  ben->add_flag("--in-process", bench.in_process,
                "load plugins into attest and call them directly (default: a child process, guard pages)");
  ben->add_flag("!--no-decode", bench.decode, "skip the decode measurements");
  ben->add_flag("!--no-prefill", bench.prefill, "skip the prefill measurements");
  ben->add_flag("--reference", bench.reference, "measure the reference's cost per row against a double loop");
  ben->add_option("--json", bench.json_path, "write the rows as JSON");
  ben->add_option("--svg", bench.svg_path, "plot prefill throughput against T (first width)");
  return {ben, [f] { return run_bench_flags(*f); }};
}

Subcommand add_kernel_host(CLI::App& app) {
  auto f = std::make_shared<std::pair<std::string, std::string>>();  // plugin, builtin
  CLI::App* host = app.add_subcommand("kernel-host", "serve a plugin or built-in kernel over the process protocol");
  host->add_option("--plugin", f->first, "shared library exporting attest_kernel_entry");
  host->add_option("--builtin", f->second, "built-in kernel or mutant name");
  return {host, [f] { return f->first.empty() ? serve_builtin(f->second) : serve_plugin(f->first); }};
}

Subcommand add_replay(CLI::App& app) {
  struct Flags {
    std::string path, kernel, command, timeout = "30", memory;
    LoadOptions load;
  };
  auto f = std::make_shared<Flags>();
  CLI::App* rep = app.add_subcommand("replay", "re-run a saved counterexample and print its verdict");
  rep->add_option("file", f->path, "problem file written by a failing check")->required();
  rep->add_option("--kernel", f->kernel, "kernel to run (a plugin recorded in the file runs only when named here)");
  rep->add_option("--kernel-cmd", f->command, "a process kernel to run (never taken from the file)");
  rep->add_flag("--isolate", f->load.isolate, "run the kernel in a child process (implied when it was isolated)");
  rep->add_option("--timeout", f->timeout, "seconds per call in a child process")->capture_default_str();
  rep->add_option("--memory-limit", f->memory, "memory a kernel in a child process may take (0: none)");
  return {rep, [f] {
            f->load.containment.timeout_seconds = parse_seconds("--timeout", f->timeout, 86400);
            f->load.containment.memory_limit_bytes = memory_of_flag(f->memory);
            return run_replay(f->path, f->kernel, f->command, f->load);
          }};
}

Subcommand add_calibrate(CLI::App& app) {
  struct Flags {
    std::string cases = "10000", seed, kernel;
  };
  auto f = std::make_shared<Flags>();
  CLI::App* cal = app.add_subcommand("calibrate", "long run: tolerance gates on random problems, count false alarms");
  cal->add_option("--cases", f->cases, "problems per kernel")->capture_default_str();
  cal->add_option("--seed", f->seed, "first seed (default: from the clock, printed)");
  cal->add_option("--kernel", f->kernel, "one kernel (default: all built-in)");
  return {cal, [f] {
            const int cases = static_cast<int>(parse_integer("--cases", f->cases, 1, 100'000'000));
            return calibrate(cases, seed_or_clock(seed_of_flag(f->seed)), f->kernel) == 0 ? 0 : 1;
          }};
}

Subcommand add_selfcheck(CLI::App& app) {
  struct Flags {
    SelfcheckOptions options;
    std::string declarations = "200", seed, budget = "quick", known;
    std::vector<std::string> only;
  };
  auto f = std::make_shared<Flags>();
  SelfcheckOptions& selfcheck = f->options;
  CLI::App* self = app.add_subcommand(
      "selfcheck",
      "certify attest's own exact kernel under N drawn declarations: anything but CERTIFIED is attest's defect");
  self->add_option("--declarations", f->declarations, "how many declarations to draw")->capture_default_str();
  self->add_option("--seed", f->seed, "draw seed (default: from the clock, printed)");
  self->add_option("--only", f->only, "these declarations alone, e.g. 6,11 (as numbered in a run's output)")
      ->delimiter(',');
  self->add_option("--known", f->known, "a file of open defects ('SEED INDEX  # why' lines): reported, not counted");
  self->add_option("--budget", f->budget, "cases per property")->capture_default_str();
  self->add_flag("--protocol", selfcheck.through_protocol, "also serve each model through the C ABI and the protocol");
  self->add_option("--out", selfcheck.out_dir, "directory for findings")->capture_default_str();
  self->add_flag("--draw-only", selfcheck.draw_only,
                 "only draw the declarations and print how often each field was drawn (certifies nothing)");
  return {self, [f] {
            SelfcheckOptions& s = f->options;
            s.declarations = static_cast<int>(parse_integer("--declarations", f->declarations, 1, 1'000'000));
            s.seed = seed_or_clock(seed_of_flag(f->seed));
            for (const std::string& text : f->only)
              s.only.push_back(static_cast<int>(parse_integer("--only", text, 0, 1'000'000)));
            if (!f->known.empty()) s.known = read_known_false_alarms(f->known, s.seed);
            s.property_cases = parse_budget("--budget", f->budget);
            return run_selfcheck(s) == 0 ? 0 : 1;
          }};
}

}  // namespace attest
