// The `attest` command line. Exit codes: 0 certified / passed, 1 a check failed,
// 2 usage, load or input error.
#include <CLI/CLI.hpp>
#include <chrono>
#include <fstream>
#include <sstream>
#include <fmt/format.h>
#include <iostream>

#include <filesystem>
#include <unistd.h>

#include "attest/file_io.h"
#include "attest/problem_file.h"
#include "attest/property_driver.h"
#include "flags.h"
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

struct CertifyRequest {
  std::vector<std::string> kernels;
  std::vector<std::string> commands;
  CertifyOptions options;
  LoadOptions load;
  std::string json_path, junit_path, baseline_path;
  double baseline_factor = 2.0;
  double deadline_seconds = 3600;
  FeatureSet required;  // --require
};

// "causal,gqa,lse" -> the features; an unknown name is a usage error naming the known ones.
FeatureSet parse_features(const std::vector<std::string>& names) {
  FeatureSet out;
  for (const std::string& name : names) {
    const std::optional<Feature> f = feature_named(name);
    if (!f) throw FlagError("--require: unknown feature '" + name + "' (known: " + FeatureSet::all().joined() + ")");
    out.insert(*f);
  }
  return out;
}

// Half the machine's memory, at least 1 GiB: a kernel in a child process gets no more.
std::size_t default_memory_limit() {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  const std::size_t total = pages > 0 && page > 0 ? std::size_t(pages) * std::size_t(page) : std::size_t{2} << 30;
  return std::max<std::size_t>(total / 2, std::size_t{1} << 30);
}

// How a kernel named on the command line is recorded for replay: plugin paths made absolute.
std::string recorded_name(const std::string& name) {
  const bool is_path = name.find('/') != std::string::npos || name.ends_with(".so");
  return is_path ? std::filesystem::absolute(name).lexically_normal().string() : name;
}

int certify(CertifyRequest request) {
  CertifyOptions& options = request.options;
  // Everything that can be refused is refused before the first check runs.
  if (!request.json_path.empty() && request.json_path == request.junit_path)
    throw FlagError("--json and --junit name the same file " + request.json_path);
  if (!request.json_path.empty()) check_writable("--json", request.json_path);
  if (!request.junit_path.empty()) check_writable("--junit", request.junit_path);
  std::optional<Baseline> baseline;  // read fully now: it may be the file --json overwrites
  if (!request.baseline_path.empty()) baseline = read_baseline(request.baseline_path);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                                              std::chrono::duration<double>(request.deadline_seconds));
  options.deadline = deadline;
  request.load.containment.deadline = deadline;

  std::vector<std::pair<std::string, std::unique_ptr<Kernel>>> kernels;
  for (const std::string& name : request.kernels)
    kernels.emplace_back(recorded_name(name), resolve_kernel(name, request.load));
  for (const std::string& cmd : request.commands) kernels.emplace_back("cmd:" + cmd, command_kernel(cmd, request.load));
  if (kernels.empty())
    for (const KernelEntry& e : kernel_registry()) kernels.emplace_back("builtin:" + e.name, resolve_kernel(e.name, request.load));
  options.seed = seed_or_clock(options.seed);
  std::cerr << fmt::format("attest certify: seed {}, {} cases per property\n", options.seed, options.property_cases);

  Oracle oracle(1024);  // every deterministic case's reference is computed once for all kernels
  CertificateInfo info{options.seed, options.property_cases, {}};
  for (const auto& [source, kernel] : kernels) {
    options.kernel_source = source;
    options.isolated = request.load.isolate || dynamic_cast<const ProcessKernel*>(kernel.get()) != nullptr;
    KernelReport report{source, kernel->name(), kernel->capabilities(), certify_kernel(*kernel, oracle, options),
                        request.required};
    std::cout << format_report(report) << "\n";
    info.kernels.push_back(std::move(report));
  }
  if (!request.json_path.empty()) write_file_atomically(request.json_path, certificate_json(info) + "\n");
  if (!request.junit_path.empty()) write_file_atomically(request.junit_path, certificate_junit(info));
  bool ok = true;
  for (const KernelReport& k : info.kernels) ok = ok && k.passed();
  if (baseline) {
    const std::vector<std::string> worse = regressions(*baseline, info, request.baseline_factor);
    for (const std::string& reason : worse) std::cout << "REGRESSION " << reason << "\n";
    if (worse.empty()) std::cout << "baseline " << request.baseline_path << ": no regression\n";
    ok = ok && worse.empty();
  }
  std::cout << (ok ? "CERTIFIED\n" : "NOT CERTIFIED\n");
  return ok ? 0 : 1;
}

// Kernels a file may name and replay may run: code inside attest itself, nothing else.
bool names_builtin_code(const std::string& name) {
  if (name.starts_with("mutant:") || name.starts_with("builtin:") || name == "baseline:blas") return true;
  for (const KernelEntry& e : kernel_registry())
    if (name == e.name) return true;
  return false;
}

