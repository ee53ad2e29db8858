#include "merge_command.h"

#include <fmt/format.h>

#include <iostream>
#include <optional>

#include "attest/properties/file_io.h"
#include "certify_command.h"
#include "document_output.h"
#include "flags.h"
#include "merge.h"
#include "run_summary.h"

namespace attest {

int run_merge(const MergeRequest& request) {
  // Refused before anything is read, as certify does.
  if (request.json_path == request.junit_path)
    throw FlagError("--json and --junit name the same file " + request.json_path);
  if (!is_stdout(request.json_path)) check_writable("--json", request.json_path);
  if (!request.junit_path.empty() && !is_stdout(request.junit_path)) check_writable("--junit", request.junit_path);
  check_not_an_input("--json", request.json_path, request.inputs);
  check_not_an_input("--junit", request.junit_path, request.inputs);
  std::optional<Baseline> baseline;  // read first: it may be the file --json overwrites
  if (!request.baseline_path.empty()) baseline = read_baseline(request.baseline_path);
  if (baseline) baseline->any_options = request.baseline_any_options;

  const DocumentOutput documents(is_stdout(request.json_path) || is_stdout(request.junit_path));
  std::vector<ShardCertificate> shards;
  for (const std::string& path : request.inputs) shards.push_back(read_shard_certificate(path));
  const CertificateInfo info = merge_shards(shards);
  std::cerr << fmt::format("attest merge: {} shards, seed {}, {} cases per property\n", shards.size(), info.seed,
                           info.property_cases);
  const ReportDetail detail = request.verbose ? ReportDetail::kFull : ReportDetail::kCompact;
  for (const KernelReport& k : info.kernels) std::cout << format_report(k, detail) << "\n";
  std::cout << format_run_end(info, -1, detail);
  documents.write(request.json_path, certificate_json(info) + "\n");
  documents.write(request.junit_path, certificate_junit(info));

  return print_verdict(info, baseline, request.baseline_path, request.baseline_factor) ? 0 : 1;
}

}  // namespace attest
