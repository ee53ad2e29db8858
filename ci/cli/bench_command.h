// `attest bench`: kernel speed and memory by sequence length, side by side in one run.
// Each cell is timed over repeated calls and reported as the median with its spread (the
// interquartile range; min and max in the JSON). A plugin runs in a child process, as certify
// runs it (each call crosses the protocol, its buffers between guard pages), unless in_process.
#pragma once

#include <string>
#include <vector>

namespace attest {

struct BenchRequest {
  std::vector<std::string> kernels;  // default: every built-in kernel and baseline:blas
  std::vector<int> lengths = {128, 256, 512, 1024, 2048, 4096, 8192, 16384};
  std::vector<int> head_dims = {64, 128};
  std::vector<int> causal = {0, 1};
  int batch = 1;  // B
  int heads = 1;  // H = Hkv
  bool prefill = true;
  bool decode = true;
  bool reference = false;    // instead: the reference's cost per output row against a double loop
  bool in_process = false;   // load plugins into attest and call them directly (no child, no guard pages)
  double max_seconds = 2.0;  // skip a cell whose estimate exceeds this (the loop kernel at 16k)
  double min_time = 0.2;     // repeat a measurement until this much time was spent ...
  int repetitions = 5;       // ... and at least this many calls were timed
  std::string json_path;
  std::string svg_path;
};

// Throws (exit 2 from main) for a request it cannot run: inputs too large, an unwritable output
// path, a kernel it cannot load.
int run_bench(const BenchRequest& request);

}  // namespace attest
