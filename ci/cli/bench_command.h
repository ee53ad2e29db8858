// `attest bench`: kernel speed and memory by sequence length, side by side in one run.
#pragma once

#include <string>
#include <vector>

namespace attest {

struct BenchRequest {
  std::vector<std::string> kernels;  // default: every built-in kernel and baseline:blas
  std::vector<int> lengths = {128, 256, 512, 1024, 2048, 4096, 8192, 16384};
  std::vector<int> head_dims = {64, 128};
  std::vector<int> causal = {0, 1};
  bool prefill = true;
  bool decode = true;
  bool reference = false;     // instead: the reference's cost per output row against a double loop
  double max_seconds = 2.0;   // skip a cell whose estimate exceeds this (the loop kernel at 16k)
  double min_time = 0.2;      // repeat a measurement until this much time was spent
  std::string json_path;
  std::string svg_path;
};

int run_bench(const BenchRequest& request);

}  // namespace attest
