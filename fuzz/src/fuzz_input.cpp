#include "fuzz_input.h"

#include <fuzzer/FuzzedDataProvider.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <tuple>
#include <utility>

namespace attest::fuzz {
namespace {

constexpr std::pair<int, int> kHeadPairs[] = {{1, 1}, {2, 2}, {2, 1}, {4, 2}, {4, 1}, {3, 1}, {4, 4}, {3, 3}};

// Reads the controls in a fixed order; the encoder below writes them in the same order.
template <typename Source>
void visit_controls(Source& s, Controls& c, Flavor flavor) {
  s.integral(c.batch, 1, 2);
  s.integral(c.head_config, 0, 7);
  s.integral(c.q_len, 1, kMaxLength);
  s.integral(c.k_len, 1, kMaxLength);
  s.integral(c.head_dim, 1, kMaxWidth);
  s.integral(c.value_dim, 1, kMaxWidth);
  int flags = c.flags;
  s.integral(flags, 0, 0xffff);
  c.flags = static_cast<std::uint16_t>(flags);
  s.integral(c.window, 1, kMaxLength);
  s.integral(c.q_offset, -8, 48);
  s.integral(c.qk_exponent, -40, 18);
  s.integral(c.v_exponent, -40, 36);
  s.integral(c.specials, 0, 255);
  s.integral(c.scale_choice, 0, 7);
  c.kv_valid.resize(c.batch);
  c.q_valid.resize(c.batch);
  for (int b = 0; b < c.batch; ++b) {
    s.integral(c.kv_valid[b], 0, c.k_len);
    s.integral(c.q_valid[b], 0, c.q_len);
  }
  s.u64(c.segment_bits);
  s.integral(c.explicit_density, 0, 255);
  s.u32(c.explicit_seed);
  if (flavor == Flavor::kDecode) {
    int count = static_cast<int>(c.chunks.size());
    s.integral(count, 0, 16);
    c.chunks.resize(count);
    for (int& n : c.chunks) s.integral(n, 1, kMaxLength);
  }
  if (!(c.flags & kExtended)) return;  // an input without the extension ends here, as before it
  int extended = c.extended;
  s.integral(extended, 0, 255);
  c.extended = static_cast<std::uint8_t>(extended);
  s.integral(c.q_size, 0, 255);
  s.integral(c.k_size, 0, 255);
  s.integral(c.window_size, 0, 255);
  c.kv_valid_size.resize(c.batch);
  c.q_valid_size.resize(c.batch);
  for (int b = 0; b < c.batch; ++b) {
    s.integral(c.kv_valid_size[b], 0, 255);
    s.integral(c.q_valid_size[b], 0, 255);
  }
  s.integral(c.softcap, 0, 255);
  s.integral(c.slope_exponent, 0, 255);
  s.integral(c.slope_kinds, 0, 255);
  s.integral(c.bias_exponent, 0, 255);
  s.integral(c.bias_minus_inf, 0, 255);
  s.u32(c.bias_seed);
  s.integral(c.sink_exponent, 0, 255);
  s.integral(c.sink_kinds, 0, 255);
  if (c.extended & kMoreTerms) s.integral(c.integer_terms, 0, 255);
}

// The flag bits that turned window and chunk on before the integer_terms control existed.
std::uint16_t legacy_flag(Feature term) {
  return term == Feature::kWindow ? kWindow : term == Feature::kChunk ? kChunk : 0;
}

// Reads controls with FuzzedDataProvider (integers come from the end of the input).
struct ProviderSource {
  FuzzedDataProvider& fdp;
  void integral(int& x, int lo, int hi) { x = fdp.ConsumeIntegralInRange<int>(lo, hi); }
  void u64(std::uint64_t& x) { x = fdp.ConsumeIntegral<std::uint64_t>(); }
  void u32(std::uint32_t& x) { x = fdp.ConsumeIntegral<std::uint32_t>(); }
};

// Writes the bytes FuzzedDataProvider will consume, in consumption order (reversed at the end).
struct EncoderSink {
  std::vector<std::uint8_t> consumed;  // first consumed first
  void bytes_for(std::uint64_t offset, std::uint64_t range, int bits) {
    int n = 0;
    for (int shift = 0; shift < bits && (range >> shift) > 0; shift += 8) ++n;
    for (int i = n - 1; i >= 0; --i) consumed.push_back(static_cast<std::uint8_t>(offset >> (8 * i)));
  }
  void integral(int& x, int lo, int hi) {
    bytes_for(static_cast<std::uint64_t>(x - lo), static_cast<std::uint64_t>(hi - lo), 32);
  }
  void u64(std::uint64_t& x) { bytes_for(x, std::numeric_limits<std::uint64_t>::max(), 64); }
  void u32(std::uint32_t& x) { bytes_for(x, std::numeric_limits<std::uint32_t>::max(), 32); }
};

// The values a special-value slot may take: zeros, subnormals, huge, the float edge.
float special(std::uint32_t pick) {
  static const float values[] = {0.0f, -0.0f, 1e-40f, -1e-45f, 1e-30f, 1e30f, -1e30f, 3e38f, -3e38f, 1e19f, 65504.0f};
  return values[pick % (sizeof values / sizeof values[0])];
}

// The data bytes as int16 values; past their end, a generator seeded by them keeps going.
class ValueStream {
 public:
  explicit ValueStream(std::vector<std::uint8_t> bytes) : bytes_(std::move(bytes)) {
    for (std::uint8_t b : bytes_) state_ = state_ * 31 + b;
  }
  std::int16_t next() {
    if (at_ + 1 < bytes_.size()) {
      const std::int16_t x = static_cast<std::int16_t>(bytes_[at_] | (bytes_[at_ + 1] << 8));
      at_ += 2;
      return x;
    }
    state_ = state_ * 6364136223846793005ULL + 1442695040888963407ULL;
    return static_cast<std::int16_t>(state_ >> 48);
  }