// A shell word for the command the user is told to run.
std::string quoted(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

int replay(const std::string& path, const std::string& kernel_override, const std::string& command_override,
           LoadOptions load) {
  const ProblemFile file = load_problem_file(path);
  std::unique_ptr<Kernel> kernel;
  if (!command_override.empty()) {
    kernel = command_kernel(command_override, load);
  } else if (!kernel_override.empty()) {
    kernel = resolve_kernel(kernel_override, load);
  } else {
    if (file.kernel.empty()) throw std::invalid_argument(path + " names no kernel; pass --kernel");
    // A file is data, never code: a plugin or command recorded in it runs only when the user names it.
    if (!names_builtin_code(file.kernel)) {
      const bool command = file.kernel.starts_with("cmd:");
      std::cerr << fmt::format(
          "attest: {} was recorded with an external kernel; attest does not run code named in a file.\n"
          "To replay it with that kernel, run:\n  attest replay {} {} {}\n",
          path, quoted(path), command ? "--kernel-cmd" : "--kernel", quoted(command ? file.kernel.substr(4) : file.kernel));
      return 2;
    }
    load.isolate = load.isolate || file.isolated;
    kernel = resolve_kernel(file.kernel, load);
  }
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

  // Numbers arrive as text and are parsed strictly after CLI11 (flags.h): finite, in range, whole.
  CertifyRequest request;
  std::string budget = "default", seed_text, baseline_factor = "2", timeout = "30", deadline = "3600",
              memory_limit, fuzz_seconds = "0";
  CLI::App* cert = app.add_subcommand("certify", "run golden, grid and property checks; print the certificate table");
  cert->add_option("--kernel", request.kernels,
                   "NAME, builtin:NAME, mutant:NAME or a plugin PATH.so (repeatable; default: all built-in)");
  cert->add_option("--kernel-cmd", request.commands, "a program speaking the process protocol (repeatable)");
  cert->add_option("--budget", budget, "cases per property: quick (10), default (100), thorough (1000) or a number");
  cert->add_option("--seed", seed_text, "RapidCheck seed (default: from the clock, printed)");
  cert->add_option("--out", request.options.out_dir, "directory for counterexamples")->capture_default_str();
  cert->add_option("--json", request.json_path, "write the certificate as JSON (ci/schema/certificate.schema.json)");
  cert->add_option("--junit", request.junit_path, "write the results as JUnit XML");
  cert->add_option("--baseline", request.baseline_path, "fail when worse than this earlier JSON certificate");
  cert->add_option("--baseline-factor", baseline_factor, "allowed growth of worst err/bound (>= 1)")->capture_default_str();
  cert->add_option("--timeout", timeout, "seconds per call for kernels in a child process")->capture_default_str();
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

  FuzzRequest fuzz;
  CLI::App* fz = app.add_subcommand("fuzz", "run a libFuzzer target (fuzz preset) and save what it finds");
  fz->add_option("--target", fuzz.target, "fuzz_mask_leak, fuzz_overflow, fuzz_decode or fuzz_differential")->required();
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
      request.options.seed = seed_of_flag(seed_text);
      request.options.fuzz_seconds = parse_number("--fuzz-seconds", fuzz_seconds, 0, 86400);
      request.baseline_factor = parse_number("--baseline-factor", baseline_factor, 1, 1e6);
      request.load.containment.timeout_seconds = parse_seconds("--timeout", timeout, 86400);
      request.load.containment.memory_limit_bytes = memory_of_flag(memory_limit);
      request.deadline_seconds = parse_seconds("--deadline", deadline, 30 * 86400);
      request.required = parse_features(required);
      return certify(std::move(request));
    }
    if (*fz) {
      fuzz.seconds = static_cast<int>(parse_integer("--seconds", fuzz_target_seconds, 1, 86400));
      return run_fuzz(fuzz);
    }
    if (*ben) return run_bench(bench);
    if (*mut) {
      mutants.property_cases = parse_budget("--budget", mutants_budget);
      mutants.seed = seed_or_clock(seed_of_flag(mutants_seed));
      mutants.fuzz_seconds = static_cast<int>(parse_integer("--fuzz-seconds", mutants_fuzz_seconds, 0, 86400));
      std::cerr << "attest mutants: seed " << mutants.seed << "\n";
      return run_mutants(mutants);
    }
    if (*host) return host_plugin.empty() ? serve_builtin(host_builtin) : serve_plugin(host_plugin);
    if (*rep) {
      replay_load.containment.timeout_seconds = parse_seconds("--timeout", replay_timeout, 86400);
      replay_load.containment.memory_limit_bytes = memory_of_flag(replay_memory);
      return replay(replay_path, replay_kernel, replay_command, replay_load);
    }
    if (*cal) {
      const int cases = static_cast<int>(parse_integer("--cases", calibrate_cases, 1, 100'000'000));
      return calibrate(cases, seed_or_clock(seed_of_flag(calibrate_seed)), calibrate_kernel) == 0 ? 0 : 1;
    }
  } catch (const CLI::ValidationError& e) {
    std::cerr << "attest: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "attest: " << e.what() << "\n";
    return 2;
  }
  return 0;
}
