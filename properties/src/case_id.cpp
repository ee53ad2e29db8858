#include "attest/properties/case_id.h"

#include <fmt/format.h>

#include <cctype>
#include <string>
#include <vector>

#include "attest/model/precision.h"
#include "attest/properties/safe_text.h"

namespace attest {
namespace {

std::string joined(const std::vector<std::string>& parts, const char* separator) {
  std::string out;
  for (const std::string& part : parts) out += (out.empty() ? "" : separator) + part;
  return out;
}

std::string mask_terms(const MaskSpec& m) {
  std::vector<std::string> terms;
  if (m.causal) terms.push_back("causal");
  if (m.window) terms.push_back(fmt::format("window({})", *m.window));
  if (m.chunk) terms.push_back(fmt::format("chunk({})", *m.chunk));
  if (m.lookahead) terms.push_back(fmt::format("lookahead({})", *m.lookahead));
  if (!m.kv_valid.empty()) terms.push_back("key_padding");
  if (!m.q_valid.empty()) terms.push_back("query_padding");
  if (!m.q_segment.empty()) terms.push_back("segments");
  if (!m.explicit_mask.empty()) terms.push_back("explicit");
  return terms.empty() ? "none" : joined(terms, "+");
}

// "bf16" when q, k and v share a format, "q:f32,k:q8,v:q8" otherwise; "" for f32 throughout.
std::string storage_text(const Problem::Storage& s) {
  const bool same = s.q == s.k && s.k == s.v;
  std::string out =
      same ? to_string(s.q) : fmt::format("q:{},k:{},v:{}", to_string(s.q), to_string(s.k), to_string(s.v));
  if (s.bias != Scalar::kF32) out += fmt::format(",bias:{}", to_string(s.bias));
  return same && s.q == Scalar::kF32 && s.bias == Scalar::kF32 ? "" : out;
}

}  // namespace

std::string case_id(const Problem& p) {
  const Shape& s = p.shape;
  std::vector<std::string> vars;
  if (s.batch > 1) vars.push_back(fmt::format("B={}", s.batch));
  if (s.heads > 1 || s.kv_heads > 1)
    vars.push_back(s.heads == s.kv_heads ? fmt::format("H={}", s.heads) : fmt::format("H={}/{}", s.heads, s.kv_heads));
  vars.push_back(fmt::format("Tq={} Tk={}", s.q_len, s.k_len));
  vars.push_back(s.head_dim == s.value_dim ? fmt::format("D={}", s.head_dim)
                                           : fmt::format("Dk={} Dv={}", s.head_dim, s.value_dim));
  vars.push_back("mask=" + mask_terms(p.mask));
  if (p.q_offset) vars.push_back(fmt::format("q_offset={}", *p.q_offset));
  if (p.scale) vars.push_back(fmt::format("scale={:g}", *p.scale));
  const ScoreModifiers& m = p.modifiers;
  std::vector<std::string> modifiers;
  if (m.softcap) modifiers.push_back(fmt::format("softcap({:g})", *m.softcap));
  if (!m.alibi_slopes.empty()) modifiers.push_back("alibi");
  if (!m.bias.empty()) modifiers.push_back("bias");
  if (!m.sinks.empty()) modifiers.push_back("sinks");
  if (p.rope.enabled) modifiers.push_back("rope");
  if (!modifiers.empty()) vars.push_back("mod=" + joined(modifiers, "+"));
  if (const std::string storage = storage_text(p.storage); !storage.empty()) vars.push_back("dtype=" + storage);
  return joined(vars, " ");
}

std::string case_file_stem(const Problem& p) {
  std::string id = case_id(p);
  for (const char* prefix : {"mask=", "mod=", "dtype="})
    for (std::size_t at = id.find(prefix); at != std::string::npos; at = id.find(prefix))
      id.erase(at, std::char_traits<char>::length(prefix));
  std::string stem;
  for (const char c : id) {
    if (c == '=' || c == '(' || c == ')') continue;
    const bool keep = std::isalnum(static_cast<unsigned char>(c)) || c == '+' || c == '.' || c == '-' || c == '_';
    stem += keep ? c : c == ' ' ? '_' : '-';
  }
  constexpr std::size_t kLongest = 100;  // file names stay well under any file system's limit
  return stem.size() > kLongest ? stem.substr(0, kLongest) : stem;
}

std::string counterexample_path(const std::string& dir, const std::string& prefix, const std::string& kernel,
                                const Problem& p) {
  return fmt::format("{}/{}__{}__{}.json", dir, prefix, file_stem(kernel), case_file_stem(p));
}

}  // namespace attest
