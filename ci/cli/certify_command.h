// `attest certify`: certify kernels, write the certificate, gate on a baseline.
#pragma once

#include <string>
#include <vector>

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
  double deadline_seconds = 3600;
  FeatureSet required;  // --require
};

// Exit code: 0 certified, 1 not (a failure, too little evidence, a missing --require, a
// regression); usage and load errors throw.
int run_certify(CertifyRequest request);

// "causal,gqa,lse" -> the features; throws FlagError naming an unknown one.
FeatureSet parse_features(const std::vector<std::string>& names);

// Half the machine's memory, at least 1 GiB: what a kernel in a child process may take by default.
std::size_t default_memory_limit();

}  // namespace attest
