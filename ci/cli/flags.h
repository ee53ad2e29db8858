// Strict parsing of the command line's numbers: the whole text must be the number (no
// trailing garbage), finite, and in range; otherwise FlagError names the flag (exit 2).
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "attest/size_ladder.h"

namespace attest {

class FlagError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

// Seconds: a finite decimal number in (0, max].
double parse_seconds(const std::string& flag, const std::string& text, double max);
// A finite decimal number in [lo, hi].
double parse_number(const std::string& flag, const std::string& text, double lo, double hi);
// A decimal integer in [lo, hi], digits only (a leading '-' only when lo < 0).
long long parse_integer(const std::string& flag, const std::string& text, long long lo, long long hi);
// A seed: a decimal unsigned 64-bit integer.
std::uint64_t parse_seed(const std::string& flag, const std::string& text);
// A size in bytes: digits with an optional K, M, G or T suffix (powers of 1024); "0" is none.
std::size_t parse_bytes(const std::string& flag, const std::string& text);
// quick (10), default (100), thorough (1000) or a case count up to 10^6.
int parse_budget(const std::string& flag, const std::string& text);

// "K/N" with 1 <= K <= N <= max_count, digits only: {K, N}.
std::pair<int, int> parse_shard(const std::string& flag, const std::string& text, int max_count);

// The seed given, or one from the clock when it is 0 (every run prints its seed).
std::uint64_t seed_or_clock(std::uint64_t seed);

// The budget's sizes with --max-len, --lengths, --head-dims and --jobs applied (each parsed
// strictly; "" or empty: not given). --lengths alone raises the maximum to its longest.
SizeOptions sized_flags(SizeOptions sizes, const std::string& max_len, const std::vector<std::string>& lengths,
                        const std::vector<std::string>& head_dims, const std::string& jobs);

// Half the machine's memory, at least 1 GiB: what a kernel in a child process may take by default.
std::size_t default_memory_limit();

}  // namespace attest
