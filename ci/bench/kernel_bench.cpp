// Google Benchmark targets for the kernels (attest bench covers the same ground with the
// OpenBLAS baseline, memory and a plot). Run: build/release/ci/bench/kernel_bench
#include <benchmark/benchmark.h>

#include "attest/kernels/kernel.h"
#include "attest/properties/cases.h"
#include "attest/properties/size_ladder.h"
#include "attest/reference/reference.h"

namespace attest {
namespace {

// args: sequence length, head width, causal
void prefill(benchmark::State& state, const std::string& name) {
  const auto kernel = make_kernel(name);
  const Problem p =
      benchmark_problem(int(state.range(0)), int(state.range(0)), int(state.range(1)), state.range(2) != 0);
  std::vector<float> o(p.o_size()), lse(p.lse_size());
  for (auto _ : state) {
    kernel->forward(p, o, lse);
    benchmark::DoNotOptimize(o.data());
  }
  const double flops = 4.0 * p.shape.q_len * p.shape.k_len * p.shape.head_dim * (state.range(2) ? 0.5 : 1.0);
  state.counters["GFLOP/s"] = benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

// One decode step against a cache of state.range(0) tokens.
void decode_step(benchmark::State& state) {
  const auto kernel = make_kernel("decode");
  const int t = int(state.range(0)), d = 64;
  auto session =
      kernel->open_decode({.batch = 1, .heads = 1, .kv_heads = 1, .head_dim = d, .value_dim = d, .scale = 0.125});
  const Problem p = benchmark_problem(t, t, d, true);
  std::vector<float> o(p.o_size()), lse(p.lse_size());
  session->step(t, p.q, p.k, p.v, o, lse);
  std::vector<float> q(d, 0.1f), k(d, 0.2f), v(d, 0.3f), o1(d), lse1(1);
  for (auto _ : state) session->step(1, q, k, v, o1, lse1);  // the cache grows by one per iteration
}

void reference_fast(benchmark::State& state) {
  const Problem p = benchmark_problem(int(state.range(0)), int(state.range(0)), 64, false);
  for (auto _ : state) benchmark::DoNotOptimize(compute_reference_fast(p));
}

// The long stage's reference: one head at T = state.range(0), Dk = 64, causal, on
// state.range(1) rows sampled as certify samples them (tile edges, first, last, random), on
// state.range(2) threads.
void reference_sampled_rows(benchmark::State& state) {
  const int t = int(state.range(0));
  const Problem p = benchmark_problem(t, t, 64, true);
  const auto tiled = make_kernel("tiled");
  const std::vector<int> rows = sample_rows(p, tiled->capabilities(), int(state.range(1)), 1);
  for (auto _ : state)
    benchmark::DoNotOptimize(compute_reference_fast(p, {.query_rows = rows, .jobs = int(state.range(2))}));
  state.counters["rows"] = double(rows.size());
}

void lengths(benchmark::internal::Benchmark* b) {
  for (int t : {128, 512, 2048})
    for (int causal : {0, 1}) b->Args({t, 64, causal});
}

BENCHMARK_CAPTURE(prefill, loop, std::string("loop"))->Apply(lengths)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(prefill, blocked, std::string("blocked"))->Apply(lengths)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(prefill, tiled, std::string("tiled"))->Apply(lengths)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(prefill, tiled_bf16, std::string("tiled_bf16"))->Apply(lengths)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(prefill, decode, std::string("decode"))->Apply(lengths)->Unit(benchmark::kMillisecond);
BENCHMARK(decode_step)->Arg(1024)->Arg(4096)->Arg(16384)->Unit(benchmark::kMicrosecond);
BENCHMARK(reference_fast)->Arg(128)->Arg(512)->Unit(benchmark::kMillisecond);
BENCHMARK(reference_sampled_rows)->Args({32768, 64, 1})->Args({32768, 64, 2})->Unit(benchmark::kSecond)->UseRealTime();

}  // namespace
}  // namespace attest

BENCHMARK_MAIN();
