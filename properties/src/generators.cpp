#include "attest/properties/generators.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <functional>
#include <iterator>
#include <limits>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <tuple>

#include "attest/model/quantized.h"
#include "attest/properties/coverage_model.h"
#include "attest/reference/reference.h"
#include "declared_range.h"
#include "problem_edits.h"

namespace attest {
namespace {

// Every generator below maps shrinkable integers (RapidCheck shrinks them towards 0) to biased
// values, so that shrinking always moves towards the smallest, simplest choice. Choices are
// drawn at full size: RapidCheck's growing size would otherwise keep early cases mask-free.

rc::Gen<int> choice(int lo, int hi) { return rc::gen::resize(100, rc::gen::inRange(lo, hi)); }

// True with probability in_ten / 10; shrinks to false.
rc::Gen<bool> sometimes(int in_ten) {
  return rc::gen::map(choice(0, 10), [=](int x) { return x >= 10 - in_ten; });
}

// `zero_weight` times in `total` 0; otherwise a value of `rest` (index from 0); shrinks to 0.
rc::Gen<int> mostly_zero(int zero_weight, int total, std::function<int(int)> rest) {
  return rc::gen::map(choice(0, total), [=](int x) { return x < zero_weight ? 0 : rest(x - zero_weight); });
}

// Lengths biased to where kernels break: tiny, the kernel's tile (or 32) and the page size 16
// +-1, and anything up to 72.
// A declared tile's edges, and lengths spanning three tiles (a bug in the middle tile's bookkeeping
// needs one before and one after it) while that stays short enough for every property (the size
// ladder covers larger tiles' multiples).
constexpr int kLongestThreeTiles = 400;

rc::Gen<int> gen_length(int tile) {
  std::vector<int> edges = {15, 16, 17, 31, 32, 33, 47, 48, 49, 63, 64, 65};
  std::size_t own = 3;  // the last `own` edges are the kernel's (or 63..65)
  if (tile > 1) edges.insert(edges.end(), {tile - 1, tile, tile + 1});
  if (tile > 1 && 3 * tile + 1 <= kLongestThreeTiles) edges.insert(edges.end(), {2 * tile + 1, 3 * tile + 1}), own = 5;
  return rc::gen::map(rc::gen::pair(choice(0, 10), choice(0, 720)), [edges, own](std::pair<int, int> kv) {
    const auto [kind, value] = kv;
    if (kind < 4) return 1 + value % 9;
    if (kind < 7) return edges[value % edges.size()];
    if (kind < 9) return 1 + value % 72;
    return edges[edges.size() - 1 - value % own];  // the kernel's own tile edges
  });
}

rc::Gen<int> gen_width() {
  return rc::gen::map(rc::gen::pair(choice(0, 4), choice(0, 72)), [](std::pair<int, int> kv) {
    return kv.first < 3 ? 1 + kv.second % 9 : (kv.second % 2 ? 32 : 16);
  });
}

std::vector<int> segment_ids(int len, std::mt19937_64& rng) {
  std::vector<int> ids;
  int id = 0;
  for (int t = 0; t < len; ++t) {
    if (t > 0 && rng() % 6 == 0) ++id;
    ids.push_back(id);
  }
  return ids;
}

// How each problem feature is drawn: how often it is on, its parameter's range, and how it is
// put into a problem whose shape is set (null: an integer mask term, its parameter set). One row
// per problem feature of the table.
struct TermGenerator {
  Feature feature;
  int in_ten;
  int param_lo, param_hi;
  void (*apply)(Problem&, int param, std::mt19937_64& rng);
};

// Every integer mask term is on 2 times in 10 with a parameter from 1 to 40 (up to past the
// longest generated sequence, so the term is sometimes a no-op).
std::vector<TermGenerator> with_integer_terms(std::vector<TermGenerator> rows) {
  std::vector<TermGenerator> out = {rows.front()};  // causal first, as the draws always were
  for (const FeatureInfo* term : integer_mask_terms()) out.push_back({term->feature, 2, 1, 40, nullptr});
  out.insert(out.end(), rows.begin() + 1, rows.end());
  return out;
}

const std::vector<TermGenerator>& term_generators() {
  static const std::vector<TermGenerator> table = with_integer_terms({
      {Feature::kCausal, 5, 0, 1, [](Problem& p, int, std::mt19937_64&) { p.mask.causal = true; }},
      {Feature::kKeyPadding, 3, 0, 1,
       [](Problem& p, int, std::mt19937_64& rng) {  // lengths anywhere in [0, Tk]: empty batches too
         for (int b = 0; b < p.shape.batch; ++b) p.mask.kv_valid.push_back(int(rng() % (p.shape.k_len + 1)));
       }},
      {Feature::kQueryPadding, 2, 0, 1,
       [](Problem& p, int, std::mt19937_64& rng) {
         for (int b = 0; b < p.shape.batch; ++b) p.mask.q_valid.push_back(int(rng() % (p.shape.q_len + 1)));
       }},
      {Feature::kSegments, 2, 0, 1,
       [](Problem& p, int, std::mt19937_64& rng) {
         for (int b = 0; b < p.shape.batch; ++b) {
           const std::vector<int> qs = segment_ids(p.shape.q_len, rng), ks = segment_ids(p.shape.k_len, rng);
           p.mask.q_segment.insert(p.mask.q_segment.end(), qs.begin(), qs.end());
           p.mask.k_segment.insert(p.mask.k_segment.end(), ks.begin(), ks.end());
         }
       }},
      {Feature::kExplicitMask, 2, 0, 2,
       [](Problem& p, int density, std::mt19937_64& rng) {
         const int keep_percent[] = {90, 50, 10};
         p.mask.explicit_mask.resize(std::size_t(p.shape.batch) * p.shape.q_len * p.shape.k_len);
         for (auto& x : p.mask.explicit_mask) x = static_cast<int>(rng() % 100) < keep_percent[density];
       }},
      {Feature::kRope, 2, 0, 1, [](Problem& p, int, std::mt19937_64&) { p.rope.enabled = true; }},
      // Score modifiers: caps 1 to 1e4; slopes of both signs and zero; a bias broadcast or not, with
      // -inf entries; sinks from -1e4 to 1e4.
      {Feature::kSoftcap, 2, 0, 4,
       [](Problem& p, int k, std::mt19937_64&) {
         p.modifiers.softcap = std::array{1.0, 5.0, 30.0, 300.0, 1e4}[k];
       }},
      {Feature::kAlibi, 2, 0, 1,
       [](Problem& p, int mixed, std::mt19937_64& rng) {
         const int h = p.shape.heads;
         for (int i = 0; i < h; ++i) {
           const float geometric = std::exp2(-8.0f * (i + 1) / h);  // the slopes of the ALiBi paper
           const float any[] = {-1.0f, -0.25f, 0.0f, 0.0625f, 0.5f, 1.0f, geometric};
           p.modifiers.alibi_slopes.push_back(mixed ? any[rng() % 7] : geometric);
         }
       }},
      {Feature::kBias, 2, 0, 2,
       [](Problem& p, int magnitude, std::mt19937_64& rng) {
         ScoreModifiers& m = p.modifiers;
         m.bias_per_batch = rng() % 2, m.bias_per_head = rng() % 2;
         const Shape& s = p.shape;
         m.bias.resize(std::size_t(m.bias_per_batch ? s.batch : 1) * (m.bias_per_head ? s.heads : 1) * s.q_len *
                       s.k_len);
         std::normal_distribution<float> normal(0.0f, std::array{1.0f, 10.0f, 100.0f}[magnitude]);
         for (float& x : m.bias) x = rng() % 10 == 0 ? -std::numeric_limits<float>::infinity() : normal(rng);
       }},
      {Feature::kSinks, 2, 0, 1,
       [](Problem& p, int, std::mt19937_64& rng) {
         const float values[] = {-1e4f, -100.0f, -10.0f, -1.0f, 0.0f, 1.0f, 10.0f, 100.0f, 1e4f};
         for (int i = 0; i < p.shape.heads; ++i) p.modifiers.sinks.push_back(values[rng() % 9]);
       }},
  });
  return table;
}

const TermGenerator* generator_of(Feature f) {
  for (const TermGenerator& g : term_generators())
    if (g.feature == f) return &g;
  return nullptr;
}

// A width the contract accepts, near `wanted` (even when RoPE needs it).
int fit_width(int wanted, const Contract& c, bool even) {
  if (!c.head_dims.empty()) {
    std::vector<int> dims;
    for (int d : c.head_dims)
      if (c.head_dim.contains(d) && (!even || d % 2 == 0)) dims.push_back(d);
    if (dims.empty()) dims = c.head_dims;
    std::sort(dims.begin(), dims.end());
    return dims[static_cast<std::size_t>(wanted - 1) % dims.size()];
  }
  int d = static_cast<int>(c.head_dim.clamp(wanted));
  if (even && d % 2 && c.head_dim.contains(d + 1))
    ++d;
  else if (even && d % 2 && c.head_dim.contains(d - 1))
    --d;
  return d;
}

// The classes of the large axes (docs/design.md#coverage-model): production head widths, head counts with each
// GQA ratio, batch sizes past the usual four.
constexpr int kProductionWidths[] = {64, 80, 96, 112, 128, 192, 256};
constexpr std::pair<int, int> kManyHeadPairs[] = {{12, 12}, {16, 16}, {16, 8},  {32, 8},
                                                  {64, 8},  {32, 32}, {64, 16}, {12, 3}};
constexpr int kLargeBatches[] = {5, 8, 12, 16};

// The regime's shape in place of the ordinary draw: (batch, heads, kv heads, Dk, Dv, longest length).
struct RegimeShape {
  int batch, heads, kv_heads, head_dim, value_dim, max_len;
};

std::optional<RegimeShape> regime_shape(const ProblemSpec& spec, const Capabilities& caps, const ProblemNeeds& needs,
                                        bool even) {
  const auto pick = static_cast<std::size_t>(spec.shape_class);
  const Contract& c = caps.contract;
  const auto regime = static_cast<ShapeRegime>(spec.shape_regime);
  // Small heads for the regimes that keep heads small: the accepted pair with the fewest heads.
  std::vector<std::pair<int, int>> small = head_configs(caps, needs);
  std::erase_if(small, [](auto hk) { return hk.first > 2; });
  auto pick_small = [&]() -> std::optional<std::pair<int, int>> {
    if (small.empty()) return std::nullopt;
    return small[static_cast<std::size_t>(spec.head_config) % small.size()];
  };
  auto small_width = [&](int wanted) { return fit_width(1 + (wanted - 1) % 16, c, even); };
  switch (regime) {
    case ShapeRegime::kOrdinary:
      return std::nullopt;
    case ShapeRegime::kProductionWidth: {
      const auto hk = pick_small();
      if (!hk) return std::nullopt;
      // Dk from the class; Dv the same, or (1 time in 4, where the contract allows) another production width.
      // Three draws in eight (shape_class 36..56) take an unlisted width instead (a kernel wrong at
      // 48 alone was never drawn): half of them a multiple of 16 up to 256, a quarter a multiple of
      // 8, a quarter any width in [10, 256].
      const std::uint64_t mix =
          pick * 7919u + std::uint64_t(spec.head_dim) * 104729u + std::uint64_t(spec.value_dim) * 1299709u;
      const int unlisted = mix % 2   ? 16 * static_cast<int>(1 + mix / 4 % 16)
                           : mix % 4 ? 8 * static_cast<int>(1 + mix / 4 % 32)
                                     : 10 + static_cast<int>(mix / 4 % 247);
      const int wanted = pick >= 36 ? unlisted + (even ? unlisted % 2 : 0) : kProductionWidths[pick % 7];
      const int dk = c.accepts_head_dim(wanted) ? wanted : fit_width(wanted, c, even);
      const int other = kProductionWidths[(pick + 1 + static_cast<std::size_t>(spec.value_dim)) % 7];
      const int dv = c.fit_value_dim(spec.value_dim % 4 ? dk : other, dk);
      return RegimeShape{static_cast<int>(c.batch.clamp(1 + spec.batch % 2)), hk->first, hk->second, dk, dv, 33};
    }
    case ShapeRegime::kManyHeads: {
      auto accepted = [&](std::pair<int, int> hk) {
        return c.heads.contains(hk.first) && (hk.second == hk.first || caps.declares(Feature::kGqa)) &&
               !(needs.gqa && hk.second == hk.first);
      };
      std::vector<std::pair<int, int>> pairs;
      for (auto hk : kManyHeadPairs)
        if (accepted(hk)) pairs.push_back(hk);
      if (pairs.empty()) return std::nullopt;
      // The class's own pair when accepted, else one the contract takes.
      const auto [h, kv] = accepted(kManyHeadPairs[pick % 8]) ? kManyHeadPairs[pick % 8] : pairs[pick % pairs.size()];
      const int dk = small_width(spec.head_dim);
      const int dv = c.fit_value_dim(1 + (spec.value_dim - 1) % 16, dk);
      return RegimeShape{static_cast<int>(c.batch.clamp(1)), h, kv, dk, dv, 17};
    }
    case ShapeRegime::kLargeBatch: {
      const auto hk = pick_small();
      if (!hk) return std::nullopt;
      const int dk = small_width(spec.head_dim);
      const int dv = c.fit_value_dim(1 + (spec.value_dim - 1) % 16, dk);
      const int batch = static_cast<int>(c.batch.clamp(kLargeBatches[pick % 4]));
      return RegimeShape{batch, hk->first, hk->second, dk, dv, 17};
    }
  }
  return std::nullopt;
}

// An accepted Dv other than Dk = dk, the nearest below it where the contract allows (the "Dk != Dv"
// class); dk itself when the contract accepts no other.
int value_dim_apart(const Contract& c, int dk) {
  int dv = c.fit_value_dim(dk == 1 ? 2 : dk - 1, dk);
  for (int x : c.value_dims)
    if (dv == dk && x != dk && c.accepts_value_dim(x, dk)) dv = x;
  return dv != dk ? dv : c.fit_value_dim(dk + 1, dk);
}

// The shape a problem is being built with, before the contract's final clamps.
struct DrawnShape {
  int batch, heads, kv_heads, head_dim, value_dim, q_len, k_len;
};

// Bends a draw into a forced coverage class (coverage_model.h). Features first, then the shape;
// the caller checks that the problem landed in the class (a contract or a property's needs may
// not let it).
void force_features(const std::vector<std::string>& force, const Capabilities& caps, const ProblemNeeds& needs,
                    FeatureSet& on) {
  for (const std::string& cls : force) {
    const std::string axis = axis_of(cls), value = value_of(cls);
    const FeatureKind kind = axis == "mask" ? FeatureKind::kMaskTerm : FeatureKind::kModifier;
    if (axis != "mask" && axis != "modifier") continue;
    if (value == "none")
      on = on.minus(FeatureSet::of_kind(kind));
    else if (const auto f = feature_named(value);
             f && caps.declares(*f) && !(needs.position_free && info(*f).positional))
      on.insert(*f);
  }
}

// Bends a draw into a declared path's predicate (a top-up of that path): its features first, then
// its ranges and multiples. The caller discards what still misses it (the contract may not allow).
void bend_features_into_path(const PathPredicate& path, const Capabilities& caps, FeatureSet& on) {
  on = (on | (path.required & caps.features)).minus(path.excluded);
  if (path.no_mask) on = on.minus(FeatureSet::of_kind(FeatureKind::kMaskTerm));
}

void bend_shape_into_path(const PathPredicate& path, DrawnShape& d) {
  // A path with a key tile of its own: every other draw a length at its first three tiles' edges
  // (the drawn lengths know only the contract's tile).
  if (const int t = path.key_tile; t > 1 && d.k_len % 2 == 0) {
    const int edges[] = {t - 1, t, t + 1, 2 * t + 1, 3 * t, 3 * t + 1};
    d.k_len = edges[static_cast<std::size_t>(d.k_len / 2) % std::size(edges)];
  }
  auto multiple = [](int x, int m, const Range& r, bool not_multiple = false) {
    if (m <= 0) return x;
    if (not_multiple) return x % m != 0 ? x : static_cast<int>(r.contains(x + 1) ? x + 1 : x - 1);
    const int up = (x + m - 1) / m * m;
    return r.contains(up) ? up : x / m * m;
  };
  d.batch = static_cast<int>(path.batch.clamp(d.batch));
  const int heads = static_cast<int>(path.heads.clamp(d.heads));
  if (heads != d.heads) d.kv_heads = heads % d.kv_heads == 0 ? d.kv_heads : heads;
  d.heads = heads;
  d.q_len = static_cast<int>(path.q_len.clamp(d.q_len));
  d.k_len =
      multiple(static_cast<int>(path.k_len.clamp(d.k_len)), path.k_len_multiple, path.k_len, path.k_len_not_multiple);
  d.head_dim = multiple(static_cast<int>(path.head_dim.clamp(d.head_dim)), path.head_dim_multiple, path.head_dim);
  d.value_dim = multiple(static_cast<int>(path.value_dim.clamp(d.value_dim)), path.value_dim_multiple, path.value_dim);
}

// A forced value regime: the range edge and the ordinary one through the draw's magnitudes
// (before the data is drawn); subnormal inputs, or the keys no row sees poisoned (K rows for an
// even seed, V rows for an odd one), written into the drawn data (after).
void force_magnitudes(const std::vector<std::string>& force, ProblemSpec& spec) {
  for (const std::string& cls : force) {
    if (cls == "values: range edge")
      spec.logit_exponent = 6 + static_cast<int>(spec.data_seed % 25), spec.value_exponent = 24;
    if (cls == "values: ordinary") spec.logit_exponent = spec.value_exponent = 0;
  }
}

// Quantized K or V are drawn in the quantized domain: a group now and then all zero, scaled by a
// power of two across the range, or all at its largest code; an fp8 row now and then holds the
// format's largest value (e4m3 saturates there), or the contract's largest |V| when smaller. The
// caller fits the result.
void draw_quantized(std::vector<float>& values, int width, Scalar format, double limit, std::mt19937_64& rng) {
  if (!scaled(format) && format != Scalar::kE4M3 && format != Scalar::kE5M2) return;
  const int group = scaled(format) ? group_width(format, width) : width;
  const float largest =
      static_cast<float>(limit > 0 ? std::min(limit, info(format).max_finite) : info(format).max_finite);
  for (std::size_t row = 0; row < values.size(); row += width)
    for (int c0 = 0; c0 < width; c0 += group) {
      const std::span<float> g(&values[row + c0], std::min(group, width - c0));
      switch (rng() % 16) {
        case 0:
          std::fill(g.begin(), g.end(), 0.0f);
          break;
        case 1:  // within the format's range: e5m2 would overflow to infinity past it
          for (float& x : g) x = std::clamp(std::ldexp(x, static_cast<int>(rng() % 17) - 12), -largest, largest);
          break;
        case 2:
          if (scaled(format))
            for (float& x : g) x = std::copysign(std::fabs(g[0]), rng() % 2 ? x : -x);
          else
            g[rng() % g.size()] = rng() % 2 ? largest : -largest;
          break;
        default:
          break;
      }
    }
}

void force_values(const std::vector<std::string>& force, const Capabilities& caps, std::uint64_t seed, Problem& p) {
  for (const std::string& cls : force) {
    if (cls == "values: subnormal") {
      auto tiny = [&](std::vector<float>& xs,
                      Scalar format) {  // every third input, half or a quarter of the smallest normal
        const double normal = info(format).min_normal;
        for (std::size_t e = seed % 3; e < xs.size(); e += 3)
          xs[e] = round_to(static_cast<float>(normal * (e % 2 ? 0.5 : -0.25)), format);
      };
      tiny(p.q, p.storage.q), tiny(p.k, p.storage.k), tiny(p.v, p.storage.v);
    }
    if (cls == "values: poison")
      poison(p, unseen_keys(p, reference_mask(p)), seed % 2 ? Poisoned::kValues : Poisoned::kKeys, caps);
  }
}

void force_shape(const std::vector<std::string>& force, const ProblemSpec& spec, const Capabilities& caps,
                 const ProblemNeeds& needs, bool even, DrawnShape& d) {
  const Contract& c = caps.contract;
  const auto pick = static_cast<std::size_t>(spec.shape_class);
  int longest = 0;  // a large axis keeps sequences short, as the regimes do (0: no limit)
  auto cap = [&](int len) { longest = longest ? std::min(longest, len) : len; };
  // Head pairs the class allows (all forced head and group classes at once).
  std::vector<std::pair<int, int>> pairs = head_configs(caps, needs);
  for (auto hk : kManyHeadPairs)
    if (c.heads.contains(hk.first) && (hk.second == hk.first || caps.declares(Feature::kGqa)) &&
        !(needs.gqa && hk.first == hk.second))
      pairs.push_back(hk);
  bool heads_forced = false;
  for (const std::string& cls : force) {
    const std::string axis = axis_of(cls), value = value_of(cls);
    if (axis == "heads" || axis == "group") {
      heads_forced = true;
      std::erase_if(pairs, [&](std::pair<int, int> hk) {
        const int group = hk.first / hk.second;
        if (axis == "group") return value == "1" ? group != 1 : value == "2" ? group != 2 : group < 4;
        return value == "1" ? hk.first != 1 : value == "2-8" ? hk.first < 2 || hk.first > 8 : hk.first <= 8;
      });
    } else if (axis == "width") {
      if (value == "production") {
        const int wanted = kProductionWidths[pick % 7];
        d.head_dim = c.accepts_head_dim(wanted) ? wanted : fit_width(wanted, c, even);
        d.value_dim = c.fit_value_dim(d.head_dim, d.head_dim);
        cap(33);
      } else {
        d.head_dim = fit_width(1 + (d.head_dim - 1) % 16, c, even);
        d.value_dim = value == "small" ? c.fit_value_dim(d.head_dim, d.head_dim) : value_dim_apart(c, d.head_dim);
      }
    } else if (axis == "batch") {
      d.batch = static_cast<int>(c.batch.clamp(value == "1"     ? 1
                                               : value == "2-4" ? 2 + spec.batch % 3
                                                                : kLargeBatches[pick % 4]));
      if (d.batch > 4) cap(17);
    } else if (axis == "queries" || axis == "keys") {
      const int declared = axis == "queries" ? c.query_tile : c.key_tile;
      const int t = declared > 1 ? declared : 32;  // the tile coverage_classes measures against
      int& len = axis == "queries" ? d.q_len : d.k_len;
      const int n = std::max(1, len / t);  // the drawn length's tiles: a path's long lengths stay long
      len = value == "Tq <= 4"        ? 1 + (len - 1) % 4
            : value == "below a tile" ? std::min(t - 1, (axis == "queries" ? 5 : 1) + (len - 1) % t)
            : value == "whole tiles"  ? n * t
                                      : n * t + 1 + (len - 1) % (t - 1);
    }
  }
  if (heads_forced && !pairs.empty()) {
    std::tie(d.heads, d.kv_heads) = pairs[static_cast<std::size_t>(spec.head_config) % pairs.size()];
    if (d.heads > 8) cap(17);
  }
  // A forced length class stays (a large axis at a tile's length is a pair to cover too).
  auto forced = [&](const char* axis) {
    return std::any_of(force.begin(), force.end(), [&](const std::string& cls) { return axis_of(cls) == axis; });
  };
  if (longest && !forced("queries")) d.q_len = 1 + (d.q_len - 1) % longest;
  if (longest && !forced("keys")) d.k_len = 1 + (d.k_len - 1) % longest;
}

// Which of ALiBi and a bias a draw drops for a contract that takes one or the other: the one the
// property, forced class or path does not need, else one from the seed (so each is still drawn).
Feature alibi_or_bias(const ProblemNeeds& needs, const ProblemSpec& spec) {
  for (Feature keep : {Feature::kAlibi, Feature::kBias}) {
    const Feature other = keep == Feature::kAlibi ? Feature::kBias : Feature::kAlibi;
    if (needs.path && needs.path->required.contains(keep)) return other;
    for (const std::string& cls : needs.force)
      if (axis_of(cls) == "modifier" && feature_named(value_of(cls)) == keep) return other;
  }
  return spec.mask_seed / 2 % 2 ? Feature::kAlibi : Feature::kBias;
}

}  // namespace

const std::vector<ShapeClass>& shape_classes() {
  static const std::vector<ShapeClass> table = [] {
    std::vector<ShapeClass> out;
    for (int i = 0; i < 7; ++i)
      out.push_back({ShapeRegime::kProductionWidth, i, "Dk " + std::to_string(kProductionWidths[i])});
    for (int i = 0; i < 8; ++i)
      out.push_back(
          {ShapeRegime::kManyHeads, i,
           "H " + std::to_string(kManyHeadPairs[i].first) + " / Hkv " + std::to_string(kManyHeadPairs[i].second)});
    for (int i = 0; i < 4; ++i) out.push_back({ShapeRegime::kLargeBatch, i, "B " + std::to_string(kLargeBatches[i])});
    return out;
  }();
  return table;
}

std::vector<std::string> shape_classes_of(const Problem& p) {
  const Shape& s = p.shape;
  std::vector<std::string> out;
  for (const ShapeClass& k : shape_classes()) {
    const bool member = k.regime == ShapeRegime::kProductionWidth ? s.head_dim == kProductionWidths[k.index]
                        : k.regime == ShapeRegime::kManyHeads
                            ? std::pair{s.heads, s.kv_heads} == kManyHeadPairs[k.index]
                            : k.regime == ShapeRegime::kLargeBatch && s.batch == kLargeBatches[k.index];
    if (member) out.push_back(k.name);
  }
  return out;
}

bool shape_class_fits(const ShapeClass& k, const Capabilities& caps, const ProblemNeeds& needs) {
  const Contract& c = caps.contract;
  std::vector<std::pair<int, int>> small = head_configs(caps, needs);
  const bool small_heads = std::any_of(small.begin(), small.end(), [](auto hk) { return hk.first <= 2; });
  switch (k.regime) {
    case ShapeRegime::kOrdinary:
      return true;
    case ShapeRegime::kProductionWidth:
      return small_heads && c.accepts_head_dim(kProductionWidths[k.index]);
    case ShapeRegime::kManyHeads: {
      const auto [h, kv] = kManyHeadPairs[k.index];
      return c.heads.contains(h) && (kv == h || caps.declares(Feature::kGqa)) && !(needs.gqa && kv == h);
    }
    case ShapeRegime::kLargeBatch:
      return small_heads && c.batch.contains(kLargeBatches[k.index]);
  }
  return false;
}

const char* to_string(ShapeRegime r) {
  switch (r) {
    case ShapeRegime::kOrdinary:
      return "ordinary";
    case ShapeRegime::kProductionWidth:
      return "production width";
    case ShapeRegime::kManyHeads:
      return "many heads";
    case ShapeRegime::kLargeBatch:
      return "large batch";
  }
  return "?";
}

Problem build_problem(const ProblemSpec& given, const Capabilities& caps, const ProblemNeeds& needs) {
  const Contract& c = caps.contract;
  ProblemSpec spec = given;
  if (needs.shape_class) std::tie(spec.shape_regime, spec.shape_class) = *needs.shape_class;
  Problem p;
  // Features first (the shape depends on some): declared, chosen, and what the property needs.
  FeatureSet on;
  for (const TermGenerator& g : term_generators()) {
    const FeatureInfo& f = info(g.feature);
    const bool allowed = caps.declares(g.feature) && !(needs.position_free && f.positional);
    if (allowed && spec.terms[static_cast<std::size_t>(g.feature)].on) on.insert(g.feature);
  }
  force_features(needs.force, caps, needs, on);
  if (needs.path) bend_features_into_path(*needs.path, caps, on);
  if (needs.rope && caps.declares(Feature::kRope)) on.insert(Feature::kRope);
  if (c.causal_required) on.insert(Feature::kCausal);
  if (c.alibi_excludes_bias && on.contains(Feature::kAlibi) && on.contains(Feature::kBias))
    on.erase(alibi_or_bias(needs, spec));
  const FeatureSet masks = caps.features & FeatureSet::of_kind(FeatureKind::kMaskTerm);
  if (needs.masked && (on & masks).empty() && !masks.empty()) {
    // Pick a declared mask term from the seed, preferring position-free ones when required.
    std::vector<Feature> candidates;
    for (Feature f : masks.members())
      if (!(needs.position_free && info(f).positional)) candidates.push_back(f);
    if (!candidates.empty()) on.insert(candidates[spec.mask_seed % candidates.size()]);
  }

  std::vector<std::pair<int, int>> heads = head_configs(caps, needs);
  if (heads.empty()) heads.push_back({int(caps.contract.heads.clamp(1)), int(caps.contract.heads.clamp(1))});
  auto [h, kv] = heads[static_cast<std::size_t>(spec.head_config) % heads.size()];
  int head_dim = fit_width(spec.head_dim, c, on.contains(Feature::kRope));
  int value_dim = c.fit_value_dim(spec.value_dim, head_dim);
  int batch = static_cast<int>(c.batch.clamp(spec.batch));
  int q_len = spec.q_len, k_len = spec.k_len;
  if (!needs.shapes.empty()) {  // a path's shapes (top-ups): the shape that reached it
    const Shape& base = needs.shapes[static_cast<std::size_t>(spec.q_len + 7 * spec.k_len) % needs.shapes.size()];
    batch = base.batch, h = base.heads, kv = base.kv_heads, q_len = base.q_len, k_len = base.k_len;
    // Its widths half the time (a path may need Dv % 16 == 0); otherwise the drawn ones, cheaper.
    if (spec.value_dim % 2 == 0) head_dim = base.head_dim, value_dim = base.value_dim;
  } else if (!needs.lengths.empty()) {  // given lengths: the ordinary shape around them
    const auto [tq, tk] = needs.lengths[static_cast<std::size_t>(spec.q_len + 7 * spec.k_len) % needs.lengths.size()];
    q_len = tq, k_len = tk;
  } else if (const auto large = regime_shape(spec, caps, needs, on.contains(Feature::kRope))) {
    batch = large->batch, h = large->heads, kv = large->kv_heads;
    head_dim = large->head_dim, value_dim = large->value_dim;
    q_len = 1 + (q_len - 1) % large->max_len, k_len = 1 + (k_len - 1) % large->max_len;
  }
  if (!needs.force.empty() || needs.path) {
    DrawnShape d{batch, h, kv, head_dim, value_dim, q_len, k_len};
    if (!needs.force.empty()) force_shape(needs.force, spec, caps, needs, on.contains(Feature::kRope), d);
    if (needs.path) bend_shape_into_path(*needs.path, d);
    std::tie(batch, h, kv, head_dim, value_dim, q_len, k_len) =
        std::tie(d.batch, d.heads, d.kv_heads, d.head_dim, d.value_dim, d.q_len, d.k_len);
  }
  if (needs.several_slices && batch * h == 1) batch = static_cast<int>(c.batch.clamp(2));
  k_len = static_cast<int>(c.k_len.clamp(k_len));
  if (needs.max_keys > 0) k_len = std::min(k_len, needs.max_keys);
  // Bottom-right causal with q_offset >= 0 (a decode session): Tq <= Tk.
  if (c.causal_required && !c.q_offset.unlimited() && c.q_offset.min >= 0) q_len = std::min(q_len, k_len);
  if (c.self_attention_only) q_len = k_len = c.square_length(std::min(q_len, k_len));
  p.shape = {batch, h, kv, static_cast<int>(c.q_len.clamp(q_len)), k_len, head_dim, value_dim};
  if (on.contains(Feature::kRope) && head_dim % 2) on.erase(Feature::kRope);  // no even width accepted

  if (!c.causal_required && !c.self_attention_only) {
    if (spec.q_offset_mode == 1) p.q_offset = 0;
    if (spec.q_offset_mode == 2) p.q_offset = spec.q_offset_value;
    if (!c.q_offset.unlimited() && !c.q_offset.contains(p.effective_q_offset()))
      p.q_offset = c.q_offset.clamp(p.effective_q_offset());
  }
  std::mt19937_64 mask_rng(spec.mask_seed);
  for (Feature f : on.members())
    if (const TermGenerator* g = generator_of(f)) {
      const int param = std::clamp(spec.terms[static_cast<std::size_t>(f)].param, g->param_lo, g->param_hi);
      if (g->apply)
        g->apply(p, param, mask_rng);
      else
        p.mask.*info(f).parameter = param;
    }
  c.fit_alibi_slopes(p);

  const double scales[] = {0.0, 1.0, 0.05, -0.7, 3.0};
  if (spec.scale_mode > 0 && !c.default_scale_only) p.scale = scales[spec.scale_mode];
  // Inputs in the kernel's storage formats; an f32 kernel also gets inputs that happen to be
  // bf16 or f16 values now and then.
  Scalar drawn = static_cast<Scalar>(spec.input_precision);
  for (const std::string& cls : needs.force)
    if (axis_of(cls) == "inputs") parse_scalar(value_of(cls), drawn);
  const Precision& precision = caps.precision;
  p.storage = {precision.q == Scalar::kF32 ? drawn : precision.q, precision.k == Scalar::kF32 ? drawn : precision.k,
               precision.v == Scalar::kF32 ? drawn : precision.v,
               precision.bias == Scalar::kF32 ? drawn : precision.bias};
  for (float& x : p.modifiers.bias) x = round_to(x, p.storage.bias);  // drawn far inside every format's range

  p.resize_buffers();
  force_magnitudes(needs.force, spec);
  std::mt19937_64 data_rng(spec.data_seed);
  std::uniform_real_distribution<double> unit(-std::sqrt(3.0), std::sqrt(3.0));
  // Logits ~ |scale| * Dk * qk_mag^2; choose qk_mag so that they are ~ 10^logit_exponent. Each buffer's
  // magnitude sweeps up to the edge of its own format's range (uniform values reach sqrt(3) x it).
  const double qk = std::pow(10.0, spec.logit_exponent / 2.0) * std::pow(double(head_dim), -0.25);
  const double vm = std::pow(10.0, spec.value_exponent);
  // An input the kernel rounds on entry stays within that format's range too.
  auto fill = [&](std::vector<float>& values, double magnitude, Scalar format, Scalar entry) {
    magnitude = std::min(magnitude, largest_input(format, entry) / 2);
    for (float& x : values) x = round_to(static_cast<float>(unit(data_rng) * magnitude), format);
  };
  fill(p.q, qk, p.storage.q, precision.q_entry);
  fill(p.k, qk, p.storage.k, precision.k_entry);
  fill(p.v, c.max_abs_value > 0 ? std::min(vm, c.max_abs_value / 2) : vm, p.storage.v, precision.v_entry);
  // Quantized groups stay within the format the kernel rounds them to on entry (half of it for a
  // scaled format: a group's scale rounds up now and then; an fp8 row reaches its largest value),
  // and V within the contract.
  auto entry_limit = [](Scalar stored, Scalar entry) {
    return largest_input(stored, entry) / (scaled(stored) ? 2 : 1);
  };
  const double v_limit =
      std::min(c.max_abs_value > 0 ? c.max_abs_value : INFINITY, entry_limit(p.storage.v, precision.v_entry));
  draw_quantized(p.k, head_dim, p.storage.k, entry_limit(p.storage.k, precision.k_entry), data_rng);
  draw_quantized(p.v, p.shape.value_dim, p.storage.v, v_limit, data_rng);
  fit_to_declared_range(p, caps);  // logits and P.V sums the declared arithmetic holds
  // K and V in a scaled format a group at a time, before the forced values (a poison reads the
  // problem's mask, which checks it) and after them (a subnormal group refitted).
  p.fit_to_storage();
  force_values(needs.force, caps, spec.data_seed, p);
  p.fit_to_storage();
  return p;
}

rc::Gen<ProblemSpec> gen_spec(const Capabilities& caps, const ProblemNeeds& /*needs (used by build_problem)*/) {
  const auto inRange = choice;
  using rc::gen::set;
  const rc::Gen<std::array<TermChoice, kFeatureCount>> terms = rc::gen::exec([] {
    std::array<TermChoice, kFeatureCount> out{};
    for (const TermGenerator& g : term_generators())
      out[static_cast<std::size_t>(g.feature)] = {*sometimes(g.in_ten), *choice(g.param_lo, g.param_hi + 1)};
    return out;
  });
  return rc::gen::build<ProblemSpec>(
      // Ordinary 5 times in 10, production widths 3, many heads 1, large batches 1.
      set(&ProblemSpec::shape_regime, mostly_zero(5, 10, [](int x) { return x < 3 ? 1 : x - 1; })),
      set(&ProblemSpec::shape_class, inRange(0, 56)), set(&ProblemSpec::batch, inRange(1, 4)),
      set(&ProblemSpec::head_config, inRange(0, 8)), set(&ProblemSpec::q_len, gen_length(caps.contract.query_tile)),
      set(&ProblemSpec::k_len, gen_length(caps.contract.key_tile)), set(&ProblemSpec::head_dim, gen_width()),
      set(&ProblemSpec::value_dim, gen_width()), set(&ProblemSpec::terms, terms),
      set(&ProblemSpec::q_offset_mode, mostly_zero(6, 9, [](int x) { return x < 2 ? 1 : 2; })),
      set(&ProblemSpec::q_offset_value, inRange(-8, 80)),
      set(&ProblemSpec::input_precision, mostly_zero(6, 8, [](int x) { return 1 + x; })),
      // Logits mostly near 1, sometimes 1e-3 to 1e4, sometimes up to 1e30.
      set(&ProblemSpec::logit_exponent, mostly_zero(40, 90, [](int x) { return x < 30 ? x % 8 - 3 : 4 + x % 27; })),
      set(&ProblemSpec::value_exponent, mostly_zero(80, 90, [](int x) { return -30 + 6 * x; })),
      set(&ProblemSpec::scale_mode, mostly_zero(30, 34, [](int x) { return 1 + x; })),
      set(&ProblemSpec::mask_seed, rc::gen::arbitrary<std::uint64_t>()),
      set(&ProblemSpec::data_seed, rc::gen::arbitrary<std::uint64_t>()));
}

std::vector<std::string> labels_of(const Problem& p) {
  std::vector<std::string> labels = features_used_by(p).names();
  const Shape& s = p.shape;
  if (s.head_dim >= 64) labels.push_back("Dk >= 64");
  if (s.heads > 8) labels.push_back("H > 8");
  if (s.batch > 4) labels.push_back("B > 4");
  labels.push_back(s.q_len < s.k_len ? "tq<tk" : s.q_len > s.k_len ? "tq>tk" : "tq=tk");
  for (Scalar s : {p.storage.q, p.storage.k, p.storage.v})
    if (s != Scalar::kF32) return labels.push_back(std::string(to_string(s)) + " inputs"), labels;
  return labels;
}

}  // namespace attest
