// The flags of a certification's own options (budget, sizes, seed), parsed strictly: the whole
// text must be the number (no trailing garbage) and in range; otherwise FlagError names the flag
// (exit 2 at the command line). Here, below the command line, because the certify API
// (ci/api) takes the same options as text.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "attest/properties/size_ladder.h"

namespace attest {

class FlagError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

// Throws FlagError: "FLAG: must be WANT, got 'TEXT'" (the text cut to 40 characters).
[[noreturn]] void reject_flag(const std::string& flag, const std::string& text, const std::string& want);

// A decimal integer in [lo, hi], digits only (a leading '-' only when lo < 0).
long long parse_integer(const std::string& flag, const std::string& text, long long lo, long long hi);
// quick (10), default (100), thorough (1000) or a case count up to 10^6.
int parse_budget(const std::string& flag, const std::string& text);

// The seed given, or one from the clock when it is 0 (every run prints its seed).
std::uint64_t seed_or_clock(std::uint64_t seed);

// The budget's sizes with --max-len, --lengths, --head-dims and --jobs applied (each parsed
// strictly; "" or empty: not given). --lengths alone raises the maximum to its longest.
SizeOptions sized_flags(SizeOptions sizes, const std::string& max_len, const std::vector<std::string>& lengths,
                        const std::vector<std::string>& head_dims, const std::string& jobs);

}  // namespace attest
