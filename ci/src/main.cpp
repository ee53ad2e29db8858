// The `attest` command line. Exit codes: 0 certified, 1 a check failed, 2 usage or load error.
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <iostream>

#include "certify.h"

namespace {

int certify(const std::vector<std::string>& kernel_names) {
  using namespace attest;
  std::vector<std::unique_ptr<Kernel>> kernels;
  for (const std::string& name : kernel_names) kernels.push_back(make_kernel(name));
  if (kernels.empty())
    for (const KernelEntry& e : kernel_registry()) kernels.push_back(e.make());

  Oracle oracle(1024);  // every deterministic case's reference is computed once for all kernels
  std::vector<CheckResult> results;
  const std::vector<CheckPlan> plans = core_plans();
  for (const auto& kernel : kernels)
    for (const CheckPlan& plan : plans) results.push_back(run_plan(plan, *kernel, oracle, {}));
  std::cout << format_table(results);
  for (const CheckResult& r : results)
    if (!r.passed()) return 1;
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"attest: certify attention kernels against exact attention"};
  app.require_subcommand(1);

  std::vector<std::string> kernels;
  CLI::App* cert = app.add_subcommand("certify", "run the certification checks and print the table");
  cert->add_option("--kernel", kernels, "built-in kernel name (repeatable); default: all built-in kernels");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  try {
    if (*cert) return certify(kernels);
  } catch (const std::exception& e) {
    std::cerr << "attest: " << e.what() << "\n";
    return 2;
  }
  return 0;
}
