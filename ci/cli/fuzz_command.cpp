#include "fuzz_command.h"

#include <fmt/format.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <regex>
#include <vector>

#include "attest/properties/oracle.h"
#include "attest/properties/problem_file.h"
#include "fuzz_targets.h"
#include "replay_program.h"

namespace attest {
namespace {

namespace fs = std::filesystem;

// The repository root, found from this executable (build/<preset>/ci/attest), else the cwd.
fs::path repository_root() {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec && fs::exists(exe.parent_path() / "../../../corpus"))
    return fs::weakly_canonical(exe.parent_path() / "../../..");
  return fs::current_path();
}

// Runs a shell command, returning its exit status and its output (stdout, and stderr when
// merged; otherwise stderr passes through).
std::pair<int, std::string> run_captured(const std::string& command, bool merge_stderr) {
  std::string output;
  FILE* pipe = ::popen((merge_stderr ? command + " 2>&1" : command).c_str(), "r");
  if (!pipe) return {-1, "cannot run " + command};
  std::array<char, 4096> buf;
  while (std::size_t n = std::fread(buf.data(), 1, buf.size(), pipe)) output.append(buf.data(), n);
  const int status = ::pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), output};
}

// One shell word, whatever the path holds.
std::string shell_quoted(const std::string& word) {
  std::string out = "'";
  for (char c : word) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}
std::string shell_quoted(const fs::path& p) { return shell_quoted(p.string()); }

std::vector<char> read_bytes(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// `attest replay PROBLEM --kernel KERNEL` in a child process of this very executable: the
// finding counts only if a process that shares nothing with this one fails it again.
void replay_in_fresh_process(FuzzFinding& f) {
  const fs::path self = fs::read_symlink("/proc/self/exe");
  const std::string command =
      fmt::format("{} replay {} --kernel {}", shell_quoted(self), shell_quoted(f.problem_path), shell_quoted(f.kernel));
  const auto [status, output] = run_captured(command, false);
  f.replay_exit = status;
  std::smatch m;
  if (std::regex_search(output, m, std::regex(R"(: property (\S+) on (\S+) \()"))) {
    f.property = m[1].str();
    f.replay_kernel = m[2].str();
  }
  if (std::regex_search(output, m, std::regex(R"((^|\n)((FAIL|PASS)[^\n]*))"))) f.replay_verdict = m[2].str();
}

// The input's first violation with the requested kernels. A kernel that throws here (its
// guards overwritten, see run_guarded) is recorded as deterministic_and_in_bounds, as certify's
// fuzz stage does; the replay in a fresh process has the last word.
std::optional<fuzz::Violation> first_violation(fuzz::Target target, const std::vector<char>& bytes,
                                               const std::string& kernel_name) {
  const auto* data = reinterpret_cast<const std::uint8_t*>(bytes.data());
  Oracle oracle(32);
  for (const auto& kernel : fuzz::kernels_named(kernel_name)) {
    try {
      if (auto v = fuzz::run_target_on(target, data, bytes.size(), *kernel, oracle)) return v;
    } catch (const std::exception& e) {
      const Problem p =
          fuzz::decode_input(data, bytes.size(), fuzz::flavor_of(target), fuzz::reach_of(kernel->capabilities()))
              .problem;
      return fuzz::Violation{kernel->name(), Verdict::fail("deterministic_and_in_bounds", e.what(), INFINITY), p};
    }
  }
  return std::nullopt;
}

// Decodes one crash input left by libFuzzer with the requested kernels, saves the violated
// problem and replays it in a fresh process. Timeouts and out-of-memory inputs are only
// reported: decoding them here could hang or exhaust this process.
FuzzFinding examine(const fs::path& input, fuzz::Target target, const FuzzRequest& request, const fs::path& work) {
  FuzzFinding f{input.string(), request.kernel};
  if (!input.filename().string().starts_with("crash-")) return f;
  const std::optional<fuzz::Violation> v = first_violation(target, read_bytes(input), request.kernel);
  if (!v) return f;
  if (f.kernel.empty()) f.kernel = v->kernel;  // every built-in kernel ran: replay the one that failed
  f.problem_path = (work / (input.filename().string() + ".json")).string();
  save_problem_file(f.problem_path, {v->problem, v->verdict.property, f.kernel, false, v->verdict.detail, 0});
  std::cout << fmt::format("  {} on {}: {}\n  counterexample: {}\n", v->verdict.property, v->kernel, v->verdict.detail,
                           f.problem_path);
  replay_in_fresh_process(f);
  return f;
}

void print_outcome(const FuzzFinding& f) {
  if (f.problem_path.empty()) {
    std::cout << "  not counted: no property violation when decoded here (a sanitizer, timeout or memory"
              << " finding; replay the input with the fuzz binary)\n";
    return;
  }
  std::cout << fmt::format("  replayed in a fresh process ({} replay {} --kernel {}): exit {}, {}\n  {}\n",
                           replay_program(), shell_word(f.problem_path), shell_word(f.kernel), f.replay_exit,
                           f.replay_verdict.empty() ? "no verdict" : f.replay_verdict,
                           f.counted() ? "counted: the replay fails" : "not counted: the replay does not fail");
}

}  // namespace

