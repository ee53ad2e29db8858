// The `attest` command line. Exit codes: 0 certified / passed, 1 a check failed,
// 2 usage, load or input error. Each subcommand's options and run are in subcommands.h.
#include <CLI/CLI.hpp>
#include <csignal>
#include <cstdlib>
#include <exception>
#include <iostream>
#include <vector>

#include "invoked_program.h"
#include "replay_program.h"
#include "subcommands.h"

namespace {

int run(int argc, char** argv) {
  using namespace attest;
  // A write past the file-size limit (ulimit -f) then fails with EFBIG, and the atomic write
  // removes its temporary file and reports it, instead of the signal killing attest mid-write.
  std::signal(SIGXFSZ, SIG_IGN);
  // Printed replay commands start with the program as the user ran it, so they run as printed.
  const char* path_variable = std::getenv("PATH");
  set_replay_program(invoked_program(argc > 0 ? argv[0] : "", path_variable ? path_variable : "", "/proc/self/exe"));
  CLI::App app{"attest: certify attention kernels against exact attention"};
  app.require_subcommand(1);
  // In the order `attest --help` lists them.
  const std::vector<Subcommand> subcommands = {
      add_certify(app), add_merge(app),       add_report(app), add_fuzz(app),      add_mutants(app),
      add_bench(app),   add_kernel_host(app), add_replay(app), add_calibrate(app), add_selfcheck(app)};

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  try {
    for (const Subcommand& s : subcommands)
      if (*s.command) return s.run();
  } catch (const CLI::ValidationError& e) {
    std::cerr << "attest: " << e.what() << "\n";
    return 2;
  } catch (const std::bad_alloc&) {
    std::cerr << "attest: out of memory: attest could not allocate what this run needs (a ulimit or the machine's "
                 "memory; --max-len or a narrower contract make smaller problems)\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "attest: " << e.what() << "\n";
    return 2;
  }
  return 0;
}

}  // namespace

// What escapes the subcommands' own handlers (a setup's allocation) is an error, exit 2, not an abort.
int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "attest: " << e.what() << "\n";
  } catch (...) {
    std::cerr << "attest: an unknown exception\n";
  }
  return 2;
}
