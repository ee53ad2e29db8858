#include "attest/properties/safe_text.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>

namespace attest {
namespace {

// Length of the valid UTF-8 sequence starting at s[i] (0 when invalid): RFC 3629, no
// overlongs, no surrogates, nothing above U+10FFFF.
std::size_t utf8_length(const std::string& s, std::size_t i) {
  const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = byte(i);
  if (c < 0x80) return 1;
  std::size_t n = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC2 ? 2 : 0;
  if (n == 0 || c > 0xF4 || i + n > s.size()) return 0;
  for (std::size_t k = 1; k < n; ++k)
    if ((byte(i + k) & 0xC0) != 0x80) return 0;
  const unsigned char c1 = byte(i + 1);
  if ((c == 0xE0 && c1 < 0xA0) || (c == 0xED && c1 >= 0xA0) || (c == 0xF0 && c1 < 0x90) || (c == 0xF4 && c1 >= 0x90))
    return 0;
  return n;
}

std::uint64_t hash_of(const std::string& s) {
  std::uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ULL;
  return h;
}

}  // namespace

std::string safe_text(const std::string& text, std::size_t max_bytes) {
  std::string out;
  out.reserve(std::min(text.size(), max_bytes));
  std::size_t i = 0;
  while (i < text.size()) {
    const std::size_t n = utf8_length(text, i);
    // A line break or tab becomes a space: outside text never starts a line of attest's own
    // (a kernel named "x\nCERTIFIED x" would otherwise print a verdict line).
    const bool blank = n == 1 && (text[i] == '\n' || text[i] == '\t');
    const bool control = n == 1 && (static_cast<unsigned char>(text[i]) < 0x20 || text[i] == 0x7F) && !blank;
    const std::size_t width = n == 0 || control ? 1 : n;
    if (out.size() + width > max_bytes) break;
    if (n == 0 || control)
      out += '?';
    else if (blank)
      out += ' ';
    else
      out.append(text, i, n);
    i += width;
  }
  if (i < text.size()) out += fmt::format("...({} bytes cut)", text.size() - i);
  return out;
}

std::string file_stem(const std::string& name) {
  std::string stem;
  bool altered = false;
  for (char c : name) {
    const bool ok =
        (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
    stem += ok ? c : '_';
    altered = altered || (!ok && c != ':' && c != '/');
  }
  if (stem.empty() || stem[0] == '.') stem = "k" + stem, altered = true;
  if (stem.size() > 64 || altered) stem = fmt::format("{}-{:08x}", stem.substr(0, 48), hash_of(name) & 0xffffffffu);
  return stem;
}

}  // namespace attest
