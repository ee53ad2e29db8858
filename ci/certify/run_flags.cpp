#include "run_flags.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <system_error>
#include <thread>

namespace attest {

void reject_flag(const std::string& flag, const std::string& text, const std::string& want) {
  throw FlagError(fmt::format("{}: must be {}, got '{}'", flag, want, text.substr(0, 40)));
}

long long parse_integer(const std::string& flag, const std::string& text, long long lo, long long hi) {
  long long x = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), x);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || x < lo || x > hi)
    reject_flag(flag, text, fmt::format("an integer in [{}, {}]", lo, hi));
  return x;
}

int parse_budget(const std::string& flag, const std::string& text) {
  if (text == "quick") return 10;
  if (text == "default") return 100;
  if (text == "thorough") return 1000;
  long long x = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), x);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || x < 0 || x > 1'000'000)
    reject_flag(flag, text, "quick, default, thorough or a case count in [0, 1000000]");
  return static_cast<int>(x);
}

std::uint64_t seed_or_clock(std::uint64_t seed) {
  return seed ? seed : static_cast<std::uint64_t>(std::chrono::system_clock::now().time_since_epoch().count());
}

SizeOptions sized_flags(SizeOptions sizes, const std::string& max_len, const std::vector<std::string>& lengths,
                        const std::vector<std::string>& head_dims, const std::string& jobs) {
  constexpr long long kLongest = 1 << 20;  // a million tokens: Q, K, V of one head at Dk 64 take 768 MiB
  if (!max_len.empty()) sizes.max_len = static_cast<int>(parse_integer("--max-len", max_len, 1, kLongest));
  for (const std::string& t : lengths)
    sizes.lengths.push_back(static_cast<int>(parse_integer("--lengths", t, 1, kLongest)));
  if (!sizes.lengths.empty() && max_len.empty())
    sizes.max_len = *std::max_element(sizes.lengths.begin(), sizes.lengths.end());
  for (const std::string& d : head_dims)
    sizes.head_dims.push_back(static_cast<int>(parse_integer("--head-dims", d, 1, 1024)));
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  sizes.jobs = jobs.empty() ? static_cast<int>(cores) : static_cast<int>(parse_integer("--jobs", jobs, 1, 256));
  return sizes;
}

}  // namespace attest
