#include "bench_command.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>
#include <tuple>

#include "attest/properties/cases.h"
#include "attest/properties/file_io.h"
#include "attest/properties/safe_text.h"
#include "attest/properties/session_forward.h"
#include "attest/reference/reference.h"
#include "blas_baseline.h"
#include "kernel_resolver.h"
#include "memory_meter.h"
#include "plugin_library.h"
#include "process_kernel.h"

namespace attest {
namespace {

using Clock = std::chrono::steady_clock;

// Seconds of each timed call, and their summary: the median, the quartiles (linear
// interpolation between order statistics), min and max.
struct Timing {
  int calls = 0;
  double median = 0, q1 = 0, q3 = 0, min = 0, max = 0;
};

Timing summarize(std::vector<double> seconds) {
  std::sort(seconds.begin(), seconds.end());
  auto quantile = [&](double f) {
    const double at = f * double(seconds.size() - 1);
    const std::size_t i = std::size_t(at);
    const double frac = at - double(i);
    return i + 1 < seconds.size() ? seconds[i] + frac * (seconds[i + 1] - seconds[i]) : seconds[i];
  };
  return {int(seconds.size()), quantile(0.5), quantile(0.25), quantile(0.75), seconds.front(), seconds.back()};
}

// Each call timed on its own, until at least `repetitions` calls and `min_time` seconds.
template <typename F>
Timing time_calls(F&& call, double min_time, int repetitions) {
  std::vector<double> seconds;
  seconds.reserve(std::size_t(std::max(repetitions, 16)));
  double spent = 0;
  do {
    const auto t0 = Clock::now();
    call();
    const double dt = std::chrono::duration<double>(Clock::now() - t0).count();
    seconds.push_back(dt);
    spent += dt;
  } while (spent < min_time || int(seconds.size()) < repetitions);
  return summarize(std::move(seconds));
}

struct Row {
  std::string kernel, runs, mode;  // runs: "in-process" or "child-process"
  int head_dim = 0, length = 0;
  bool causal = false;
  Timing time;        // one prefill, or one decode step
  double gflops = 0;  // attention FLOPs (4 B H Tq Tk D, halved when causal; x 2.5 backward) per median second
  std::optional<std::size_t> peak_extra;  // heap bytes beyond inputs and outputs (not for plugins)
  std::size_t kv_cache = 0;               // decode: bytes of the KV cache
};

// Where a kernel runs, and whether attest's memory meter sees its allocations (operator new in
// this process: not a child's, nor a C plugin's malloc).
bool in_child(const Kernel& kernel) { return dynamic_cast<const ProcessKernel*>(&kernel) != nullptr; }
bool metered(const Kernel& kernel) { return !in_child(kernel) && !dynamic_cast<const InProcessPlugin*>(&kernel); }

double flops(const Shape& s, bool causal) {
  return 4.0 * s.batch * s.heads * s.q_len * s.k_len * s.head_dim * (causal ? 0.5 : 1.0);
}

// The benchmark problem (B, H = Hkv heads, Dv = Dk, random values) with its inputs in the
// kernel's storage formats, as certify sends them (a bf16 kernel is timed on bf16 values, not on
// f32 values outside its declaration).
Problem bench_problem(const Kernel& kernel, const BenchRequest& request, int tq, int tk, int d, bool causal) {
  Problem p;
  p.shape = {request.batch, request.heads, request.heads, tq, tk, d, d};
  p.mask.causal = causal;
  p.resize_buffers();
  fill_random(p, 1);
  const Precision precision = kernel.capabilities().precision;
  for (auto [values, stored, format] :
       {std::tuple{&p.q, &p.storage.q, precision.q}, std::tuple{&p.k, &p.storage.k, precision.k},
        std::tuple{&p.v, &p.storage.v, precision.v}}) {
    for (float& x : *values) x = round_to(x, format);
    *stored = format;
  }
  return p;
}

// One forward call as it is timed: an in-process plugin's C function alone, on a problem
// converted to the ABI's form beforehand; otherwise the kernel's forward (for a kernel in a
// child process that includes the protocol round trip and the guard pages, as in certify).
std::function<void()> timed_forward(const Kernel& kernel, const Problem& p, std::vector<float>& o,
                                    std::vector<float>& lse) {
  if (const auto* plugin = dynamic_cast<const InProcessPlugin*>(&kernel)) {
    auto call = std::make_shared<InProcessPlugin::Prepared>(plugin->prepare(p));
    return [call] { (*call)(); };
  }
  return [&kernel, &p, &o, &lse] { kernel.forward(p, o, lse); };
}

// The interquartile range in % of the median.
double spread_percent(const Timing& t) { return t.median > 0 ? (t.q3 - t.q1) / t.median * 100 : 0; }

// Inputs larger than this (elements of Q, K or V) are refused before anything runs.
constexpr long long kMaxElements = (1LL << 31) - 1;

Row row_of(const Kernel& kernel, const char* mode, int d, int t, bool causal) {
  return Row{kernel.name(), in_child(kernel) ? "child-process" : "in-process", mode, d, t, causal};
}

// Why the kernel's declaration excludes the problem (the cell is skipped), or empty.
std::string refusal(const Kernel& kernel, const Problem& p) { return kernel.capabilities().unsupported_because(p); }

std::optional<Row> prefill(const Kernel& kernel, const BenchRequest& request, int t, int d, bool causal,
                           std::string& skipped) {
  const Problem p = bench_problem(kernel, request, t, t, d, causal);
  if (!(skipped = refusal(kernel, p)).empty()) return std::nullopt;
  std::vector<float> o(p.o_size()), lse(p.lse_size());
  Row r = row_of(kernel, "prefill", d, t, causal);
  memory_meter::start();
  kernel.forward(p, o, lse);
  if (metered(kernel)) r.peak_extra = memory_meter::peak_extra();
  r.time = time_calls(timed_forward(kernel, p, o, lse), request.min_time, request.repetitions);
  r.gflops = flops(p.shape, causal) / r.time.median * 1e-9;
  return r;
}

// One backward at the prefill's shape, for a kernel that declares one: O and LSE from its own
// forward, dO random. Counted as 2.5 forwards' FLOPs (the FlashAttention-2 convention: five
// matrix products where the forward has two).
std::optional<Row> backward(const Kernel& kernel, const BenchRequest& request, int t, int d, bool causal,
                            std::string& skipped) {
  Problem p = bench_problem(kernel, request, t, t, d, causal);
  if (!(skipped = refusal(kernel, p)).empty()) return std::nullopt;
  std::vector<float> o(p.o_size()), lse(p.lse_size()), d_o(p.o_size(), 0.25f);
  kernel.forward(p, o, lse);
  std::vector<float> dq(p.q_size()), dk(p.k_size()), dv(p.v_size()), dsinks;
  const BackwardInputs in{o, lse, d_o};
  const GradientSpans out{dq, dk, dv, dsinks};
  Row r = row_of(kernel, "backward", d, t, causal);
  memory_meter::start();
  kernel.backward(p, in, out);
  if (metered(kernel)) r.peak_extra = memory_meter::peak_extra();
  r.time = time_calls([&] { kernel.backward(p, in, out); }, request.min_time, request.repetitions);
  r.gflops = 2.5 * flops(p.shape, causal) / r.time.median * 1e-9;
  return r;
}

// One new token against a cache of t: the decode kernel's session, or a one-query forward.
std::optional<Row> decode_step(const Kernel& kernel, const BenchRequest& request, int t, int d, std::string& skipped) {
  const int b = request.batch, h = request.heads;
  Row r = row_of(kernel, "decode", d, t, true);
  if (kernel.capabilities().decode()) {
    const Problem p = bench_problem(kernel, request, t, t, d, true);
    DecodeConfig config = session_config_of(p);
    config.mask = {};
    config.scale = 1.0 / std::sqrt(double(d));
    auto session = kernel.open_decode(config);
    std::vector<float> o(p.o_size()), lse(p.lse_size());
    session->step(t, p.q, p.k, p.v, o, lse);
    // 32 steps right after the prefill: the cache stays within 32 tokens of t.
    const std::size_t rows = std::size_t(b) * h;
    std::vector<float> q(rows * d, 0.1f), k(rows * d, 0.2f), v(rows * d, 0.3f), o1(rows * d), lse1(rows);
    std::vector<double> steps;
    steps.reserve(32);
    r.kv_cache = session->cache_bytes();
    memory_meter::start();
    for (int n = 0; n < 32; ++n) {
      const auto t0 = Clock::now();
      session->step(1, q, k, v, o1, lse1);
      steps.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
    }
    if (metered(kernel)) r.peak_extra = memory_meter::peak_extra();
    r.time = summarize(std::move(steps));
  } else {
    const Problem one = bench_problem(kernel, request, 1, t, d, true);
    if (!(skipped = refusal(kernel, one)).empty()) return std::nullopt;
    std::vector<float> o(one.o_size()), lse(one.lse_size());
    memory_meter::start();
    kernel.forward(one, o, lse);
    if (metered(kernel)) r.peak_extra = memory_meter::peak_extra();
    r.time = time_calls(timed_forward(kernel, one, o, lse), request.min_time, request.repetitions);
    const Precision precision = kernel.capabilities().precision;  // the K and V it was given
    r.kv_cache = std::size_t(b) * h * t * d * (info(precision.k).bytes + info(precision.v).bytes);
  }
  r.gflops = flops({b, h, h, 1, t, d, d}, false) / r.time.median * 1e-9;
  return r;
}

// The cache's bytes per cached token of one sequence (all heads, K and V): what a serving engine
// budgets memory by. A decode step produces one token per sequence, so tokens/s is B / its time.
double kv_bytes_per_token(const Row& r, const BenchRequest& request) {
  return double(r.kv_cache) / (double(request.batch) * r.length);
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
    auto x_of = [&](double t) {
      return x0 + (std::log2(t) - std::log2(min_t)) / std::max(1.0, std::log2(max_t / min_t)) * (panel - 80);
    };
    auto y_of = [&](double g) { return y0 - g / max_gflops * plot_h; };
    svg += fmt::format("<text x=\"{}\" y=\"{}\">prefill, Dk = {}, {}</text>\n", x0, top - 10, head_dim,
                       c ? "causal" : "no mask");
    svg +=
        fmt::format("<line x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\" stroke=\"black\"/>\n", x0, y0, x0 + panel - 80);
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
      svg += fmt::format("<polyline fill=\"none\" stroke=\"{}\" stroke-width=\"2\" points=\"{}\"/>\n", colors[k % 6],
                         points);
      if (c == 1)
        svg += fmt::format("<text x=\"{}\" y=\"{}\" fill=\"{}\">{}</text>\n", x0 + panel - 70, top + 15 * (k + 1),
                           colors[k % 6], kernels[k]);
    }
  }
  svg += fmt::format(
      "<text x=\"10\" y=\"{}\" transform=\"rotate(-90 10,{})\">GFLOP/s (4·Tq·Tk·D, half if causal)</text>\n",
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

int reference_cost(const BenchRequest& request) {
  const int t = 512, d = 64;
  const Problem p = benchmark_problem(t, t, d, false);
  std::vector<double> sink;
  const Timing loop = time_calls([&] { double_loop(p, sink); }, request.min_time, request.repetitions);
  const Timing fast = time_calls([&] { compute_reference_fast(p); }, request.min_time, request.repetitions);
  const Timing mpfr = time_calls([&] { compute_reference(p); }, request.min_time, request.repetitions);
  std::cout << fmt::format(
      "reference cost per output row, T = {}, Dk = Dv = {}, one head (median of n calls, IQR as "
      "% of the median):\n",
      t, d);
  for (auto [what, time] : {std::pair{"double loop", loop},
                            {"double-double, 100+ bits (the oracle)", fast},
                            {"MPFR 136 bits (the cross-check)", mpfr}})
    std::cout << fmt::format("  {:<40} {:9.3f} us {:7.1f}x  IQR {:4.1f}%  n = {}\n", what, time.median / t * 1e6,
                             time.median / loop.median, spread_percent(time), time.calls);
  return 0;
}

}  // namespace

int run_bench(const BenchRequest& request) {
  if (!request.json_path.empty()) check_writable("--json", request.json_path);
  if (!request.svg_path.empty()) check_writable("--svg", request.svg_path);
  if (request.reference) return reference_cost(request);
  const int widest = *std::max_element(request.head_dims.begin(), request.head_dims.end());
  const int longest = *std::max_element(request.lengths.begin(), request.lengths.end());
  const double elements = double(request.batch) * request.heads * longest * widest;
  if (elements > double(kMaxElements))
    throw std::invalid_argument(
        fmt::format("bench: --batch x --heads x T x Dk = {} x {} x {} x {} = {:.0f} elements per input, more than {}",
                    request.batch, request.heads, longest, widest, elements, kMaxElements));
  set_blas_threads(1);
  std::vector<std::string> names = request.kernels;
  if (names.empty()) {
    for (const KernelEntry& e : kernel_registry()) names.push_back(e.name);
    names.push_back("baseline:blas");
  }
  LoadOptions load;
  load.plugin_in_process = request.in_process;
  std::vector<std::unique_ptr<Kernel>> kernels;
  std::size_t name_width = 6;
  for (const std::string& n : names) {
    kernels.push_back(resolve_kernel(n, load));
    name_width = std::max(name_width, kernels.back()->name().size());
  }

  std::cout << fmt::format("attest bench: 1 thread, {} hardware threads, B = {}, H = Hkv = {}, Dv = Dk\n",
                           std::thread::hardware_concurrency(), request.batch, request.heads);
  std::cout << fmt::format(
      "time per call: the median of n calls (at least {} and {} s; decode sessions: 32 steps); "
      "spread: the interquartile range (25th to 75th percentile) in % of the median\n",
      request.repetitions, request.min_time);
  std::cout << (request.in_process
                    ? "plugins: in process (--in-process): loaded into attest and called directly through the C ABI, "
                      "no child process, protocol or guard pages (a crash is attest's)\n"
                    : "plugins: in a child process, as certify runs them: each call crosses the process protocol, "
                      "its buffers between guard pages (--in-process calls them directly)\n");
  std::cout << "peak extra: operator new in attest's process during one call (not measured for plugins or process "
               "kernels)\n";
  const std::string row_format = fmt::format("{{:<{}}} {{:<7}} {{:<8}} {{:>4}} {{:>6}} {{:>6}} ", name_width);
  std::cout << fmt::format(fmt::runtime(row_format), "kernel", "runs", "mode", "Dk", "causal", "T")
            << fmt::format("{:>12} {:>6} {:>7} {:>9} {:>12} {:>11} {:>9} {:>9}\n", "median s", "IQR %", "n", "GFLOP/s",
                           "peak extra", "KV bytes", "KV B/tok", "tokens/s");
  std::vector<Row> rows;
  std::map<std::string, std::pair<int, double>> last;  // kernel/mode/config -> (T, median seconds)
  auto report = [&](const Row& r) {
    rows.push_back(r);
    std::cout << fmt::format(fmt::runtime(row_format), r.kernel, r.runs == "child-process" ? "child" : "in-proc",
                             r.mode, r.head_dim, r.causal ? "yes" : "no", r.length)
              << fmt::format("{:>12.6f} {:>6.1f} {:>7} {:>9.2f} {:>12} {:>11} {:>9} {:>9}\n", r.time.median,
                             spread_percent(r.time), r.time.calls, r.gflops,
                             r.peak_extra ? human_bytes(double(*r.peak_extra)) : "-",
                             r.kv_cache ? human_bytes(double(r.kv_cache)) : "-",
                             r.kv_cache ? fmt::format("{:.1f}", kv_bytes_per_token(r, request)) : "-",
                             r.mode == "decode" ? fmt::format("{:.0f}", request.batch / r.time.median) : "-");
    std::cout.flush();
  };
  auto skip = [&](const Kernel& kernel, const char* mode, int d, bool causal, int t, const std::string& why) {
    std::cout << fmt::format(fmt::runtime(row_format), kernel.name(), in_child(kernel) ? "child" : "in-proc", mode, d,
                             causal ? "yes" : "no", t)
              << " skipped: " << why << "\n";
  };
  // Skip a cell when doubling T from the last measured one would take longer than max_seconds.
  auto too_slow = [&](const std::string& key, int t, double power) {
    const auto it = last.find(key);
    return it != last.end() && it->second.second * std::pow(double(t) / it->second.first, power) > request.max_seconds;
  };
  // A cell the kernel refuses (outside its contract, or failing) is skipped with the reason.
  auto measure = [&](const Kernel& kernel, const char* mode, int d, bool causal, int t, const std::string& key,
                     auto&& run) {
    std::string why;
    std::optional<Row> r;
    try {
      r = run(why);
    } catch (const std::exception& e) {
      why = safe_text(e.what(), 300);
    }
    if (!r) return skip(kernel, mode, d, causal, t, why);
    last[key] = {t, r->time.median};
    report(*r);
  };
  for (int d : request.head_dims)
    for (const auto& kernel : kernels) {
      if (request.prefill)
        for (int causal : request.causal)
          for (int t : request.lengths) {
            const std::string key = fmt::format("{}/p/{}/{}", kernel->name(), d, causal);
            if (too_slow(key, t, 2.0)) continue;
            measure(*kernel, "prefill", d, causal, t, key,
                    [&](std::string& why) { return prefill(*kernel, request, t, d, causal, why); });
            const std::string backward_key = fmt::format("{}/b/{}/{}", kernel->name(), d, causal);
            if (!kernel->capabilities().backward() || too_slow(backward_key, t, 2.0)) continue;
            measure(*kernel, "backward", d, causal, t, backward_key,
                    [&](std::string& why) { return backward(*kernel, request, t, d, causal, why); });
          }
      if (request.decode)
        for (int t : request.lengths) {
          const std::string key = fmt::format("{}/d/{}", kernel->name(), d);
          if (too_slow(key, t, 1.0)) continue;
          measure(*kernel, "decode", d, true, t, key,
                  [&](std::string& why) { return decode_step(*kernel, request, t, d, why); });
        }
    }

  if (!request.json_path.empty()) {
    nlohmann::json out = nlohmann::json::array();
    for (const Row& r : rows)
      out.push_back({{"kernel", r.kernel},
                     {"runs", r.runs},
                     {"mode", r.mode},
                     {"head_dim", r.head_dim},
                     {"causal", r.causal},
                     {"length", r.length},
                     {"median_seconds", r.time.median},
                     {"q1_seconds", r.time.q1},
                     {"q3_seconds", r.time.q3},
                     {"min_seconds", r.time.min},
                     {"max_seconds", r.time.max},
                     {"calls", r.time.calls},
                     {"gflops", r.gflops},
                     {"peak_extra_bytes", r.peak_extra ? nlohmann::json(*r.peak_extra) : nlohmann::json(nullptr)},
                     {"kv_cache_bytes", r.kv_cache},
                     {"kv_bytes_per_token",
                      r.kv_cache ? nlohmann::json(kv_bytes_per_token(r, request)) : nlohmann::json(nullptr)},
                     {"tokens_per_second",
                      r.mode == "decode" ? nlohmann::json(request.batch / r.time.median) : nlohmann::json(nullptr)}});
    const nlohmann::json doc{{"format", "attest-bench"},
                             {"version", 2},
                             {"threads", 1},
                             {"batch", request.batch},
                             {"heads", request.heads},
                             {"kv_heads", request.heads},
                             {"plugins", request.in_process ? "in-process" : "child-process"},
                             {"statistic", "median of calls; q1/q3 the quartiles (linear interpolation)"},
                             {"rows", out}};
    write_file_atomically(request.json_path, doc.dump(2) + "\n");
  }
  if (!request.svg_path.empty()) write_file_atomically(request.svg_path, svg_plot(rows, request.head_dims.front()));
  return 0;
}

}  // namespace attest
