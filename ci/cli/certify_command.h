// `attest certify`: certify kernels, write the certificate, gate on a baseline.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "certificate.h"
#include "certify.h"
#include "kernel_resolver.h"

namespace attest {

struct CertifyRequest {
  std::vector<std::string> kernels;
  std::vector<std::string> commands;
  CertifyOptions options;
  LoadOptions load;
  std::string json_path, junit_path, baseline_path;
  double baseline_factor = 2.0;
  bool baseline_any_options = false;  // --baseline-any-options
  double deadline_seconds = 3600;
  FeatureSet required;              // --require
  std::optional<ShardId> shard;     // --shard K/N: this run's share of the checks
  std::string shard_source;         // --shard auto: the variables it came from, named in the scope line
  bool verbose = false;             // --verbose: the full report and progress (ReportDetail::kFull)
  bool list_checks = false;         // --list-checks: print every check, run nothing
  bool catalogue_markdown = false;  // with --list-checks, --markdown: the catalogue as docs/properties.md's table
  bool plan = false;                // --plan: print what would run on each kernel, run nothing
};

// Exit code: 0 certified, 1 not (a failure, too little evidence, a missing --require, a
// regression); usage and load errors throw.
int run_certify(CertifyRequest request);

// The run's last lines: a REGRESSION line per way it is worse than the baseline, then
// `prefix` and CERTIFIED or NOT CERTIFIED. Returns whether it is certified.
bool print_verdict(const CertificateInfo& info, const std::optional<Baseline>& baseline,
                   const std::string& baseline_path, double factor, const std::string& prefix = "");

// "causal,gqa,lse" -> the features; throws FlagError naming an unknown one.
FeatureSet parse_features(const std::vector<std::string>& names);

}  // namespace attest
