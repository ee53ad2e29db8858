#include "fuzz_command.h"

#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdlib>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <iostream>
#include <iterator>
#include <regex>

#include "attest/oracle.h"
#include "attest/problem_file.h"
#include "fuzz_targets.h"

namespace attest {
namespace {

namespace fs = std::filesystem;

// The repository root, found from this executable (build/<preset>/ci/attest), else the cwd.
fs::path repository_root() {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec && fs::exists(exe.parent_path() / "../../../corpus")) return fs::weakly_canonical(exe.parent_path() / "../../..");
  return fs::current_path();
}

// Runs a command, returning its exit status and its combined output.
std::pair<int, std::string> run_captured(const std::string& command) {
  std::string output;
  FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
  if (!pipe) return {-1, "cannot run " + command};
  std::array<char, 4096> buf;
  while (std::size_t n = std::fread(buf.data(), 1, buf.size(), pipe)) output.append(buf.data(), n);
  const int status = ::pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), output};
}

std::string quoted(const fs::path& p) { return fmt::format("'{}'", p.string()); }

}  // namespace

int run_fuzz(const FuzzRequest& request) {
  const std::optional<fuzz::Target> target = fuzz::target_from_name(request.target);
  if (!target) {
    std::cerr << "attest: unknown fuzz target '" << request.target
              << "' (fuzz_mask_leak, fuzz_overflow, fuzz_decode, fuzz_differential)\n";
    return 2;
  }
  const fs::path root = repository_root();
  const fs::path build = request.build_dir.empty() ? root / "build/fuzz" : fs::path(request.build_dir);
  const fs::path binary = build / "fuzz" / request.target;
  if (!fs::exists(binary)) {
    std::cerr << "attest: " << binary.string() << " not found: the fuzz preset is not built "
              << "(cmake --preset fuzz && cmake --build --preset fuzz --target fuzz_all)\n";
    return 2;
  }
  const fs::path seeds = (request.corpus_dir.empty() ? root / "corpus" : fs::path(request.corpus_dir)) / request.target;
  const fs::path work = fs::path(request.out_dir) / "fuzz" / request.target;
  fs::create_directories(work / "corpus");
  fs::create_directories(work / "artifacts");
  if (!request.kernel.empty()) ::setenv("ATTEST_FUZZ_KERNEL", request.kernel.c_str(), 1);

  // New inputs go to the work corpus; the repository's seeds are read only.
  const std::string command =
      fmt::format("{} -max_total_time={} -print_final_stats=1 -artifact_prefix={}/ {} {}", quoted(binary),
                  request.seconds, quoted(work / "artifacts"), quoted(work / "corpus"),
                  fs::exists(seeds) ? quoted(seeds) : "");
  std::cerr << fmt::format("attest fuzz: {} for {} s on {}\n", request.target, request.seconds,
                           request.kernel.empty() ? "every built-in kernel" : request.kernel);
  const auto [status, output] = run_captured(command);

  std::smatch m;
  const std::string runs = std::regex_search(output, m, std::regex(R"(stat::number_of_executed_units:\s*(\d+))")) ? m[1].str() : "?";
  const std::string speed = std::regex_search(output, m, std::regex(R"(stat::average_exec_per_sec:\s*(\d+))")) ? m[1].str() : "?";
  std::cout << fmt::format("{}: {} executions, {} exec/s\n", request.target, runs, speed);

  int failures = 0;
  for (const auto& entry : fs::directory_iterator(work / "artifacts")) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("crash-", 0) && name.rfind("timeout-", 0) && name.rfind("oom-", 0)) continue;
    ++failures;
    std::ifstream in(entry.path(), std::ios::binary);
    const std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const auto* data = reinterpret_cast<const std::uint8_t*>(bytes.data());
    Oracle oracle(32);
    const std::optional<fuzz::Violation> v =
        fuzz::run_target(*target, data, bytes.size(), fuzz::kernels_named(request.kernel), oracle);
    std::cout << fmt::format("FAIL {}: input {}\n", request.target, entry.path().string());
    if (!v) {
      std::cout << "  (no property violation when replayed in this process: a sanitizer or timeout finding;"
                << " replay the input with the fuzz binary)\n";
      continue;
    }
    const fs::path problem = work / (name + ".json");
    save_problem_file(problem.string(), {v->problem, v->verdict.property,
                                         request.kernel.empty() ? v->kernel : request.kernel, false,
                                         v->verdict.detail, 0});
    std::cout << fmt::format("  {} on {}: {}\n  counterexample: {}  (attest replay {})\n", v->verdict.property,
                             v->kernel, v->verdict.detail, problem.string(), problem.string());
  }
  if (failures == 0 && status != 0) {
    std::cerr << output << "\nattest: the fuzzer exited with status " << status << " and left no input\n";
    return 2;
  }
  return failures ? 1 : 0;
}

}  // namespace attest
