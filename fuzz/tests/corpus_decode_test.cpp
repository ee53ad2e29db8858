// The committed corpus is a set of regression inputs: every file must decode to exactly the
// problem it decoded to when it was committed, whatever the decoder learned since (new controls
// are read only behind flag bits these files leave clear). corpus_fingerprints.txt holds one
// line per file, "<path under corpus/> <fingerprint>", computed by the decoder of the commit
// that added the file. The fingerprint below is this test's own hash over the fields the
// decoder sets (not the oracle's, which follows problem_fields.h and changes when a field is
// added), so a new Problem field elsewhere does not disturb it.
#include <gtest/gtest.h>

#include <bit>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>

#include "attest/mutants.h"
#include "fuzz_input.h"
#include "fuzz_targets.h"

namespace attest::fuzz {
namespace {

namespace fs = std::filesystem;

class Hash {
 public:
  void word(std::uint64_t x) {
    for (int i = 0; i < 8; ++i) h_ = (h_ ^ (x >> (8 * i) & 0xff)) * 0x100000001b3ULL;
  }
  void number(double x) { word(std::bit_cast<std::uint64_t>(x)); }
  template <typename T>
  void optional(const std::optional<T>& x) {
    word(x.has_value());
    if (x) number(static_cast<double>(*x));
  }
  template <typename T>
  void list(const std::vector<T>& v) {
    word(v.size());
    for (const T& x : v) {
      if constexpr (std::is_same_v<T, float>) word(std::bit_cast<std::uint32_t>(x));
      else word(static_cast<std::uint64_t>(x));
    }
  }
  std::uint64_t get() const { return h_; }

 private:
  std::uint64_t h_ = 0xcbf29ce484222325ULL;
};

std::uint64_t decoded_fingerprint(const FuzzCase& c) {
  const Problem& p = c.problem;
  Hash h;
  const Shape& s = p.shape;
  for (int x : {s.batch, s.heads, s.kv_heads, s.q_len, s.k_len, s.head_dim, s.value_dim}) h.word(x);
  h.optional(p.scale);
  h.optional(p.q_offset);
  const MaskSpec& m = p.mask;
  h.word(m.causal);
  h.optional(m.window);
  h.optional(m.chunk);
  h.list(m.kv_valid);
  h.list(m.q_valid);
  h.list(m.q_segment);
  h.list(m.k_segment);
  h.list(m.explicit_mask);
  h.word(p.rope.enabled);
  h.number(p.rope.base);
  const ScoreModifiers& md = p.modifiers;
  h.optional(md.softcap);
  h.list(md.alibi_slopes);
  h.list(md.bias);
  h.word(md.bias_per_batch);
  h.word(md.bias_per_head);
  h.list(md.sinks);
  for (Scalar x : {p.storage.q, p.storage.k, p.storage.v}) h.word(static_cast<std::uint64_t>(x));
  h.list(p.q);
  h.list(p.k);
  h.list(p.v);
  h.list(c.chunks);
  return h.get();
}

// corpus/<target>/NAME and corpus/regressions/<target>/NAME, keyed by their path under corpus/.
std::map<std::string, std::pair<Flavor, std::vector<std::uint8_t>>> corpus_inputs() {
  const fs::path corpus = fs::path(ATTEST_SOURCE_DIR) / "corpus";
  std::map<std::string, std::pair<Flavor, std::vector<std::uint8_t>>> out;
  for (const TargetInfo& t : target_table()) {
    for (const fs::path& dir : {corpus / t.name, corpus / "regressions" / t.name}) {
      if (!fs::is_directory(dir)) continue;
      for (const auto& entry : fs::directory_iterator(dir)) {
        if (!entry.is_regular_file() || entry.path().extension() == ".md") continue;
        std::ifstream in(entry.path(), std::ios::binary);
        std::vector<std::uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        out[fs::relative(entry.path(), corpus).generic_string()] = {t.flavor, std::move(bytes)};
      }
    }
  }
  return out;
}

std::map<std::string, std::uint64_t> recorded_fingerprints() {
  std::ifstream in(fs::path(ATTEST_SOURCE_DIR) / "fuzz/tests/corpus_fingerprints.txt");
  std::map<std::string, std::uint64_t> out;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream fields(line);
    std::string path, hex;
    fields >> path >> hex;
    out[path] = std::stoull(hex, nullptr, 16);
  }
  return out;
}

// The reach the fingerprints are taken with: a 128x64-tile kernel declaring every score
// modifier, fixed here (not any kernel's declaration, which may change), so extended inputs pin
// their lengths and modifiers too. Basic inputs decode the same under any reach (next test).
Reach pinned_reach() {
  Reach r;
  r.query_tile = 128, r.key_tile = 64, r.max_length = 258;
  r.modifiers = FeatureSet::of_kind(FeatureKind::kModifier);
  return r;
}

TEST(CorpusDecode, EveryCommittedInputDecodesAsWhenItWasCommitted) {
  const auto inputs = corpus_inputs();
  const auto recorded = recorded_fingerprints();
  ASSERT_FALSE(inputs.empty());
  for (const auto& [path, input] : inputs) {
    const auto& [flavor, bytes] = input;
    const auto it = recorded.find(path);
    const std::uint64_t actual = decoded_fingerprint(decode_input(bytes.data(), bytes.size(), flavor, pinned_reach()));
    if (it == recorded.end()) {
      ADD_FAILURE() << "corpus/" << path << " has no line in fuzz/tests/corpus_fingerprints.txt; add \"" << path
                    << " " << std::hex << actual << "\" if it decodes as intended";
      continue;
    }
    EXPECT_EQ(actual, it->second) << "corpus/" << path << " decodes to another problem than when it was committed";
  }
  for (const auto& [path, fp] : recorded) EXPECT_TRUE(inputs.count(path)) << "corpus/" << path << " is gone";
}

// Inputs without kExtended decode the same on every kernel: their lengths and features do not
// depend on the kernel's tiles or declaration (only the extension reads those).
TEST(CorpusDecode, BasicInputsDecodeTheSameOnEveryKernel) {
  std::vector<std::pair<std::string, Reach>> reaches;
  for (const KernelEntry& e : kernel_registry()) reaches.push_back({e.name, reach_of(e.make()->capabilities())});
  for (const MutantEntry& m : mutant_registry()) reaches.push_back({"mutant:" + m.name, reach_of(m.make()->capabilities())});
  for (const auto& [path, input] : corpus_inputs()) {
    const auto& [flavor, bytes] = input;
    if (decode_controls(bytes.data(), bytes.size(), flavor).flags & kExtended) continue;
    const std::uint64_t plain = decoded_fingerprint(decode_input(bytes.data(), bytes.size(), flavor));
    for (const auto& [kernel, reach] : reaches)
      EXPECT_EQ(decoded_fingerprint(decode_input(bytes.data(), bytes.size(), flavor, reach)), plain)
          << "corpus/" << path << " on " << kernel;
  }
}

}  // namespace
}  // namespace attest::fuzz
