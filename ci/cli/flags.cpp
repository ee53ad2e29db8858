#include "flags.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>

namespace attest {
namespace {

[[noreturn]] void reject(const std::string& flag, const std::string& text, const std::string& want) {
  reject_flag(flag, text, want);
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
      case 'K':
      case 'k':
        shift = 10;
        break;
      case 'M':
      case 'm':
        shift = 20;
        break;
      case 'G':
      case 'g':
        shift = 30;
        break;
      case 'T':
      case 't':
        shift = 40;
        break;
      default:
        break;
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
  auto digits = [](const std::string& s) {
    return !s.empty() && s.size() <= 4 && s.find_first_not_of("0123456789") == std::string::npos;
  };
  if (!digits(k) || !digits(n)) reject(flag, text, want);
  const int index = std::stoi(k), count = std::stoi(n);
  if (index < 1 || count > max_count || index > count) reject(flag, text, want);
  return {index, count};
}

}  // namespace attest
