#include "certify_command.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <iostream>
#include <thread>

#include "attest/properties/file_io.h"
#include "catalogue_markdown.h"
#include "certificate.h"
#include "check_plan.h"
#include "check_selection.h"
#include "document_output.h"
#include "flags.h"
#include "frozen_declaration.h"
#include "identity.h"
#include "process_kernel.h"
#include "progress.h"
#include "run_summary.h"

namespace attest {
namespace {

// How a kernel named on the command line is recorded for replay: plugin paths made absolute.
std::string recorded_name(const std::string& name) {
  const bool is_path = name.find('/') != std::string::npos || name.ends_with(".so");
  return is_path ? std::filesystem::absolute(name).lexically_normal().string() : name;
}

// The options that change which cases run or how a call is judged: recorded in the certificate,
// so shards never join runs made differently. Not the output paths, --jobs or the memory limit
// (its default follows the machine's memory).
std::map<std::string, std::string> run_options(const CertifyRequest& request) {
  const CertifyOptions& o = request.options;
  const SizeOptions& s = o.sizes;
  auto list = [](const std::vector<int>& v) {
    return v.empty() ? std::string("default") : fmt::format("{}", fmt::join(v, ","));
  };
  return {{"size_stages", o.sized_stages ? "on" : "off"},
          {"max_len", std::to_string(s.max_len)},
          {"lengths", list(s.lengths)},
          {"head_dims", list(s.head_dims)},
          {"long_seconds", fmt::format("{}", s.time_budget)},
          {"required_len", std::to_string(s.required_len)},
          {"tile_multiple", std::to_string(s.tile_multiple)},
          {"fuzz_seconds", fmt::format("{}", o.fuzz_seconds)},
          {"shrink", o.shrink ? "on" : "off"},
          {"timeout_seconds", fmt::format("{}", request.load.containment.timeout_seconds)},
          {"isolate", request.load.isolate ? "on" : "off"}};
}

// run_options, with --check when it chose the checks (a run of every check records none, as before it existed).
std::map<std::string, std::string> recorded_options(const CertifyRequest& request) {
  std::map<std::string, std::string> options = run_options(request);
  if (request.options.checks) options["checks"] = request.options.checks->text();
  return options;
}

int list_checks(bool markdown) {
  if (markdown) {
    std::cout << catalogue_markdown();
    return 0;
  }
  for (const CheckName& c : every_check()) std::cout << fmt::format("{:<14} {}\n", c.stage, c.name);
  return 0;
}

}  // namespace

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

int run_certify(CertifyRequest request) {
  if (request.catalogue_markdown && !request.list_checks)
    throw FlagError(
        "--markdown: prints the catalogue, with --list-checks (a run's summary: attest report CERT --markdown)");
  if (request.list_checks) return list_checks(request.catalogue_markdown);
  CertifyOptions& options = request.options;
  const auto started = std::chrono::steady_clock::now();
  options.verbose = request.verbose;
  const ReportDetail detail = request.verbose ? ReportDetail::kFull : ReportDetail::kCompact;
  // Everything that can be refused is refused before the first check runs.
  if (!request.json_path.empty() && same_file_path(request.json_path, request.junit_path))
    throw FlagError("--json and --junit name the same file " + request.json_path);
  if (std::error_code ec;
      std::filesystem::exists(options.out_dir, ec) && !std::filesystem::is_directory(options.out_dir, ec))
    throw FlagError("--out " + options.out_dir + ": is not a folder (counterexamples are saved in it)");
  if (!request.json_path.empty() && !is_stdout(request.json_path)) check_writable("--json", request.json_path);
  if (!request.junit_path.empty() && !is_stdout(request.junit_path)) check_writable("--junit", request.junit_path);
  // No output replaces an input of the run: a plugin's file, say, or the baseline gated against.
  std::vector<std::string> inputs = request.kernels;
  if (!request.baseline_path.empty()) inputs.push_back(request.baseline_path);
  check_not_an_input("--json", request.json_path, inputs);
  check_not_an_input("--junit", request.junit_path, inputs);
  if (request.plan && request.shard) throw FlagError("--plan: a plan is of the whole run; drop --shard");
  if (request.shard && !request.baseline_path.empty())
    throw FlagError(
        "--baseline: a shard holds only its share of the checks; gate on the merged certificate "
        "(attest merge ... --baseline FILE)");
  std::optional<Baseline> baseline;
  if (!request.baseline_path.empty()) baseline = read_baseline(request.baseline_path);
  if (baseline) baseline->any_options = request.baseline_any_options;
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                             std::chrono::duration<double>(request.deadline_seconds));
  options.deadline = deadline;
  request.load.containment.deadline = deadline;

