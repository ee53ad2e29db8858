// The `attest` command line. Exit codes: 0 certified / passed, 1 a check failed,
// 2 usage, load or input error.
#include <CLI/CLI.hpp>
#include <chrono>
#include <fmt/format.h>
#include <iostream>

#include "attest/problem_file.h"
#include "attest/property_driver.h"
#include "calibrate.h"
#include "certify.h"
#include "kernel_lookup.h"

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

int certify(const std::vector<std::string>& kernel_names, CertifyOptions options) {
  std::vector<std::unique_ptr<Kernel>> kernels;
  for (const std::string& name : kernel_names) kernels.push_back(resolve_kernel(name));
  if (kernels.empty())
    for (const KernelEntry& e : kernel_registry()) kernels.push_back(e.make());
  options.seed = seed_or_clock(options.seed);
  std::cerr << fmt::format("attest certify: seed {}, {} cases per property\n", options.seed, options.property_cases);

  Oracle oracle(1024);  // every deterministic case's reference is computed once for all kernels
  std::vector<CheckResult> results;
  for (const auto& kernel : kernels) {
    std::vector<CheckResult> r = certify_kernel(*kernel, oracle, options);
    results.insert(results.end(), r.begin(), r.end());
  }
  std::cout << format_table(results);
  for (const CheckResult& r : results)
    if (!r.passed()) return 1;
  return 0;
}

int replay(const std::string& path, const std::string& kernel_override) {
  const ProblemFile file = load_problem_file(path);
  const std::string kernel_name = kernel_override.empty() ? file.kernel : kernel_override;
  if (kernel_name.empty()) throw std::invalid_argument(path + " names no kernel; pass --kernel");
  const auto kernel = resolve_kernel(kernel_name);
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

  std::vector<std::string> kernels;
  CertifyOptions certify_options;
  std::string budget = "default";
  CLI::App* cert = app.add_subcommand("certify", "run golden, grid and property checks; print the certificate table");
  cert->add_option("--kernel", kernels, "kernel: NAME or builtin:NAME or mutant:NAME (repeatable; default: all built-in)");
  cert->add_option("--budget", budget, "cases per property: quick (10), default (100), thorough (1000) or a number");
  cert->add_option("--seed", certify_options.seed, "RapidCheck seed (default: from the clock, printed)");
  cert->add_option("--out", certify_options.out_dir, "directory for counterexamples")->capture_default_str();

  std::string replay_path, replay_kernel;
  CLI::App* rep = app.add_subcommand("replay", "re-run a saved counterexample and print its verdict");
  rep->add_option("file", replay_path, "problem file written by a failing check")->required();
  rep->add_option("--kernel", replay_kernel, "kernel to run instead of the one recorded in the file");

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
      certify_options.property_cases = budget_cases(budget);
      return certify(kernels, certify_options);
    }
    if (*rep) return replay(replay_path, replay_kernel);
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
