#include "bench_command.h"

#include <algorithm>
#include <chrono>
#include <fmt/format.h>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <thread>
#include <tuple>

#include "attest/cases.h"
#include "attest/reference.h"
#include "blas_baseline.h"
#include "kernel_resolver.h"
#include "memory_meter.h"

namespace attest {
namespace {

using Clock = std::chrono::steady_clock;

struct Row {
  std::string kernel, mode;
  int head_dim = 0, length = 0;
  bool causal = false;
  double seconds = 0;            // best of the repetitions: one prefill, or one decode step
  double gflops = 0;             // attention FLOPs (4 Tq Tk D, halved when causal) per second
  std::size_t peak_extra = 0;    // heap bytes beyond inputs and outputs
  std::size_t kv_cache = 0;      // decode: bytes of the KV cache
};


// Best time of repeated calls, at least once and until min_time has been spent.
template <typename F>
double best_time(F&& call, double min_time) {
  double best = 1e300, spent = 0;
  do {
    const auto t0 = Clock::now();
    call();
    const double dt = std::chrono::duration<double>(Clock::now() - t0).count();
    best = std::min(best, dt);
    spent += dt;
  } while (spent < min_time);
  return best;
}

double flops(int tq, int tk, int d, bool causal) { return 4.0 * tq * tk * d * (causal ? 0.5 : 1.0); }

// The benchmark problem with its inputs in the kernel's storage formats, as certify sends them
// (a bf16 kernel is timed on bf16 values, not on f32 values outside its declaration).
Problem stored_benchmark_problem(const Kernel& kernel, int tq, int tk, int d, bool causal) {
  Problem p = benchmark_problem(tq, tk, d, causal);
  const Precision precision = kernel.capabilities().precision;
  for (auto [values, stored, format] : {std::tuple{&p.q, &p.storage.q, precision.q},
                                        std::tuple{&p.k, &p.storage.k, precision.k},
                                        std::tuple{&p.v, &p.storage.v, precision.v}}) {
    for (float& x : *values) x = round_to(x, format);
    *stored = format;
  }
  return p;
}

Row prefill(const Kernel& kernel, int t, int d, bool causal, double min_time) {
  const Problem p = stored_benchmark_problem(kernel, t, t, d, causal);
  std::vector<float> o(p.o_size()), lse(p.lse_size());
  memory_meter::start();
  kernel.forward(p, o, lse);
  Row r{kernel.name(), "prefill", d, t, causal};
  r.peak_extra = memory_meter::peak_extra();
  r.seconds = best_time([&] { kernel.forward(p, o, lse); }, min_time);
  r.gflops = flops(t, t, d, causal) / r.seconds * 1e-9;
  return r;
}

// One new token against a cache of t: the decode kernel's session, or a one-query forward.
Row decode_step(const Kernel& kernel, int t, int d, double min_time) {
  Row r{kernel.name(), "decode", d, t, true};
  if (kernel.capabilities().decode()) {
    auto session = kernel.open_decode({.batch = 1, .heads = 1, .kv_heads = 1, .head_dim = d, .value_dim = d,
                                       .scale = 1.0 / std::sqrt(double(d))});
    const Problem p = benchmark_problem(t, t, d, true);
    std::vector<float> o(p.o_size()), lse(p.lse_size());
    session->step(t, p.q, p.k, p.v, o, lse);
    // 32 steps right after the prefill: the cache stays within 32 tokens of t. Median step.
    std::vector<float> q(d, 0.1f), k(d, 0.2f), v(d, 0.3f), o1(d), lse1(1);
    std::vector<double> steps;
    r.kv_cache = session->cache_bytes();
    memory_meter::start();
    for (int n = 0; n < 32; ++n) {
      const auto t0 = Clock::now();
      session->step(1, q, k, v, o1, lse1);
      steps.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
    }
    r.peak_extra = memory_meter::peak_extra();
    std::nth_element(steps.begin(), steps.begin() + 16, steps.end());
    r.seconds = steps[16];
    (void)min_time;
  } else {
    const Problem p = stored_benchmark_problem(kernel, 1, t, d, true);
    std::vector<float> o(p.o_size()), lse(p.lse_size());
    memory_meter::start();
    r.seconds = best_time([&] { kernel.forward(p, o, lse); }, min_time);
    r.peak_extra = memory_meter::peak_extra();
    r.kv_cache = 2 * std::size_t(t) * d * sizeof(float);  // the K and V it was given
  }
  r.gflops = flops(1, t, d, false) / r.seconds * 1e-9;
  return r;
}

std::string human_bytes(double b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB"};
  int u = 0;
  while (b >= 1024 && u < 3) b /= 1024, ++u;
  return fmt::format("{:.1f} {}", b, units[u]);
}

// Throughput against T, one line per kernel: one panel per causal setting, at the first width.
std::string svg_plot(const std::vector<Row>& rows, int head_dim) {
  const int width = 900, height = 380, panel = 420, left = 60, top = 30, plot_h = 280;
  static const char* colors[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b"};
  double max_gflops = 1, min_t = 1e9, max_t = 1;
  std::vector<std::string> kernels;
  for (const Row& r : rows) {
    if (r.mode != "prefill" || r.head_dim != head_dim) continue;
    max_gflops = std::max(max_gflops, r.gflops);
    min_t = std::min<double>(min_t, r.length);
    max_t = std::max<double>(max_t, r.length);
    if (std::find(kernels.begin(), kernels.end(), r.kernel) == kernels.end()) kernels.push_back(r.kernel);
  }
  std::string svg = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" font-family=\"sans-serif\" "
      "font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n",
      width, height);
  for (int c = 0; c < 2; ++c) {
    const int x0 = left + c * panel, y0 = top + plot_h;
    auto x_of = [&](double t) { return x0 + (std::log2(t) - std::log2(min_t)) / std::max(1.0, std::log2(max_t / min_t)) * (panel - 80); };
    auto y_of = [&](double g) { return y0 - g / max_gflops * plot_h; };
    svg += fmt::format("<text x=\"{}\" y=\"{}\">prefill, Dk = {}, {}</text>\n", x0, top - 10, head_dim,
                       c ? "causal" : "no mask");
    svg += fmt::format("<line x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\" stroke=\"black\"/>\n", x0, y0, x0 + panel - 80);
    svg += fmt::format("<line x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\" stroke=\"black\"/>\n", x0, y0, top);
    for (double t = min_t; t <= max_t; t *= 2)
      svg += fmt::format("<text x=\"{:.0f}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n", x_of(t), y0 + 15, t);
    for (int i = 0; i <= 4; ++i)
      svg += fmt::format("<text x=\"{}\" y=\"{:.0f}\" text-anchor=\"end\">{:.1f}</text>\n", x0 - 5,
                         y_of(max_gflops * i / 4) + 4, max_gflops * i / 4);
    svg += fmt::format("<text x=\"{}\" y=\"{}\">T (tokens)</text>\n", x0 + panel / 2 - 60, y0 + 32);
    for (std::size_t k = 0; k < kernels.size(); ++k) {
      std::string points;
      for (const Row& r : rows)
        if (r.mode == "prefill" && r.head_dim == head_dim && r.causal == (c == 1) && r.kernel == kernels[k])
          points += fmt::format("{:.1f},{:.1f} ", x_of(r.length), y_of(r.gflops));
      svg += fmt::format("<polyline fill=\"none\" stroke=\"{}\" stroke-width=\"2\" points=\"{}\"/>\n",
                         colors[k % 6], points);
      if (c == 1)
        svg += fmt::format("<text x=\"{}\" y=\"{}\" fill=\"{}\">{}</text>\n", x0 + panel - 70, top + 15 * (k + 1),
                           colors[k % 6], kernels[k]);
    }
  }
  svg += fmt::format("<text x=\"10\" y=\"{}\" transform=\"rotate(-90 10,{})\">GFLOP/s (4·Tq·Tk·D, half if causal)</text>\n",
                     top + plot_h, top + plot_h);
  return svg + "</svg>\n";
}

// Plain attention in double for one head: the yardstick of the reference's cost.
void double_loop(const Problem& p, std::vector<double>& out) {
  const int t = p.shape.k_len, d = p.shape.head_dim;
  const double scale = p.effective_scale();
  std::vector<double> w(t);
  out.assign(std::size_t(p.shape.q_len) * d, 0.0);
  for (int i = 0; i < p.shape.q_len; ++i) {
    double m = -INFINITY, sum = 0;
    for (int j = 0; j < t; ++j) {
      double s = 0;
      for (int k = 0; k < d; ++k) s += double(p.q[std::size_t(i) * d + k]) * p.k[std::size_t(j) * d + k];
      w[j] = s * scale;
      m = std::max(m, w[j]);
    }
    for (int j = 0; j < t; ++j) sum += w[j] = std::exp(w[j] - m);
    for (int j = 0; j < t; ++j)
      for (int k = 0; k < d; ++k) out[std::size_t(i) * d + k] += w[j] / sum * p.v[std::size_t(j) * d + k];
  }
}

int reference_cost(double min_time) {
  const int t = 512, d = 64;
  const Problem p = benchmark_problem(t, t, d, false);
  std::vector<double> sink;
  const double loop = best_time([&] { double_loop(p, sink); }, min_time);
  const double fast = best_time([&] { compute_reference_fast(p); }, min_time);
  const double mpfr = best_time([&] { compute_reference(p); }, min_time);
  std::cout << fmt::format("reference cost per output row, T = {}, Dk = Dv = {}, one head:\n", t, d);
  std::cout << fmt::format("  {:<40} {:9.3f} us {:7.1f}x\n", "double loop", loop / t * 1e6, 1.0);
  std::cout << fmt::format("  {:<40} {:9.3f} us {:7.1f}x\n", "double-double, 100+ bits (the oracle)", fast / t * 1e6,
                           fast / loop);
  std::cout << fmt::format("  {:<40} {:9.3f} us {:7.1f}x\n", "MPFR 136 bits (the cross-check)", mpfr / t * 1e6,
                           mpfr / loop);
  return 0;
}

}  // namespace

int run_bench(const BenchRequest& request) {
  if (request.reference) return reference_cost(request.min_time);
  set_blas_threads(1);
  std::vector<std::string> names = request.kernels;
  if (names.empty()) {
    for (const KernelEntry& e : kernel_registry()) names.push_back(e.name);
    names.push_back("baseline:blas");
  }
  std::vector<std::unique_ptr<Kernel>> kernels;
  for (const std::string& n : names) kernels.push_back(resolve_kernel(n));

  std::cout << fmt::format("attest bench: 1 thread, {} hardware threads, B = H = 1, Dv = Dk\n",
                           std::thread::hardware_concurrency());
  std::cout << fmt::format("{:<8} {:<8} {:>4} {:>6} {:>6} {:>12} {:>9} {:>12} {:>11}\n", "kernel", "mode", "Dk",
                           "causal", "T", "seconds", "GFLOP/s", "peak extra", "KV bytes");
  std::vector<Row> rows;
  std::map<std::string, std::pair<int, double>> last;  // kernel/mode/config -> (T, seconds)
  auto report = [&](const Row& r) {
    rows.push_back(r);
    std::cout << fmt::format("{:<8} {:<8} {:>4} {:>6} {:>6} {:>12.6f} {:>9.2f} {:>12} {:>11}\n", r.kernel, r.mode,
                             r.head_dim, r.causal ? "yes" : "no", r.length, r.seconds, r.gflops,
                             human_bytes(double(r.peak_extra)), r.kv_cache ? human_bytes(double(r.kv_cache)) : "-");
    std::cout.flush();
  };
  // Skip a cell when doubling T from the last measured one would take longer than max_seconds.
  auto too_slow = [&](const std::string& key, int t, double power) {
    const auto it = last.find(key);
    return it != last.end() && it->second.second * std::pow(double(t) / it->second.first, power) > request.max_seconds;
  };
  for (int d : request.head_dims)
    for (const auto& kernel : kernels) {
      if (request.prefill)
        for (int causal : request.causal)
          for (int t : request.lengths) {
            const std::string key = fmt::format("{}/p/{}/{}", kernel->name(), d, causal);
            if (too_slow(key, t, 2.0)) continue;
            const Row r = prefill(*kernel, t, d, causal, request.min_time);
            last[key] = {t, r.seconds};
            report(r);
          }
      if (request.decode)
        for (int t : request.lengths) {
          const std::string key = fmt::format("{}/d/{}", kernel->name(), d);
          if (too_slow(key, t, 1.0)) continue;
          const Row r = decode_step(*kernel, t, d, request.min_time);
          last[key] = {t, r.seconds};
          report(r);
        }
    }

  if (!request.json_path.empty()) {
    nlohmann::json out = nlohmann::json::array();
    for (const Row& r : rows)
      out.push_back({{"kernel", r.kernel}, {"mode", r.mode}, {"head_dim", r.head_dim}, {"causal", r.causal},
                     {"length", r.length}, {"seconds", r.seconds}, {"gflops", r.gflops},
                     {"peak_extra_bytes", r.peak_extra}, {"kv_cache_bytes", r.kv_cache}});
    std::ofstream(request.json_path) << nlohmann::json{{"format", "attest-bench"}, {"version", 1},
                                                      {"threads", 1}, {"rows", out}}.dump(2)
                                     << "\n";
  }
  if (!request.svg_path.empty()) std::ofstream(request.svg_path) << svg_plot(rows, request.head_dims.front());
  return 0;
}

}  // namespace attest
