// The `attest` command line. Exit codes: 0 certified / passed, 1 a check failed,
// 2 usage, load or input error.
#include <CLI/CLI.hpp>
#include <chrono>
#include <fstream>
#include <sstream>
#include <fmt/format.h>
#include <iostream>

#include "attest/problem_file.h"
#include "attest/property_driver.h"
#include "calibrate.h"
#include "certificate.h"
#include "bench_command.h"
#include "fuzz_command.h"
#include "mutants_command.h"
#include "kernel_host.h"
#include "certify.h"
#include "kernel_lookup.h"
#include "process_kernel.h"

namespace {

using namespace attest;

std::uint64_t seed_or_clock(std::uint64_t seed) {
  return seed ? seed : static_cast<std::uint64_t>(std::chrono::system_clock::now().time_since_epoch().count());
}

int budget_cases(const std::string& budget) {
  if (budget == "quick") return 10;
  if (budget == "default") return 100;
  if (budget == "thorough") return 1000;
  try {
    const int n = std::stoi(budget);
    if (n >= 0) return n;
  } catch (const std::exception&) {
  }
  throw CLI::ValidationError("--budget", "must be quick, default, thorough or a case count, got '" + budget + "'");
}

struct CertifyRequest {
  std::vector<std::string> kernels;
  std::vector<std::string> commands;
  CertifyOptions options;
  LoadOptions load;
  std::string json_path, junit_path, baseline_path;
  double baseline_factor = 2.0;
};

void write_file(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
  if (!out) throw std::runtime_error("cannot write " + path);
}

int certify(CertifyRequest request) {
  CertifyOptions& options = request.options;
  std::vector<std::pair<std::string, std::unique_ptr<Kernel>>> kernels;
  for (const std::string& name : request.kernels) kernels.emplace_back(name, resolve_kernel(name, request.load));
  for (const std::string& cmd : request.commands) kernels.emplace_back("cmd:" + cmd, command_kernel(cmd, request.load));
  if (kernels.empty())
    for (const KernelEntry& e : kernel_registry()) kernels.emplace_back("builtin:" + e.name, resolve_kernel(e.name, request.load));
  options.seed = seed_or_clock(options.seed);
  std::cerr << fmt::format("attest certify: seed {}, {} cases per property\n", options.seed, options.property_cases);

  Oracle oracle(1024);  // every deterministic case's reference is computed once for all kernels
  CertificateInfo info{options.seed, options.property_cases, {}};
  std::vector<CheckResult> rows;
  for (const auto& [source, kernel] : kernels) {
    options.kernel_source = source;
    options.isolated = request.load.isolate || dynamic_cast<const ProcessKernel*>(kernel.get()) != nullptr;
    KernelReport report{source, kernel->name(), kernel->capabilities(), certify_kernel(*kernel, oracle, options)};
    rows.insert(rows.end(), report.checks.begin(), report.checks.end());
    info.kernels.push_back(std::move(report));
  }
  std::cout << format_table(rows);
  if (!request.json_path.empty()) write_file(request.json_path, certificate_json(info) + "\n");
  if (!request.junit_path.empty()) write_file(request.junit_path, certificate_junit(info));
  bool ok = true;
  for (const KernelReport& k : info.kernels) ok = ok && k.passed();
  if (!request.baseline_path.empty()) {
    std::ifstream in(request.baseline_path);
    if (!in) throw std::invalid_argument("cannot read baseline " + request.baseline_path);
    std::stringstream text;
    text << in.rdbuf();
    const std::vector<std::string> worse = regressions(text.str(), info, request.baseline_factor);
    for (const std::string& reason : worse) std::cout << "REGRESSION " << reason << "\n";
    if (worse.empty()) std::cout << "baseline " << request.baseline_path << ": no regression\n";
    ok = ok && worse.empty();
  }
  std::cout << (ok ? "CERTIFIED\n" : "NOT CERTIFIED\n");
  return ok ? 0 : 1;
}

int replay(const std::string& path, const std::string& kernel_override, LoadOptions load) {
  const ProblemFile file = load_problem_file(path);
  const std::string source = kernel_override.empty() ? file.kernel : kernel_override;
  if (source.empty()) throw std::invalid_argument(path + " names no kernel; pass --kernel");
  load.isolate = load.isolate || file.isolated;
  const auto kernel = source.starts_with("cmd:") ? command_kernel(source.substr(4), load) : resolve_kernel(source, load);
  const PropertyInfo& property = find_property(file.property);
  Oracle oracle;
  const Shape& s = file.problem.shape;
  std::cout << fmt::format("replay {}: property {} on {} (B={} H={} Hkv={} Tq={} Tk={} Dk={} Dv={})\n", path,
                           property.name, kernel->name(), s.batch, s.heads, s.kv_heads, s.q_len, s.k_len, s.head_dim,
                           s.value_dim);
  const Verdict v = check_safely(property, file.problem, *kernel, oracle);
  if (!v.applicable) {
    std::cout << "n/a: " << v.detail << "\n";
    return 0;
  }
  std::cout << (v.passed ? "PASS" : "FAIL") << fmt::format(" (err/bound {:.3g})", v.utilisation)
            << (v.passed ? "" : ": " + v.detail) << "\n";
  if (!file.verdict.empty()) std::cout << "recorded: " << file.verdict << "\n";
  return v.passed ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"attest: certify attention kernels against exact attention"};
  app.require_subcommand(1);

