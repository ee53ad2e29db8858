// The committed corpus is a set of regression inputs: every file must decode to exactly the
// problem it decoded to when it was committed, whatever the decoder learned since (new controls
// are read only behind flag bits these files leave clear). corpus_fingerprints.txt holds one
// line per file, "<path under corpus/> <fingerprint>", computed by the decoder of the commit
// that added the file. The fingerprint hashes every field of problem_fields.h by name (the field
// visitor: a field cannot be missed), but leaves out a field at its empty value (absent, empty,
// false, 0), so a field added later with such a default does not disturb the committed lines
// while an input that sets it does.
#include <gtest/gtest.h>

#include <bit>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>

#include "attest/model/problem_fields.h"
#include "attest/mutants/mutants.h"
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
  void name(const char* field) {
    for (const char* c = field; *c; ++c) word(static_cast<unsigned char>(*c));
  }
  std::uint64_t get() const { return h_; }

 private:
  std::uint64_t h_ = 0xcbf29ce484222325ULL;
};

// A problem_fields.h visitor: each field's name and value unless the value is empty.
struct FieldHasher {
  Hash& h;
  template <typename T>
  void integer(const char* field, const T& x, long long, long long, bool = false) {
    if (x != 0) h.name(field), h.word(static_cast<std::uint64_t>(x));
  }
  template <typename T>
  void optional_integer(const char* field, const std::optional<T>& x, long long, long long) {
    if (x) h.name(field), h.word(static_cast<std::uint64_t>(*x));
  }
  void number(const char* field, double x, bool = false) {
    if (x != 0) h.name(field), h.word(std::bit_cast<std::uint64_t>(x));
  }
  void optional_number(const char* field, const std::optional<double>& x) {
    if (x) h.name(field), h.word(std::bit_cast<std::uint64_t>(*x));
  }
  void boolean(const char* field, bool x) {
    if (x) h.name(field);
  }
  void precision(const char* field, Scalar x) {
    if (x != Scalar::kF32) h.name(field), h.word(static_cast<std::uint64_t>(x));
  }
  template <typename T>
  void integers(const char* field, const std::vector<T>& v, long long = 0, long long = 0) {
    if (v.empty()) return;
    h.name(field), h.word(v.size());
    for (T x : v) h.word(static_cast<std::uint64_t>(x));
  }
  void flags(const char* field, const std::vector<std::uint8_t>& v) { integers(field, v); }
  void floats(const char* field, const std::vector<float>& v, bool = false) {
    if (v.empty()) return;
    h.name(field), h.word(v.size());
    for (float x : v) h.word(std::bit_cast<std::uint32_t>(x));
  }
};

std::uint64_t decoded_fingerprint(const FuzzCase& c) {
  Hash h;
  FieldHasher hasher{h};
  visit_problem_fields(c.problem, hasher);
  hasher.integers("decode chunks", c.chunks);
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
      ADD_FAILURE() << "corpus/" << path << " has no line in fuzz/tests/corpus_fingerprints.txt; add \"" << path << " "
                    << std::hex << actual << "\" if it decodes as intended";
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
  for (const MutantEntry& m : mutant_registry())
    reaches.push_back({"mutant:" + m.name, reach_of(m.make()->capabilities())});
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