FuzzOutcome fuzz_and_replay(const FuzzRequest& request) {
  const std::optional<fuzz::Target> target = fuzz::target_from_name(request.target);
  if (!target) {
    std::string known;
    for (const fuzz::TargetInfo& t : fuzz::target_table()) known += std::string(known.empty() ? "" : ", ") + t.name;
    std::cerr << "attest: unknown fuzz target '" << request.target << "' (" << known << ")\n";
    return {2};
  }
  const fs::path root = repository_root();
  const fs::path build = request.build_dir.empty() ? root / "build/fuzz" : fs::path(request.build_dir);
  const fs::path binary = build / "fuzz" / request.target;
  if (!fs::exists(binary)) {
    std::cerr << "attest: " << binary.string() << " not found: the fuzz preset is not built "
              << "(cmake --preset fuzz && cmake --build --preset fuzz --target fuzz_all)\n";
    return {2};
  }
  const fs::path seeds = (request.corpus_dir.empty() ? root / "corpus" : fs::path(request.corpus_dir)) / request.target;
  const fs::path work = fs::path(request.out_dir) / "fuzz" / request.target;
  fs::create_directories(work / "corpus");
  fs::create_directories(work / "artifacts");

  // The kernel reaches the fuzzer (a fresh process) by its environment only; new inputs go to
  // the work corpus, the repository's seeds are read only.
  const std::string command =
      fmt::format("ATTEST_FUZZ_KERNEL={} {} -max_total_time={} -print_final_stats=1 -artifact_prefix={}/ {} {}",
                  shell_quoted(request.kernel), shell_quoted(binary), request.seconds, shell_quoted(work / "artifacts"),
                  shell_quoted(work / "corpus"), fs::exists(seeds) ? shell_quoted(seeds) : "");
  std::cerr << fmt::format("attest fuzz: {} for {} s on {}\n", request.target, request.seconds,
                           request.kernel.empty() ? "every built-in kernel" : request.kernel);
  const auto [status, output] = run_captured(command, true);

  std::smatch m;
  const std::string runs =
      std::regex_search(output, m, std::regex(R"(stat::number_of_executed_units:\s*(\d+))")) ? m[1].str() : "?";
  const std::string speed =
      std::regex_search(output, m, std::regex(R"(stat::average_exec_per_sec:\s*(\d+))")) ? m[1].str() : "?";
  std::cout << fmt::format("{}: {} executions, {} exec/s\n", request.target, runs, speed);

  FuzzOutcome outcome;
  std::vector<fs::path> inputs;
  for (const auto& entry : fs::directory_iterator(work / "artifacts")) {
    const std::string name = entry.path().filename().string();
    if (name.starts_with("crash-") || name.starts_with("timeout-") || name.starts_with("oom-"))
      inputs.push_back(entry.path());
  }
  std::sort(inputs.begin(), inputs.end());
  for (const fs::path& input : inputs) {
    std::cout << fmt::format("FINDING {}: input {}\n", request.target, input.string());
    outcome.findings.push_back(examine(input, *target, request, work));
    print_outcome(outcome.findings.back());
  }
  if (inputs.empty() && status != 0) {
    std::cerr << output << "\nattest: the fuzzer exited with status " << status << " and left no input\n";
    outcome.status = 2;
  } else if (!inputs.empty()) {
    const bool counted =
        std::any_of(outcome.findings.begin(), outcome.findings.end(), [](const FuzzFinding& f) { return f.counted(); });
    outcome.status = counted ? 1 : 3;
  }
  return outcome;
}

int run_fuzz(const FuzzRequest& request) { return fuzz_and_replay(request).status; }

int list_fuzz_targets() {
  for (const fuzz::TargetInfo& t : fuzz::target_table()) std::cout << t.name << " " << t.mutant << "\n";
  return 0;
}

}  // namespace attest