  CertifyRequest request;
  std::string budget = "default";
  CLI::App* cert = app.add_subcommand("certify", "run golden, grid and property checks; print the certificate table");
  cert->add_option("--kernel", request.kernels,
                   "NAME, builtin:NAME, mutant:NAME or a plugin PATH.so (repeatable; default: all built-in)");
  cert->add_option("--kernel-cmd", request.commands, "a program speaking the process protocol (repeatable)");
  cert->add_option("--budget", budget, "cases per property: quick (10), default (100), thorough (1000) or a number");
  cert->add_option("--seed", request.options.seed, "RapidCheck seed (default: from the clock, printed)");
  cert->add_option("--out", request.options.out_dir, "directory for counterexamples")->capture_default_str();
  cert->add_option("--json", request.json_path, "write the certificate as JSON (ci/schema/certificate.schema.json)");
  cert->add_option("--junit", request.junit_path, "write the results as JUnit XML");
  cert->add_option("--baseline", request.baseline_path, "fail when worse than this earlier JSON certificate");
  cert->add_option("--baseline-factor", request.baseline_factor, "allowed growth of worst err/bound")
      ->capture_default_str();
  cert->add_option("--timeout", request.load.timeout_seconds, "seconds per call for kernels in a child process")
      ->capture_default_str();
  cert->add_flag("--isolate", request.load.isolate, "run built-in kernels in a child process as well");
  cert->add_option("--fuzz-seconds", request.options.fuzz_seconds,
                   "a short fuzz stage: random inputs through each fuzz target for this long (default 0: off)");

  FuzzRequest fuzz;
  CLI::App* fz = app.add_subcommand("fuzz", "run a libFuzzer target (fuzz preset) and save what it finds");
  fz->add_option("--target", fuzz.target, "fuzz_mask_leak, fuzz_overflow, fuzz_decode or fuzz_differential")->required();
  fz->add_option("--seconds", fuzz.seconds, "how long to fuzz")->capture_default_str();
  fz->add_option("--kernel", fuzz.kernel, "NAME, builtin:NAME or mutant:NAME (default: every built-in kernel)");
  fz->add_option("--fuzz-build", fuzz.build_dir, "the fuzz preset's build directory (default: build/fuzz)");
  fz->add_option("--corpus", fuzz.corpus_dir, "seed corpus root (default: corpus/)");
  fz->add_option("--out", fuzz.out_dir, "work corpus, artifacts and counterexamples")->capture_default_str();

