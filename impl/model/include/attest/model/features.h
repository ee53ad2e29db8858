// The one table of features a problem may use and a kernel may declare: mask terms, score
// modifiers and structure (GQA, RoPE, LSE, decode). Capabilities, the ABI's capability bits,
// certificates (declared, covered, not covered), `--require` and the generators iterate it.
// Adding a feature: a row here, its field in problem.h, its formula in the reference, and its
// implementation in the kernels (each folder README says how).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "attest/model/problem.h"

namespace attest {

enum class Feature : std::uint8_t {
  // Mask terms (a conjunction; docs/design.md#problem-semantics).
  kCausal,
  kWindow,
  kChunk,
  kLookahead,
  kKeyPadding,
  kQueryPadding,
  kSegments,
  kExplicitMask,
  // Score modifiers.
  kSoftcap,
  kAlibi,
  kBias,
  kSinks,
  // Structure and outputs.
  kGqa,
  kRope,
  kLse,
  kDecode,
  kBackward,
  kCount
};
inline constexpr std::size_t kFeatureCount = static_cast<std::size_t>(Feature::kCount);

enum class FeatureKind { kMaskTerm, kModifier, kStructure };

struct FeatureInfo {
  Feature feature;
  const char* name;  // in certificates, `--require`, docs
  FeatureKind kind;
  std::uint32_t abi_bit;            // ATTEST_CAP_* of attest_abi.h (checked against it in impl/abi)
  bool positional;                  // depends on token positions: no permutation equivariance with it
  bool (*used_by)(const Problem&);  // whether a problem uses it (null: not a problem property); see uses_feature
  void (*remove)(Problem&);         // takes it out of a problem (GQA: Hkv = H; buffers then resized by the caller)
  const char* summary;
  // An integer mask term (window, chunk, lookahead): one parameter >= 1 that depends on positions only. Such a
  // term needs no code beyond its row, its formula and its kernel step: the problem file, the
  // fingerprint, decode sessions, the ABI and the wire, the generators and the fuzz decoder iterate
  // these rows (used_by and remove are then derived from the parameter).
  std::optional<int> MaskSpec::*parameter = nullptr;
  const char* field = nullptr;  // its name in problem files ("mask.window")
  // Fixed in absolute position (chunk): moving every position by s keeps the term only when s is
  // a multiple of the parameter (rope_relative_position shifts by such multiples).
  bool absolute = false;
};

const std::array<FeatureInfo, kFeatureCount>& feature_table();
// The integer mask terms, in table order (the order of the ABI's and the wire's term list).
const std::vector<const FeatureInfo*>& integer_mask_terms();
const FeatureInfo& info(Feature f);
// Only the integer mask terms of `m` (what a decode session carries).
MaskSpec integer_mask_terms_of(const MaskSpec& m);
bool uses_feature(const FeatureInfo& i, const Problem& p);  // false for LSE and decode
void remove_feature(const FeatureInfo& i, Problem& p);
std::optional<Feature> feature_named(std::string_view name);

// A set of features, as a bit set over the table.
class FeatureSet {
 public:
  constexpr FeatureSet() = default;
  constexpr FeatureSet(std::initializer_list<Feature> features) {
    for (Feature f : features) insert(f);
  }
  static FeatureSet all();
  static FeatureSet of_kind(FeatureKind kind);

  constexpr bool contains(Feature f) const { return bits_ >> static_cast<unsigned>(f) & 1u; }
  constexpr void insert(Feature f) { bits_ |= 1u << static_cast<unsigned>(f); }
  constexpr void erase(Feature f) { bits_ &= ~(1u << static_cast<unsigned>(f)); }
  constexpr void set(Feature f, bool on) { on ? insert(f) : erase(f); }
  constexpr bool empty() const { return bits_ == 0; }
  constexpr bool subset_of(FeatureSet other) const { return (bits_ & ~other.bits_) == 0; }
  constexpr FeatureSet operator|(FeatureSet o) const { return from_bits(bits_ | o.bits_); }
  constexpr FeatureSet operator&(FeatureSet o) const { return from_bits(bits_ & o.bits_); }
  constexpr FeatureSet minus(FeatureSet o) const { return from_bits(bits_ & ~o.bits_); }
  constexpr bool operator==(const FeatureSet&) const = default;
  std::vector<Feature> members() const;
  std::vector<std::string> names() const;  // in table order
  std::string joined(const char* separator = ", ") const;

  std::uint32_t abi_bits() const;
  static FeatureSet from_abi_bits(std::uint32_t bits);

 private:
  static constexpr FeatureSet from_bits(std::uint32_t bits) {
    FeatureSet s;
    s.bits_ = bits;
    return s;
  }
  std::uint32_t bits_ = 0;
};

// The features a problem uses (LSE and decode are not problem properties: never included).
FeatureSet features_used_by(const Problem& p);

}  // namespace attest
