#include "selfcheck.h"

#include <fmt/format.h>

#include <chrono>
#include <ctime>
#include <filesystem>
#include <iostream>
#include <map>
#include <sstream>
#include <stdexcept>

#include "attest/abi/abi_adapter.h"
#include "attest/abi/process_kernel_server.hpp"
#include "attest/model/quantized.h"
#include "attest/properties/file_io.h"
#include "certificate.h"
#include "certify.h"
#include "declaration_draw.h"
#include "declared_model.h"
#include "frozen_declaration.h"
#include "process_kernel.h"

namespace attest {
namespace {

std::string verdict_line(const std::string& report) {
  const std::string line = report.substr(report.rfind("NOT CERTIFIED"));
  return line.substr(0, line.find('\n'));
}

// The model served through the C ABI and the protocol, from a fork of this process.
std::unique_ptr<Kernel> served(const Kernel& model) {
  ProcessKernel::Options options;
  options.description = "the model kernel " + model.name();
  options.serve_in_child = [&model](int in, int out) {
    AbiAdapter adapter(std::make_unique<FrozenDeclaration>(model));
    return protocol::serve_descriptor(adapter.descriptor(), in, out);
  };
  return std::make_unique<ProcessKernel>(std::move(options));
}

// Certifies one declaration's model; true when CERTIFIED. A finding leaves the report in the
// declaration's folder beside its counterexamples.
bool certify_declaration(int index, const SelfcheckOptions& o, Oracle& oracle, const std::string& route) {
  const Capabilities declaration = draw_declaration(o.seed, index);
  const std::string name = fmt::format("model-{}", index);
  const std::unique_ptr<Kernel> model = make_declared_model(declaration, name);
  std::unique_ptr<Kernel> through;
  try {
    if (route == "protocol") through = served(*model);
  } catch (const std::exception& e) {  // the descriptor refused: the ABI cannot carry the declaration
    std::cout << fmt::format("{:<10} {:<9} REFUSED {}\n  declaration: {}\n", name, route, e.what(),
                             declared_scope(declaration));
    return false;
  }
  const Kernel& kernel = through ? *through : *model;
  CertifyOptions options;
  options.property_cases = o.property_cases;
  options.sized_stages = false;
  options.seed = o.seed;
  options.progress = false;
  options.isolated = route == "protocol";
  options.out_dir = fmt::format("{}/{}-{}", o.out_dir, name, route);
  options.kernel_source = fmt::format("selfcheck:{}:{}", o.seed, index);
  const auto start = std::chrono::steady_clock::now();
  // CPU as well as wall time: on a shared machine only the CPU says what a declaration costs (this
  // process's: a protocol server's own is not in it).
  const std::clock_t cpu_start = std::clock();
  const FrozenDeclaration frozen(kernel);
  KernelReport report{
      options.kernel_source, name, frozen.capabilities(), certify_kernel(frozen, oracle, options), {}, {}, {}};
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double cpu = static_cast<double>(std::clock() - cpu_start) / CLOCKS_PER_SEC;
  if (report.passed()) {
    std::cout << fmt::format("{:<10} {:<9} CERTIFIED ({:.1f} s, {:.1f} s CPU)\n", name, route, seconds, cpu);
    return true;
  }
  const std::string text = format_report(report);
  std::filesystem::create_directories(options.out_dir);  // a failure without a counterexample made none
  write_file_atomically(options.out_dir + "/report.txt", text);
  std::cout << fmt::format("{:<10} {:<9} FALSE ALARM ({:.1f} s, {:.1f} s CPU): {}\n  declaration: {}\n", name, route,
                           seconds, cpu, verdict_line(text), declared_scope(declaration));
  for (const CheckResult& r : report.checks)
    if (r.failures) std::cout << fmt::format("  {}: {}\n", r.check, r.first_failure);
  std::cout << fmt::format("  report: {}/report.txt; again: attest selfcheck --seed {} --only {}\n", options.out_dir,
                           o.seed, index);
  return false;
}

// How often the run drew each field the model serves beyond a plain forward: that every one of
// them was certified is only visible when it was drawn.
std::string drawn_fields(std::uint64_t seed, const std::vector<int>& indices) {
  std::map<std::string, int> n;
  for (const int i : indices) {
    const Capabilities c = draw_declaration(seed, i);
    const Precision& p = c.precision;
    n["backward"] += c.backward();
    n["decode"] += c.decode();
    n["decode-only"] += c.decode() && !c.forward();
    n[fmt::format("cache {}", to_string(c.cache.kind))] += c.decode() && c.cache.evicts();
    n["block table"] += c.page_tokens > 0;
    n["declared paths"] += !c.paths.empty();
    n["merge"] += c.merge;
    n["merge with splits"] += c.merge && c.declares(Feature::kExplicitMask) && c.lse() && c.forward();
    n["quantized K/V"] += scaled(p.k);
    n["fp8 K/V"] += p.k == Scalar::kE4M3 || p.k == Scalar::kE5M2;
    n["q4_0 K/V"] += p.k == Scalar::kQ4_0;
    n["Q q8 on entry"] += p.q_entry == Scalar::kQ8;
    n["subnormals flushed"] += p.flush_subnormals;
    n["packed"] += c.packed;
    n["Dv widths"] += !c.contract.value_dims.empty() || !c.contract.value_dim.unlimited();
    n["ALiBi or bias"] += c.contract.alibi_excludes_bias;
    n["entry rounding"] += p.q_entry != Scalar::kF32 || p.k_entry != Scalar::kF32 || p.v_entry != Scalar::kF32;
    n[fmt::format("inputs {}", to_string(c.inputs))] += 1;
  }
  std::string out;
  for (const auto& [field, count] : n)
    if (count) out += fmt::format("{}{} {}", out.empty() ? "" : ", ", field, count);
  return out;
}

}  // namespace

int run_selfcheck(const SelfcheckOptions& o) {
  std::cout << fmt::format("attest selfcheck: seed {}, {} declarations, {} cases per property{}\n", o.seed,
                           o.only.empty() ? o.declarations : static_cast<int>(o.only.size()), o.property_cases,
                           o.through_protocol ? ", in process and through the protocol" : "");
  std::vector<int> indices = o.only;
  for (int i = 0; indices.size() < static_cast<std::size_t>(o.declarations) && o.only.empty(); ++i)
    indices.push_back(i);
  if (o.draw_only) {
    std::cout << fmt::format("drawn ({} declarations): {}\n", indices.size(), drawn_fields(o.seed, indices));
    return 0;
  }
  Oracle oracle(1024);
  int alarms = 0, known = 0, fixed = 0, runs = 0;
  for (const int i : indices)
    for (const std::string route : {"in-process", "protocol"}) {
      if (route == "protocol" && !o.through_protocol) continue;
      ++runs;
      const bool certified = certify_declaration(i, o, oracle, route);
      std::cout.flush();  // a long run's progress, line by line
      if (o.known.count(i)) {
        if (!certified) ++known, std::cout << "  (a known open defect: listed in the known false alarms)\n";
        if (certified)
          ++fixed,
              std::cout << fmt::format(
                  "  model-{} is listed as a known false alarm but is CERTIFIED now: remove it from the list\n", i);
      } else if (!certified) {
        ++alarms;
      }
    }
  std::cout << fmt::format("drawn ({} declarations): {}\n", indices.size(), drawn_fields(o.seed, indices));
  std::cout << fmt::format(
      "selfcheck: {} of {} runs CERTIFIED; {} new false alarm{}, {} known, {} known now fixed (seed {})\n",
      runs - alarms - known, runs, alarms, alarms == 1 ? "" : "s", known, fixed, o.seed);
  return alarms + fixed;
}

std::set<int> read_known_false_alarms(const std::string& path, std::uint64_t seed) {
  std::istringstream lines(read_file(path));
  std::set<int> out;
  int number = 0;
  for (std::string line; std::getline(lines, line);) {
    ++number;
    line = line.substr(0, line.find('#'));
    std::istringstream fields(line);
    std::uint64_t line_seed = 0;
    int index = -1;
    std::string extra;
    if (!(fields >> line_seed)) continue;  // blank or a comment
    if (!(fields >> index) || index < 0 || (fields >> extra))
      throw std::invalid_argument(fmt::format("{}:{}: expected 'SEED INDEX  # why'", path, number));
    if (line_seed == seed) out.insert(index);
  }
  return out;
}

}  // namespace attest