  std::vector<std::pair<std::string, std::unique_ptr<Kernel>>> kernels;
  for (const std::string& name : request.kernels)
    kernels.emplace_back(recorded_name(name), resolve_kernel(name, request.load));
  for (const std::string& cmd : request.commands)
    kernels.emplace_back("cmd:" + cmd, resolve_kernel("cmd:" + cmd, request.load));
  if (kernels.empty())
    for (const KernelEntry& e : kernel_registry())
      kernels.emplace_back("builtin:" + e.name, resolve_kernel(e.name, request.load));
  if (request.plan) {  // the declarations alone: no check runs
    for (const auto& [source, kernel] : kernels) {
      const FrozenDeclaration frozen(*kernel);
      std::cout << format_plan(source, frozen.name(), plan_checks(frozen, options)) << "\n";
    }
    return 0;
  }
  options.seed = seed_or_clock(options.seed);
  std::cerr << fmt::format(
      "attest certify: seed {}, {} cases per property{}\n", options.seed, options.property_cases,
      request.shard ? fmt::format(", shard {}/{}", request.shard->index, request.shard->count) : "");
  std::optional<ShardCursor> cursor;  // one for the run: positions run on across kernels
  if (request.shard) cursor = ShardCursor{*request.shard};
  options.shard = cursor ? &*cursor : nullptr;

  Oracle oracle(1024);  // every deterministic case's reference is computed once for all kernels
  const DocumentOutput documents(is_stdout(request.json_path) || is_stdout(request.junit_path));
  CertificateInfo info{options.seed, options.property_cases, {}, request.shard, recorded_options(request)};
  std::size_t checks_run = 0;
  for (const auto& [source, kernel] : kernels) {
    options.kernel_source = source;
    options.isolated = request.load.isolate || dynamic_cast<const ProcessKernel*>(kernel.get()) != nullptr;
    const FrozenDeclaration frozen(*kernel);  // one reading of its declaration: the report's and the checks'
    KernelReport report{
        source,           frozen.name(), frozen.capabilities(),  certify_kernel(frozen, oracle, options),
        request.required, request.shard, kernel_identity(source)};
    if (options.checks) report.check_selection = options.checks->text();
    checks_run += report.checks.size();
    end_progress();
    std::cout << format_report(report, detail) << "\n" << std::flush;
    info.kernels.push_back(std::move(report));
  }
  std::cout << format_run_end(info, std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count(),
                              detail);
  if (!request.json_path.empty()) documents.write(request.json_path, certificate_json(info) + "\n");
  if (!request.junit_path.empty()) documents.write(request.junit_path, certificate_junit(info));
  std::string prefix;  // a shard's verdict speaks for its share only
  if (request.shard) {
    prefix = fmt::format("shard {}/{}: ", request.shard->index, request.shard->count);
    std::cout << fmt::format(
        "{}{} of the run's checks (positions p with p % {} == {} in the unsharded order{}); "
        "`attest merge` joins the shards' certificates{}\n",
        prefix, checks_run, request.shard->count, request.shard->index - 1,
        request.shard_source.empty() ? "" : "; the shard from " + request.shard_source,
        request.required.empty() ? "" : " and judges --require");
  }
  return print_verdict(info, baseline, request.baseline_path, request.baseline_factor, prefix) ? 0 : 1;
}

bool print_verdict(const CertificateInfo& info, const std::optional<Baseline>& baseline,
                   const std::string& baseline_path, double factor, const std::string& prefix) {
  bool ok = true;
  for (const KernelReport& k : info.kernels) ok = ok && k.passed();
  if (baseline) {
    const std::vector<std::string> worse = regressions(*baseline, info, factor);
    for (const std::string& reason : worse) std::cout << "REGRESSION " << reason << "\n";
    if (const auto difference = options_difference(*baseline, info); difference && baseline->any_options)
      std::cout << "baseline " << baseline_path << ": " << *difference
                << "; compared anyway (--baseline-any-options)\n";
    if (worse.empty()) std::cout << "baseline " << baseline_path << ": no regression\n";
    ok = ok && worse.empty();
  }
  std::cout << prefix << (ok ? "CERTIFIED\n" : "NOT CERTIFIED\n");
  return ok;
}

}  // namespace attest