 private:
  std::vector<std::uint8_t> bytes_;
  std::size_t at_ = 0;
  std::uint64_t state_ = 0x9e3779b97f4a7c15ULL;
};

void fill(std::vector<float>& buffer, ValueStream& values, double magnitude, int specials, std::uint32_t salt,
          Scalar precision) {
  std::uint32_t h = salt;
  for (float& x : buffer) {
    x = static_cast<float>(values.next() / 8192.0 * magnitude);
    h = h * 2654435761u + 12345u;
    if (specials && (h >> 24) < static_cast<std::uint32_t>(specials) / 8) x = special(h >> 8);
    x = round_to(x, precision);
    if (!std::isfinite(x)) x = 0.0f;  // fp16 rounding of a huge value: keep inputs finite
  }
}

// splitmix64: the extended controls' seeds expand into bias entries with it.
std::uint64_t mix(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// Two bits of a per-head control (at most 4 heads: 8 bits).
int kind_of(int kinds, int h) { return kinds >> (2 * (h % 4)) & 3; }

// The score modifiers an extended input asks for, those the kernel declares only.
void draw_modifiers(Problem& p, const Controls& c, const Reach& reach, Flavor flavor) {
  const Shape& s = p.shape;
  ScoreModifiers& md = p.modifiers;
  auto wanted = [&](Extended bit, Feature f) { return (c.extended & bit) && reach.modifiers.contains(f); };
  if (wanted(kSoftcapOn, Feature::kSoftcap)) md.softcap = std::pow(10.0, 4.0 * c.softcap / 255.0);
  if (wanted(kAlibiOn, Feature::kAlibi)) {
    const float magnitude = std::exp2(c.slope_exponent / 32.0f - 6.0f);
    for (int h = 0; h < s.heads; ++h) {
      const float geometric = magnitude * std::exp2(-8.0f * (h + 1) / s.heads);  // the ALiBi paper's slopes
      const float slopes[] = {0.0f, geometric, -geometric, magnitude};
      md.alibi_slopes.push_back(slopes[kind_of(c.slope_kinds, h)]);
    }
  }
  // A bias is a prefill feature: decode sessions take none (decode_matches_prefill drops it).
  if (wanted(kBiasOn, Feature::kBias) && flavor != Flavor::kDecode) {
    md.bias_per_batch = c.extended & kBiasPerBatch;
    md.bias_per_head = c.extended & kBiasPerHead;
    md.bias.resize(std::size_t(md.bias_per_batch ? s.batch : 1) * (md.bias_per_head ? s.heads : 1) * s.q_len * s.k_len);
    const double magnitude = std::pow(10.0, 5.0 * c.bias_exponent / 255.0 - 1.0);
    std::uint64_t state = c.bias_seed;
    for (float& x : md.bias) {
      const std::uint64_t r = mix(state);
      x = static_cast<int>(r & 0xff) < c.bias_minus_inf
              ? -std::numeric_limits<float>::infinity()
              : static_cast<float>(magnitude * (static_cast<double>(r >> 11) / 0x1p53 * 2.0 - 1.0));
    }
  }
  if (wanted(kSinksOn, Feature::kSinks)) {
    const float magnitude = static_cast<float>(std::pow(10.0, 6.0 * c.sink_exponent / 255.0 - 2.0));
    for (int h = 0; h < s.heads; ++h) {
      const float sinks[] = {0.0f, magnitude, -magnitude, -magnitude * (h + 1) / s.heads};
      md.sinks.push_back(std::clamp(sinks[kind_of(c.sink_kinds, h)], -1e4f, 1e4f));
    }
  }
}

}  // namespace

Reach reach_of(const Capabilities& caps) {
  // Past this a single input takes seconds (the exact reference is O(Tq Tk)): a kernel with larger
  // tiles is fuzzed below its second tile, and says so by its tiles.
  constexpr int kLongest = 1026;
  const int qt = caps.contract.query_tile, kt = caps.contract.key_tile;
  Reach r;
  r.query_tile = qt > 0 ? qt : kt > 0 ? kt : kDefaultTile;
  r.key_tile = kt > 0 ? kt : qt > 0 ? qt : kDefaultTile;
  r.max_length = std::clamp(2 * std::max(r.query_tile, r.key_tile) + 2, kMaxLength, kLongest);
  r.modifiers = caps.features & FeatureSet::of_kind(FeatureKind::kModifier);
  return r;
}

// m * tile + delta (u = 3 (m - 1) + delta + 1, m taken modulo the whole tiles below `below`), in [lo, hi].
int tile_edge(int u, int tile, int below, int lo, int hi) {
  const int whole = std::max(1, below / tile);
  return std::clamp((1 + (u / 3) % whole) * tile + u % 3 - 1, lo, hi);
}

int extended_length(int pick, int small, int tile, int cap) {
  switch (pick % 4) {
    case 2:
      return tile_edge(pick / 4, tile, cap - 1, 1, cap);
    case 3:
      return 1 + (pick / 4 * kMaxLength + small - 1) % cap;
    default:
      return std::min(small, cap);
  }
}

int valid_length(int pick, int small_valid, int small_len, int len, int tile) {
  switch (pick % 4) {
    case 0:
      return small_valid >= small_len ? len : static_cast<int>(static_cast<long long>(small_valid) * len / small_len);
    case 1:
      return std::min(small_valid, len);
    case 2:
      return tile_edge(pick / 4, tile, len, 0, len);
    default:
      return (pick / 4 * (kMaxLength + 1) + small_valid) % (len + 1);
  }
}

Controls decode_controls(const std::uint8_t* data, std::size_t size, Flavor flavor) {
  FuzzedDataProvider fdp(data, size);
  Controls c;
  ProviderSource source{fdp};
  visit_controls(source, c, flavor);
  return c;
}

FuzzCase decode_input(const std::uint8_t* data, std::size_t size, Flavor flavor) {
  static const Reach none = reach_of(Capabilities{});
  return decode_input(data, size, flavor, none);
}

FuzzCase decode_input(const std::uint8_t* data, std::size_t size, Flavor flavor, const Reach& reach) {
  FuzzedDataProvider fdp(data, size);
  Controls c;
  ProviderSource source{fdp};
  visit_controls(source, c, flavor);
  ValueStream values(fdp.ConsumeRemainingBytes<std::uint8_t>());
  const bool extended = c.flags & kExtended;

  FuzzCase out;
  Problem& p = out.problem;
  auto [heads, kv_heads] = kHeadPairs[c.head_config];
  const bool rope = c.flags & kRope;
  const int head_dim = rope ? c.head_dim + c.head_dim % 2 : c.head_dim;
  const int k_len = extended ? extended_length(c.k_size, c.k_len, reach.key_tile, reach.max_length) : c.k_len;
  const int q_len = flavor == Flavor::kDecode ? k_len  // decode replays a causal prefill of Tk tokens
                    : extended                ? extended_length(c.q_size, c.q_len, reach.query_tile, reach.max_length)
                                              : c.q_len;
  const int window = extended ? extended_length(c.window_size, c.window, reach.key_tile, reach.max_length) : c.window;
  if (extended) {  // padding lengths over the decoded lengths
    for (int b = 0; b < c.batch; ++b) {
      c.kv_valid[b] = valid_length(c.kv_valid_size[b], c.kv_valid[b], c.k_len, k_len, reach.key_tile);
      c.q_valid[b] = valid_length(c.q_valid_size[b], c.q_valid[b], c.q_len, q_len, reach.query_tile);
    }
    // Long inputs run fewer slices: one batch entry, at most two heads (GQA kept), so that the
    // exact reference of one input stays in milliseconds.
    if (std::int64_t(c.batch) * heads * q_len * k_len > kSliceBudget) {
      c.batch = 1;
      c.kv_valid.resize(1), c.q_valid.resize(1);
      if (heads > 2) std::tie(heads, kv_heads) = kv_heads < heads ? std::pair{2, 1} : std::pair{2, 2};
    }
  }
  p.shape = {c.batch, heads, kv_heads, q_len, k_len, head_dim, c.value_dim};
  std::uint16_t flags = c.flags;
  const int known_terms = (1 << integer_mask_terms().size()) - 1;
  const int integer_terms = (c.extended & kMoreTerms) ? c.integer_terms & known_terms : 0;
  if (flavor == Flavor::kMasks && !integer_terms &&
      !(flags & (kCausal | kWindow | kChunk | kKeyPadding | kQueryPadding | kSegments | kExplicit)))
    flags |= kCausal | kKeyPadding;  // this target is about masks: never fuzz without one
  if (flavor == Flavor::kDecode) {
    flags = static_cast<std::uint16_t>((flags & (kWindow | kChunk | kRope)) | kCausal);
  }
  MaskSpec& m = p.mask;
  m.causal = flags & kCausal;
  const std::vector<const FeatureInfo*>& terms = integer_mask_terms();
  for (std::size_t k = 0; k < terms.size(); ++k)
    if ((flags & legacy_flag(terms[k]->feature)) || (integer_terms >> k & 1)) m.*terms[k]->parameter = window;
  if (flags & kOffsetTopLeft)
    p.q_offset = 0;
  else if (flags & kOffsetExplicit)
    p.q_offset = c.q_offset;
  if (flags & kKeyPadding) m.kv_valid = c.kv_valid;
  if (flags & kQueryPadding) {
    m.q_valid = c.q_valid;
    for (int& n : m.q_valid) n = std::min(n, p.shape.q_len);
  }
  if (flags & kSegments) {
    for (int b = 0; b < c.batch; ++b) {
      int qid = 0, kid = 0;
      // Bit t % 64 (only extended inputs are longer than 64).
      for (int t = 0; t < p.shape.q_len; ++t) m.q_segment.push_back(qid += (t && (c.segment_bits >> (t & 63) & 1)));
      for (int t = 0; t < p.shape.k_len; ++t)
        m.k_segment.push_back(kid += (t && (c.segment_bits >> ((63 - t) & 63) & 1)));
    }
  }
  if (flags & kExplicit) {
    std::uint32_t h = c.explicit_seed;
    m.explicit_mask.resize(std::size_t(c.batch) * p.shape.q_len * p.shape.k_len);
    for (auto& x : m.explicit_mask) {
      h = h * 1103515245u + 12345u;
      x = (h >> 16 & 0xff) >= static_cast<std::uint32_t>(c.explicit_density);
    }
  }
  p.rope.enabled = rope;
  const Scalar stored = (flags & kF16) ? Scalar::kF16 : (flags & kBf16) ? Scalar::kBF16 : Scalar::kF32;
  p.storage = {(flags & kKvStorageOnly) ? Scalar::kF32 : stored, stored, stored};

  const bool wide = flavor == Flavor::kOverflow;
  const int qk_exp = wide ? c.qk_exponent : std::clamp(c.qk_exponent, -6, 8);
  const int v_exp = wide ? c.v_exponent : std::clamp(c.v_exponent, -4, 4);
  const double scales[] = {0, 0, 0, 0, 1.0, 0.01, -0.5, wide ? 1e20 : 4.0};
  if (scales[c.scale_choice] != 0) p.scale = scales[c.scale_choice];
  p.resize_buffers();
  const int specials = wide ? c.specials : 0;
  fill(p.q, values, std::pow(10.0, qk_exp / 2.0), specials, 1, p.storage.q);
  fill(p.k, values, std::pow(10.0, qk_exp / 2.0), specials, 2, p.storage.k);
  fill(p.v, values, std::pow(10.0, v_exp / 2.0), specials, 3, p.storage.v);
  if (extended) draw_modifiers(p, c, reach, flavor);

  if (flavor == Flavor::kDecode) {  // chunk sizes summing to Tk, the last one taking the rest
    int left = p.shape.k_len;
    for (int n : c.chunks) {
      if (left == 0) break;
      out.chunks.push_back(std::min(n, left));
      left -= out.chunks.back();
    }
    if (left > 0) out.chunks.push_back(left);
  }
  return out;
}

std::vector<std::uint8_t> encode_input(const Controls& controls, const std::vector<std::int16_t>& values,
                                       Flavor flavor) {
  Controls c = controls;
  EncoderSink sink;
  visit_controls(sink, c, flavor);
  std::vector<std::uint8_t> out;
  for (std::int16_t v : values) {
    out.push_back(static_cast<std::uint8_t>(v & 0xff));
    out.push_back(static_cast<std::uint8_t>((v >> 8) & 0xff));
  }
  out.insert(out.end(), sink.consumed.rbegin(), sink.consumed.rend());
  return out;
}

}  // namespace attest::fuzz