  MutantsRequest mutants;
  std::string mutants_budget = "default";
  CLI::App* mut = app.add_subcommand("mutants", "certify every mutant kernel; report kills and the mutation score");
  mut->add_option("--budget", mutants_budget, "cases per property, as for certify")->capture_default_str();
  mut->add_option("--seed", mutants.seed, "RapidCheck seed (default: from the clock, printed)");
  mut->add_option("--fuzz-seconds", mutants.fuzz_seconds, "also fuzz each target this long per mutant (fuzz preset)");
  mut->add_option("--fuzz-build", mutants.fuzz_build, "the fuzz preset's build directory (default: build/fuzz)");
  mut->add_option("--json", mutants.json_path, "write the report as JSON");
  mut->add_option("--only", mutants.only, "one mutant by name");
  mut->add_option("--out", mutants.out_dir, "counterexamples per mutant")->capture_default_str();

  BenchRequest bench;
  CLI::App* ben = app.add_subcommand("bench", "kernel speed and memory by sequence length, with the OpenBLAS baseline");
  ben->add_option("--kernel", bench.kernels, "kernels (default: every built-in kernel and baseline:blas)");
  ben->add_option("--lengths", bench.lengths, "sequence lengths")->delimiter(',')->capture_default_str();
  ben->add_option("--dims", bench.head_dims, "head widths")->delimiter(',')->capture_default_str();
  ben->add_option("--causal", bench.causal, "0 (no mask), 1 (causal) or both")->delimiter(',')->capture_default_str();
  ben->add_option("--max-seconds", bench.max_seconds, "skip cells estimated to take longer")->capture_default_str();
  ben->add_option("--min-time", bench.min_time, "seconds of repetition per cell")->capture_default_str();
  ben->add_flag("!--no-decode", bench.decode, "skip the decode measurements");
  ben->add_flag("!--no-prefill", bench.prefill, "skip the prefill measurements");
  ben->add_flag("--reference", bench.reference, "measure the reference's cost per row against a double loop");
  ben->add_option("--json", bench.json_path, "write the rows as JSON");
  ben->add_option("--svg", bench.svg_path, "plot prefill throughput against T (first width)");

  std::string host_plugin, host_builtin;
  CLI::App* host = app.add_subcommand("kernel-host", "serve a plugin or built-in kernel over the process protocol");
  host->add_option("--plugin", host_plugin, "shared library exporting attest_kernel_entry");
  host->add_option("--builtin", host_builtin, "built-in kernel or mutant name");

  std::string replay_path, replay_kernel;
  CLI::App* rep = app.add_subcommand("replay", "re-run a saved counterexample and print its verdict");
  rep->add_option("file", replay_path, "problem file written by a failing check")->required();
  rep->add_option("--kernel", replay_kernel, "kernel to run instead of the one recorded in the file");
  LoadOptions replay_load;
  rep->add_flag("--isolate", replay_load.isolate, "run the kernel in a child process (implied when it was isolated)");
  rep->add_option("--timeout", replay_load.timeout_seconds, "seconds per call in a child process");

  int calibrate_cases = 10000;
  std::uint64_t calibrate_seed = 0;
  std::string calibrate_kernel;
  CLI::App* cal = app.add_subcommand("calibrate", "long run: tolerance gates on random problems, count false alarms");
  cal->add_option("--cases", calibrate_cases, "problems per kernel")->capture_default_str();
  cal->add_option("--seed", calibrate_seed, "first seed (default: from the clock, printed)");
  cal->add_option("--kernel", calibrate_kernel, "one kernel (default: all built-in)");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  try {
    if (*cert) {
      request.options.property_cases = budget_cases(budget);
      return certify(std::move(request));
    }
    if (*fz) return run_fuzz(fuzz);
    if (*ben) return run_bench(bench);
    if (*mut) {
      mutants.property_cases = budget_cases(mutants_budget);
      mutants.seed = seed_or_clock(mutants.seed);
      std::cerr << "attest mutants: seed " << mutants.seed << "\n";
      return run_mutants(mutants);
    }
    if (*host) return host_plugin.empty() ? serve_builtin(host_builtin) : serve_plugin(host_plugin);
    if (*rep) return replay(replay_path, replay_kernel, replay_load);
    if (*cal) return calibrate(calibrate_cases, seed_or_clock(calibrate_seed), calibrate_kernel) == 0 ? 0 : 1;
  } catch (const CLI::ValidationError& e) {
    std::cerr << "attest: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "attest: " << e.what() << "\n";
    return 2;
  }
  return 0;
}
