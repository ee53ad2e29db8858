#include "flags.h"

#include <unistd.h>

#include <algorithm>
#include <thread>

#include <charconv>
#include <chrono>
#include <cmath>
#include <fmt/format.h>

namespace attest {
namespace {

[[noreturn]] void reject(const std::string& flag, const std::string& text, const std::string& want) {
  throw FlagError(fmt::format("{}: must be {}, got '{}'", flag, want, text.substr(0, 40)));
}

}  // namespace

double parse_number(const std::string& flag, const std::string& text, double lo, double hi) {
  double x = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), x);
  const std::string want = fmt::format("a number in [{:g}, {:g}]", lo, hi);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || !std::isfinite(x) || x < lo || x > hi)
    reject(flag, text, want);
  return x;
}

double parse_seconds(const std::string& flag, const std::string& text, double max) {
  double x = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), x);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || !std::isfinite(x) || !(x > 0) || x > max)
    reject(flag, text, fmt::format("a number of seconds in (0, {:g}]", max));
  return x;
}

long long parse_integer(const std::string& flag, const std::string& text, long long lo, long long hi) {
  long long x = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), x);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || x < lo || x > hi)
    reject(flag, text, fmt::format("an integer in [{}, {}]", lo, hi));
  return x;
}

std::uint64_t parse_seed(const std::string& flag, const std::string& text) {
  std::uint64_t x = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), x);
  if (text.empty() || text[0] == '-' || ec != std::errc() || end != text.data() + text.size())
    reject(flag, text, "an unsigned 64-bit integer");
  return x;
}

std::size_t parse_bytes(const std::string& flag, const std::string& text) {
  const std::string want = "a size such as 512M, 8G or 0 (none)";
  std::string digits = text;
  int shift = 0;
  if (!digits.empty()) {
    switch (digits.back()) {
      case 'K': case 'k': shift = 10; break;
      case 'M': case 'm': shift = 20; break;
      case 'G': case 'g': shift = 30; break;
      case 'T': case 't': shift = 40; break;
      default: break;
    }
    if (shift) digits.pop_back();
  }
  std::uint64_t x = 0;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), x);
  if (digits.empty() || digits[0] == '-' || ec != std::errc() || end != digits.data() + digits.size() ||
      x > (std::uint64_t{1} << (50 - shift)))
    reject(flag, text, want);
  return static_cast<std::size_t>(x << shift);
}

std::pair<int, int> parse_shard(const std::string& flag, const std::string& text, int max_count) {
  const std::string want = fmt::format("K/N with 1 <= K <= N <= {}", max_count);
  const std::size_t slash = text.find('/');
  if (slash == std::string::npos) reject(flag, text, want);
  const std::string k = text.substr(0, slash), n = text.substr(slash + 1);
  auto digits = [](const std::string& s) { return !s.empty() && s.size() <= 4 && s.find_first_not_of("0123456789") == std::string::npos; };
  if (!digits(k) || !digits(n)) reject(flag, text, want);
  const int index = std::stoi(k), count = std::stoi(n);
  if (index < 1 || count > max_count || index > count) reject(flag, text, want);
  return {index, count};
}

std::uint64_t seed_or_clock(std::uint64_t seed) {
  return seed ? seed : static_cast<std::uint64_t>(std::chrono::system_clock::now().time_since_epoch().count());
}

int parse_budget(const std::string& flag, const std::string& text) {
  if (text == "quick") return 10;
  if (text == "default") return 100;
  if (text == "thorough") return 1000;
  long long x = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), x);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || x < 0 || x > 1'000'000)
    reject(flag, text, "quick, default, thorough or a case count in [0, 1000000]");
  return static_cast<int>(x);
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

// Half the machine's memory, at least 1 GiB: a kernel in a child process gets no more.
std::size_t default_memory_limit() {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  const std::size_t total = pages > 0 && page > 0 ? std::size_t(pages) * std::size_t(page) : std::size_t{2} << 30;
  return std::max<std::size_t>(total / 2, std::size_t{1} << 30);
}

}  // namespace attest
