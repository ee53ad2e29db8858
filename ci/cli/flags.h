// Strict parsing of the command line's numbers (those of a certification's own options are in
// run_flags.h, and default_memory_limit in containment.h): the whole text must be the number (no
// trailing garbage), finite, and in range; otherwise FlagError names the flag (exit 2).
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "containment.h"
#include "run_flags.h"  // FlagError, parse_integer, parse_budget, seed_or_clock, sized_flags

namespace attest {

// Seconds: a finite decimal number in (0, max].
double parse_seconds(const std::string& flag, const std::string& text, double max);
// A finite decimal number in [lo, hi].
double parse_number(const std::string& flag, const std::string& text, double lo, double hi);
// A seed: a decimal unsigned 64-bit integer.
std::uint64_t parse_seed(const std::string& flag, const std::string& text);
// A size in bytes: digits with an optional K, M, G or T suffix (powers of 1024); "0" is none.
std::size_t parse_bytes(const std::string& flag, const std::string& text);

// "K/N" with 1 <= K <= N <= max_count, digits only: {K, N}.
std::pair<int, int> parse_shard(const std::string& flag, const std::string& text, int max_count);

}  // namespace attest
