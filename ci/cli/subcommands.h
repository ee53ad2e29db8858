// attest's subcommands as main registers them: each adds its options to the app and returns what
// runs it once parsed. Numbers arrive as text and are parsed strictly there (flags.h): finite, in
// range, whole; a bad one throws FlagError (exit 2).
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <string>

#include "flags.h"

namespace attest {

struct Subcommand {
  CLI::App* command;
  std::function<int()> run;  // called when `command` was the one given
};

// The certificate's commands (certificate_subcommands.cpp).
Subcommand add_certify(CLI::App& app);
Subcommand add_merge(CLI::App& app);
Subcommand add_report(CLI::App& app);
// The commands about kernels and attest itself (tool_subcommands.cpp).
Subcommand add_fuzz(CLI::App& app);
Subcommand add_mutants(CLI::App& app);
Subcommand add_bench(CLI::App& app);
Subcommand add_kernel_host(CLI::App& app);
Subcommand add_replay(CLI::App& app);
Subcommand add_calibrate(CLI::App& app);
Subcommand add_selfcheck(CLI::App& app);

// --seed: empty (from the clock) is 0.
inline std::uint64_t seed_of_flag(const std::string& text) { return text.empty() ? 0 : parse_seed("--seed", text); }
// --memory-limit: empty is half of this machine's.
inline std::size_t memory_of_flag(const std::string& text) {
  return text.empty() ? default_memory_limit() : parse_bytes("--memory-limit", text);
}

}  // namespace attest
