#include "declaration_draw.h"

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "attest/kernels/cache_policy.h"
#include "attest/kernels/path_predicate.h"

namespace attest {
namespace {

class Draw {
 public:
  explicit Draw(std::uint64_t seed) : rng_(seed) {}
  bool chance(double p) { return std::uniform_real_distribution<double>(0, 1)(rng_) < p; }
  int between(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
  template <typename T>
  T pick(const std::vector<T>& options) {
    return options[static_cast<std::size_t>(between(0, static_cast<int>(options.size()) - 1))];
  }

 private:
  std::mt19937_64 rng_;
};

const std::vector<Scalar> kFloat16{Scalar::kBF16, Scalar::kF16};

// Storage and where the kernel rounds: f32 most often, so that each 16-bit choice stands out.
Precision draw_precision(Draw& d) {
  Precision p;
  auto storage = [&] { return d.chance(0.5) ? Scalar::kF32 : d.pick(kFloat16); };
  p.q = storage();
  p.k = storage();
  p.v = storage();
  p.o = storage();
  if (d.chance(0.15)) p.k = p.v = d.pick(std::vector<Scalar>{Scalar::kQ8, Scalar::kQ4});  // quantized K/V
  p.bias = storage();
  auto rounding = [&] { return d.chance(0.7) ? Scalar::kF32 : d.pick(kFloat16); };
  p.q_entry = rounding();
  p.k_entry = rounding();
  p.v_entry = rounding();
  p.scores = rounding();
  p.p = rounding();
  p.accumulator = rounding();
  if (d.chance(0.15)) p.weight_sum = d.chance(0.5) ? Scalar::kF32 : d.pick(kFloat16);
  p.pv_unnormalised = d.chance(0.2);
  p.exp_ulps = d.pick(std::vector<double>{1, 1, 2, 8, 64});
  return p;
}

Contract draw_contract(Draw& d, const FeatureSet& features) {
  Contract c;
  if (d.chance(0.3)) {
    const int widths = d.between(1, 3);
    for (int i = 0; i < widths; ++i)
      c.head_dims.push_back(d.pick(std::vector<int>{8, 16, 24, 32, 48, 64, 80, 96, 128}));
    std::sort(c.head_dims.begin(), c.head_dims.end());
    c.head_dims.erase(std::unique(c.head_dims.begin(), c.head_dims.end()), c.head_dims.end());
  } else if (d.chance(0.2)) {
    const int lo = d.between(1, 64);
    c.head_dim = {lo, lo + d.between(0, 128)};
  }
  c.dk_equals_dv = d.chance(0.3);
  c.default_scale_only = d.chance(0.2);
  c.causal_required = features.contains(Feature::kCausal) && d.chance(0.1);
  c.self_attention_only = d.chance(0.1);
  if (d.chance(0.2)) c.q_len = {1, 1LL << d.between(3, 12)};
  if (d.chance(0.2)) c.k_len = {d.between(1, 8), 1LL << d.between(4, 12)};
  if (d.chance(0.1)) c.q_offset = {0, 1LL << d.between(0, 40)};
  if (d.chance(0.1)) c.batch = {1, d.between(1, 8)};
  if (d.chance(0.1)) c.heads = {1, d.between(1, 16)};
  if (features.contains(Feature::kAlibi) && d.chance(0.3)) c.alibi_slopes = AlibiSlopes::kStandard;
  if (d.chance(0.1)) c.max_abs_value = d.pick(std::vector<double>{1, 4, 100, 1e4});
  if (d.chance(0.3)) {
    c.query_tile = d.pick(std::vector<int>{16, 32, 64, 128});
    c.key_tile = d.pick(std::vector<int>{16, 32, 64, 128});
  }
  return c;
}

// A decoder's serving cache: a block table attest owns in 3 of 10, else a cache policy that evicts
// (window, sinks + recent, or positions the session reports) in 4 of 10.
constexpr long long kBlockTableKeys = 1280;

void draw_serving_cache(Draw d, Capabilities& c) {
  using Kind = CachePolicy::Kind;
  if (d.chance(0.4)) {
    c.cache.kind = d.pick(std::vector<Kind>{Kind::kWindow, Kind::kSinksRecent, Kind::kExplicit});
    if (c.cache.kind == Kind::kSinksRecent) c.cache.sinks = d.between(1, 4);
    if (c.cache.kind != Kind::kExplicit) c.cache.recent = d.pick(std::vector<int>{4, 8, 16, 32, 64});
  }
  if (d.chance(0.3)) {
    c.page_tokens = d.pick(std::vector<int>{1, 4, 16, 64});
    // The model attends every call in float64: the block-table checks' long case (past 1024 tokens
    // and 64 table entries, up to 4096) cost it up to ten minutes per declaration. Declared up to
    // kBlockTableKeys keys, the long case still passes 1024 tokens, at about a tenth of the cost.
    Range& keys = c.contract.k_len;
    if (keys.unlimited() || keys.max > kBlockTableKeys) keys = {keys.unlimited() ? 1 : keys.min, kBlockTableKeys};
    // Block tables keep every token (the ABI refuses page_tokens with an evicting policy; seed 7 #1
    // was REFUSED through the protocol): the cache policy drawn above gives way.
    c.cache = CachePolicy{};
  }
}

// Declared paths with predicates, in a quarter of the declarations that have a forward: one or two
// of three, in a drawn order (the first whose predicate a problem meets serves it), each only where
// the contract admits a problem it takes that no earlier path takes (a kernel never names a path it
// cannot reach). The model serves a path by its name's tiling (declared_model.h).
//
// Not with a block table: the model attends a block-table call a sequence at a time, so its calls
// of B >= 2 would report the path of B = 1 (seed 7 #29: "path per-batch: 0 of 3 cases" in the
// block-table properties). Serving them under the call's own path is not done yet.
void draw_paths(Draw d, Capabilities& c) {
  if (!c.forward() || !d.chance(0.25) || c.page_tokens > 0) return;
  const Contract& k = c.contract;
  auto some_head_dim = [&](bool multiple_of_16) {
    for (int dim = 1; dim <= 256; ++dim)
      if ((dim % 16 == 0) == multiple_of_16 && k.accepts_head_dim(dim)) return true;
    return false;
  };
  const bool long_q =
      (k.q_len.unlimited() || k.q_len.max > 8) && (!k.self_attention_only || k.k_len.unlimited() || k.k_len.max > 8);
  std::vector<PathPredicate> options;
  PathPredicate short_q{.path = "short-q"};
  short_q.q_len = {1, 8};
  options.push_back(short_q);
  if (k.batch.unlimited() || k.batch.max >= 2) {
    PathPredicate batched{.path = "per-batch"};
    batched.batch = {2, kMaxContractMinBatch};
    options.push_back(batched);
  }
  if (some_head_dim(true)) options.push_back(PathPredicate{.path = "per-batch-d16", .head_dim_multiple = 16});
  for (int n = d.between(1, 2); n > 0 && !options.empty(); --n) {
    const int at = d.between(0, static_cast<int>(options.size()) - 1);
    const PathPredicate taken = options[static_cast<std::size_t>(at)];
    c.paths.push_back(taken);
    options.erase(options.begin() + at);
    // What the taken path leaves to a later one: Tq > 8, a Dk not a multiple of 16 (B = 1 is
    // always admitted).
    if ((taken.path == "short-q" && !long_q) || (taken.path == "per-batch-d16" && !some_head_dim(false))) break;
  }
}

// Each declared path's key tile (ABI 2.7): the contract's (0) half the time, else one key (a path
// that rescales per key) or a whole tile of 16 or 64.
void draw_path_tiles(Draw d, Capabilities& c) {
  for (PathPredicate& path : c.paths) path.key_tile = d.chance(0.5) ? 0 : d.pick(std::vector<int>{1, 16, 64});
}

// Each field group added after the first draws from a stream of its own, so that adding it moved
// no earlier field of any declaration.
constexpr std::uint64_t kBackwardStream = 0xBAC4'0000'0000ULL, kServingStream = 0x5E55'0000'0000ULL,
                        kPathStream = 0x9A74'0000'0000ULL, kFp8Stream = 0xF980'0000'0000ULL,
                        kGgmlStream = 0x6600'0000'0000ULL, kValueWidthStream = 0xD7A1'0000'0000ULL,
                        kPathTileStream = 0x7173'0000'0000ULL, kMergeStream = 0x3E56'0000'0000ULL,
                        kFlushStream = 0xF722'0000'0000ULL, kPackedStream = 0xFAC4'0000'0000ULL;
std::uint64_t stream(std::uint64_t seed, int index, std::uint64_t salt) {
  return seed * 0x9E3779B97F4A7C15ULL + static_cast<std::uint64_t>(index) + salt;
}

// ABI 2.7, in about a fifth each where they can apply: Dv's own widths (ggml's whole blocks of 32,
// with Dv apart from Dk) or range, and ALiBi excluding a bias.
void draw_value_widths(Draw d, Capabilities& c) {
  Contract& k = c.contract;
  if (!k.dk_equals_dv && d.chance(0.2)) {
    if (d.chance(0.5)) {
      k.value_dim = {16, 256};
      for (int dv : {32, 64, 96, 128})
        if (k.value_dims.empty() || d.chance(0.5)) k.value_dims.push_back(dv);
    } else {
      const int lo = d.between(1, 64);
      k.value_dim = {lo, lo + d.between(0, 96)};
    }
  }
  if (c.features.contains(Feature::kAlibi) && c.features.contains(Feature::kBias) && d.chance(0.3))
    k.alibi_excludes_bias = true;
}

// Merge (ABI 2.6) in half of the declarations with an explicit mask and LSE, where split_invariance
// runs its splits (merge_equals_whole runs with any), and in a tenth of the others: the model merges
// as the exact log-sum-exp merge.
void draw_merge(Draw d, Capabilities& c) {
  const bool splits = c.declares(Feature::kExplicitMask) && c.lse() && c.forward();
  c.merge = d.chance(splits ? 0.5 : 0.1);
}

// The packed varlen layout (ABI 2.8) in about a sixth of the declarations with a forward. A packed
// call is float32: Q, K, V and O are stored so (the entry roundings and the rest stay as drawn).
// Its paths take the contract's key tile: the bound of a packed call counts the padded problem's
// path, and the model serves each sequence as a problem of its own, which may take another.
void draw_packed(Draw d, Capabilities& c) {
  if (!c.forward() || !d.chance(1.0 / 6)) return;
  c.packed = true;
  c.precision.q = c.precision.k = c.precision.v = c.precision.o = Scalar::kF32;
  for (PathPredicate& path : c.paths) path.key_tile = 0;
}

}  // namespace

Capabilities draw_declaration(std::uint64_t seed, int index) {
  Draw d(stream(seed, index, 0));
  Capabilities c;
  c.features = {};
  for (const Feature f : FeatureSet::all().minus({Feature::kDecode, Feature::kBackward}).members())
    if (d.chance(0.6)) c.features.insert(f);
  c.precision = draw_precision(d);
  // fp8 K/V storage (element formats, as bf16 and f16 are) in about a tenth.
  if (Draw fp8(stream(seed, index, kFp8Stream)); fp8.chance(0.1))
    c.precision.k = c.precision.v = fp8.pick(std::vector<Scalar>{Scalar::kE4M3, Scalar::kE5M2});
  // ggml's layouts (ABI 2.6) in about a tenth: K/V in block_q4_0, or Q quantized to q8 on entry.
  if (Draw ggml(stream(seed, index, kGgmlStream)); ggml.chance(0.1)) {
    if (ggml.chance(0.5))
      c.precision.k = c.precision.v = Scalar::kQ4_0;
    else
      c.precision.q_entry = Scalar::kQ8;
  }
  // Backward in about a sixth of declarations, from a stream of its own so that no other field moves.
  // The gradient's bound is a float32 backward's: a backward comes with float32 throughout (its
  // precision drawn and then replaced, for the same reason), and the model's backward is exact in
  // float32 whatever its determinism or tiles.
  Draw backward(stream(seed, index, kBackwardStream));
  if (backward.chance(1.0 / 6)) {
    c.features.insert(Feature::kBackward);
    c.deterministic_backward = backward.chance(0.5);
    c.precision = Precision{};
  }
  c.empty_rows = d.chance(0.3) ? EmptyRowPolicy::kNan : EmptyRowPolicy::kZero;
  c.contract = draw_contract(d, c.features);
  c.inputs = d.chance(0.3) ? InputDomain::kFinite : InputDomain::kMaskedMayBeNonFinite;
  // Drawn last, so that adding it moved no earlier field of any declaration.
  if (c.inputs == InputDomain::kMaskedMayBeNonFinite && d.chance(0.3)) c.inputs = InputDomain::kMaskedScored;
  // Decode (served by the model's own sessions), half of it decode-only, as serving libraries
  // declare; drawn after every other field for the same reason.
  // Decode is causal attention: a decoder declares causal (attest's decoders and the ABI's default
  // do; without it decode_matches_prefill has no forward to compare with, ci/selfcheck's
  // known_false_alarms.txt).
  if (d.chance(0.25)) {
    c.features.insert(Feature::kDecode);
    c.features.insert(Feature::kCausal);
    c.contract.decode_only = !c.features.contains(Feature::kBackward) && d.chance(0.5);
    draw_serving_cache(Draw(stream(seed, index, kServingStream)), c);
  }
  draw_paths(Draw(stream(seed, index, kPathStream)), c);
  draw_value_widths(Draw(stream(seed, index, kValueWidthStream)), c);
  draw_path_tiles(Draw(stream(seed, index, kPathTileStream)), c);
  draw_merge(Draw(stream(seed, index, kMergeStream)), c);
  // Flushed subnormals (ABI 2.9) in about a tenth: the model computes with FTZ and DAZ set. Not with
  // a backward, whose bound is a float32 backward's (the ABI refuses the pair).
  if (Draw flush(stream(seed, index, kFlushStream)); !c.backward() && flush.chance(0.1))
    c.precision.flush_subnormals = true;
  draw_packed(Draw(stream(seed, index, kPackedStream)), c);
  return c;
}

}  // namespace attest
