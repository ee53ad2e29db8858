// A baseline certificate as the regression gate reads it: every field it uses, checked for
// type (and for verdicts, value) before the run starts, so a damaged or hostile file is a
// one-line error naming the field, never a crash or a half-compared certificate. Reads
// certificate versions 1 and 2 (version 1 has no effective cases, coverage or contract).
#pragma once

#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace attest {

class BaselineError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct BaselineCheck {
  std::string stage, check;
  std::string verdict;  // "pass", "fail", "not covered", "insufficient" (version 1: "n/a")
  long cases = 0;
  long effective = 0;                       // version 1: cases
  std::optional<double> worst_utilisation;  // null in the file: unbounded
};

// What a kernel claimed; empty for version 1, which did not record it.
struct BaselineClaims {
  std::vector<std::string> features;             // declared
  std::vector<std::string> exercised_features;   // covered by effective cases
  std::map<std::string, std::string> precision;  // q, k, v, o, scores, p, accumulator -> f32, bf16, f16
  double exp_ulps = 1.0;
  bool flush_subnormals = false;  // ABI 2.9: absent in older files, and when not declared
  std::vector<long long> head_dims;
  std::map<std::string, std::optional<std::pair<long long, long long>>> ranges;  // head_dim, batch, ...: null = any
  std::map<std::string, bool> restrictions;  // dk_equals_dv, default_scale_only, causal_required, decode_only,
                                             // self_attention_only
  std::string contract_summary;
  // The rest of the declaration the certificate records (cache, inputs, empty_rows, paths, key
  // tile, ...), each field as its compact JSON: any difference is a regression.
  std::map<std::string, std::string> declaration;
};

struct BaselineKernel {
  std::string name;
  std::vector<BaselineCheck> checks;
  std::map<std::string, long> paths;  // internal path -> cases
  std::optional<BaselineClaims> claims;
};

struct Baseline {
  int version = 0;
  std::vector<BaselineKernel> kernels;
  std::optional<std::map<std::string, std::string>> options;  // the run's options, when recorded
  bool any_options = false;  // --baseline-any-options: a run made differently is compared anyway
};

// Parses a certificate written by `attest certify --json`; throws BaselineError.
Baseline parse_baseline(const std::string& text);
Baseline read_baseline(const std::string& path);

}  // namespace attest
