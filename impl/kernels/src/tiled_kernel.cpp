// The tiled kernel's algorithm in plain scalar code: online softmax over Br x Bc tiles,
// running max and sum per row, deferred normalization, no Tq x Tk buffer. With every switch
// off it is a correct kernel (tested as "tiled-scalar"); the `faults_` switches inject the bugs
// of impl/mutants/. The built-in "tiled" is the vectorized tiled_fast_kernel.cpp.
#include <limits>
#include <span>
#include <vector>

#include "attest/kernels/builtin_kernels.h"
#include "attest/kernels/faults.h"
#include "attest/model/quantized.h"
#include "backward_kernels.h"
#include "flush_subnormals.h"
#include "kernel_support.h"

namespace attest {
namespace {

using namespace kernels;

class TiledKernel final : public Kernel {
 public:
  TiledKernel(TiledConfig config, KernelFaults faults, std::string name)
      : cfg_(config), faults_(faults), name_(std::move(name)) {
    if (cfg_.block_q < 1 || cfg_.block_k < 1)
      throw std::invalid_argument("tiled kernel: block_q and block_k must be >= 1");
  }
  std::string name() const override { return name_; }
  Capabilities capabilities() const override {
    Capabilities c;
    c.features = c.features | FeatureSet::of_kind(FeatureKind::kModifier);
    c.contract.query_tile = cfg_.block_q;
    c.contract.key_tile = cfg_.block_k;
    c.precision = cfg_.precision;
    // The mutants' host declares a backward only for a backward mutant: a forward mutant's backward
    // would be correct code, certified again at every mutant's cost.
    if (cfg_.precision.all_f32() && backward_fault(faults_))
      c.features.insert(Feature::kBackward), c.deterministic_backward = true;
    // Likewise a merge only for a merge mutant.
    c.merge = merge_fault(faults_);
    c.packed = packed_fault(faults_);  // and a packed forward only for a packed mutant
    if (cfg_.declare_paths) {
      const long long any = 1LL << 40;
      if (cfg_.split_kv) c.paths.push_back({.path = "split-kv", .batch = {1, 1}, .q_len = {1, 4}, .k_len = {512, any}});
      c.paths.push_back({.path = "multi-tile", .k_len = {cfg_.block_k + 1, any}});
      c.paths.push_back({.path = "single-tile", .k_len = {1, cfg_.block_k}});
    }
    return c;
  }
  std::string last_path() const override { return path_; }
  void backward(const Problem& p, const BackwardInputs& in, const GradientSpans& out) const override {
    tiled_backward(p, in, out, cfg_.block_q, cfg_.block_k, faults_);
  }
  void merge(const MergeInputs& in, std::span<float> o, std::span<float> lse) const override {
    merge_states(in, o, lse, faults_);
  }
  void forward_packed(const PackedCall& call, std::span<float> o, std::span<float> lse) const override {
    packed_forward(call, o, lse, faults_);
  }

  void forward(const Problem& p, std::span<float> o, std::span<float> lse) const override {
    const FlushSubnormals flush(cfg_.precision.flush_subnormals);
    const KernelFaults& f = faults_;
    const Shape& s = p.shape;
    const Layout at{s};
    const MaskView mask(p);
    const ModifierView modifiers(p);
    const float scale = kernel_scale(p);
    const int br = cfg_.block_q, bc = cfg_.block_k, dk = s.head_dim, dv = s.value_dim;
    // A vectorised path for wide problems, as a real library had: its own bug in one feature pair.
    const bool wide = f.wide_path_unmasked_softcap && s.q_len >= 64 && dv % 16 == 0;
    const bool drop_partial = f.drop_partial_tile || (f.sinks_drop_partial_tile && modifiers.has_sinks()) ||
                              (wide && modifiers.has_softcap() &&
                               (features_used_by(p) & FeatureSet::of_kind(FeatureKind::kMaskTerm)).empty());
    // A split-KV path for decode-shaped calls, as libraries have: keys in splits of 256, merged.
    const bool split = (cfg_.split_kv || f.split_kv_drops_remainder) && s.batch == 1 &&
                       s.q_len <= (f.split_kv_for_tq_8 ? 8 : 4) && s.k_len >= 512;
    const int key_end = split && f.split_kv_drops_remainder ? s.k_len / kSplitKeys * kSplitKeys : s.k_len;
    path_ = wide ? "wide" : split ? "split-kv" : s.k_len > bc ? "multi-tile" : "single-tile";
    if (f.paths_named_by_shape)  // names that describe calls, not code: one of 17 by a hash of the shape
      path_ = "shape-" + std::to_string((s.batch * 31 + s.heads * 7 + s.q_len * 3 + s.k_len + s.head_dim) % 17);
    std::vector<float> q_tile(std::size_t(br) * dk);
    std::vector<float> k_tile(std::size_t(bc + 1) * dk);
    // Score rows have room for one key past the tile: the read_past_keys fault reads it.
    std::vector<float> s_tile(std::size_t(br) * (bc + 1));
    std::vector<unsigned char> visible(std::size_t(br) * (bc + 1));
    std::vector<float> acc(std::size_t(br) * dv);
    std::vector<float> row_max(br), row_sum(br);
    std::vector<int> tiles_seen(br);
    std::vector<KeyRange> tile_ranges(br), key_ranges(br);

    for (int b = 0; b < s.batch; ++b) {
      for (int h = 0; h < s.heads; ++h) {
        const int g = f.gqa_modulo ? h % s.kv_heads : p.kv_head_of(f.kv_head_table_of_8 && s.heads > 8 ? h % 8 : h);
        for (int i0 = 0; i0 < s.q_len; i0 += br) {
          const int rows = std::min(br, s.q_len - i0);
          std::copy_n(&p.q[at.q(b, h, i0)], std::size_t(rows) * dk, q_tile.begin());
          for (int r = 0; r < rows; ++r)  // rounding on entry, if declared, a query at a time
            round_on_entry(std::span(q_tile).subspan(std::size_t(r) * dk, dk), cfg_.precision.q_entry);
          if (f.scale_in_storage)  // q * scale kept in Q's storage format, the dot then unscaled
            for (float& x : q_tile) x = round_to(x * scale, cfg_.precision.q);
          // Keys any row of this tile may see; key tiles outside them are skipped whole.
          int lo = s.k_len, hi = 0;
          for (int r = 0; r < rows; ++r) {
            tile_ranges[r] = row_range(p, mask, b, i0 + r, /*for_tile_skip=*/true);
            key_ranges[r] = row_range(p, mask, b, i0 + r, false);
            if (tile_ranges[r].empty()) continue;
            lo = std::min(lo, tile_ranges[r].lo);
            hi = std::max(hi, tile_ranges[r].hi);
            const long long qpos = f.rope_query_at_zero ? i0 + r : mask.position(i0 + r);
            if (p.rope.enabled) rope_rotate(&q_tile[std::size_t(r) * dk], dk, qpos, p.rope.base);
          }
          // A sink starts each row's state: the first term of the max and of the sum.
          const bool sink = modifiers.has_sinks() && !f.sink_outside_max;
          std::fill(row_max.begin(), row_max.end(), sink ? modifiers.sink(h) : f.initial_max);
          std::fill(row_sum.begin(), row_sum.end(), sink ? 1.0f : 0.0f);
          std::fill(tiles_seen.begin(), tiles_seen.end(), 0);
          std::fill(acc.begin(), acc.end(), 0.0f);
          if (f.mask_after_softmax) lo = 0, hi = s.k_len;

          hi = std::min(hi, key_end);
          for (int j0 = (lo / bc) * bc; j0 < hi; j0 += bc) {
            int cols = std::min(bc, s.k_len - j0);
            if (drop_partial && cols < bc) continue;
            if (f.read_past_keys && j0 + cols == s.k_len) ++cols;
            if (!score_tile(p, mask, modifiers, b, h, g, i0, rows, j0, cols, scale, key_ranges, q_tile, k_tile, s_tile,
                            visible))
              continue;
            for (int r = 0; r < rows; ++r)
              online_update(p, modifiers, b, h, g, r, j0, cols, s_tile, visible, row_max, row_sum, tiles_seen[r], acc);
          }

          for (int r = 0; r < rows; ++r) {
            float* out = &o[at.o(b, h, i0 + r)];
            float* out_lse = lse.empty() ? nullptr : &lse[at.lse(b, h, i0 + r)];
            if (row_max[r] == kNegInf && !f.empty_row_nan) {
              write_empty_row(out, dv, out_lse);
              continue;
            }
            if (modifiers.has_sinks() && f.sink_outside_max) row_sum[r] += std::exp(modifiers.sink(h) - row_max[r]);
            const float* arow = &acc[std::size_t(r) * dv];
            for (int d = 0; d < dv; ++d) {
              float value = f.dv_beyond_dk_zero && d >= dk ? 0.0f : stored_output(arow[d] / row_sum[r]);
              if ((f.head_dim_48_off && dk == 48) || (f.heads_and_batch_off && s.heads > 8 && s.batch > 4))
                value *= 1.001f;
              out[d] = f.accumulate_into_output ? out[d] + value : value;
            }
            if (out_lse) *out_lse = (f.lse_without_max ? 0.0f : row_max[r]) + std::log(row_sum[r]);
            if (out_lse && f.lse_in_storage) *out_lse = round_to(*out_lse, cfg_.precision.o);
            if (out_lse && f.split_lse_log2) *out_lse *= 1.44269504f;  // log2(e): a base-2 softmax's state
          }
        }
      }
    }
    if (f.write_past_output) o.data()[o.size()] = 0.0f;
  }

 private:
  float kernel_scale(const Problem& p) const {
    double scale = p.effective_scale();
    if (!p.scale && faults_.scale_inverse_dk) scale = 1.0 / p.shape.head_dim;
    if (!p.scale && faults_.scale_from_dv) scale = 1.0 / std::sqrt(double(p.shape.value_dim));
    const float f = static_cast<float>(scale);
    if (faults_.scale_in_storage) return 1.0f;  // folded into Q instead
    return faults_.scale_to_bf16 ? round_to(f, Scalar::kBF16) : f;
  }

  // The keys row i may see by the range-shaped terms, or (for_tile_skip) the keys whose
  // tiles are visited. Both equal mask.range() unless a mask fault is switched on.
  KeyRange row_range(const Problem& p, const MaskView& mask, int b, int i, bool for_tile_skip) const {
    const KernelFaults& f = faults_;
    const bool faulty = f.causal_sees_next || f.causal_excludes_self || f.causal_top_left || f.causal_tile_only ||
                        f.ignore_key_padding || f.window_one_wider || f.batch0_padding_for_all ||
                        f.chunk_from_query_index || f.query_tile_local_positions || f.lookahead_inclusive;
    if (!faulty) return mask.range(b, i);
    const MaskSpec& m = p.mask;
    if (!m.q_valid.empty() && i >= m.q_valid[b]) return {0, 0};
    const long long pos = f.causal_top_left ? i : mask.position(f.query_tile_local_positions ? i % cfg_.block_q : i);
    long long lo = 0, hi = p.shape.k_len;
    if (m.causal && !(f.causal_tile_only && !for_tile_skip))
      hi = std::min(hi, pos + 1 + (f.causal_sees_next ? 1 : 0) - (f.causal_excludes_self ? 1 : 0));
    MaskSpec terms = integer_mask_terms_of(m);  // the integer terms, as the faults change them
    auto widen = [](std::optional<int>& term) {
      if (term && *term < std::numeric_limits<int>::max()) ++*term;
    };
    if (f.window_one_wider) widen(terms.window);
    if (f.lookahead_inclusive) widen(terms.lookahead);
    if (f.chunk_from_query_index && terms.chunk) {
      const long long start = floor_div(i, *terms.chunk) * *terms.chunk;
      lo = std::max(lo, start), hi = std::min(hi, start + *terms.chunk);
      terms.chunk.reset();
    }
    narrow_to_integer_terms(terms, pos, lo, hi);
    if (!m.kv_valid.empty() && !f.ignore_key_padding)
      hi = std::min<long long>(hi, m.kv_valid[f.batch0_padding_for_all ? 0 : b]);
    if (hi <= lo) return {0, 0};
    return {static_cast<int>(lo), static_cast<int>(hi)};
  }

  // Fills s_tile with logits (scaled scores, then the score modifiers of query head h) and `visible`
  // with the mask, a -inf bias included; false when all are masked.
  bool score_tile(const Problem& p, const MaskView& mask, const ModifierView& modifiers, int b, int h, int g, int i0,
                  int rows, int j0, int cols, float scale, const std::vector<KeyRange>& ranges,
                  const std::vector<float>& q_tile, std::vector<float>& k_tile, std::vector<float>& s_tile,
                  std::vector<unsigned char>& visible) const {
    const KernelFaults& f = faults_;
    const Layout at{p.shape};
    const int dk = p.shape.head_dim, bc = cfg_.block_k;
    const int stale = f.third_key_tile_stale && j0 == 2 * bc ? 2 * bc : 0;  // the buffer the first tile left
    std::copy_n(p.k.data() + at.k(kv_batch(p.shape, b), g, j0 - stale), std::size_t(cols) * dk, k_tile.begin());
    for (float& x : k_tile) x = round_to(x, f.k_as_f16 ? Scalar::kF16 : cfg_.precision.k_entry);
    if (p.rope.enabled)
      for (int c = 0; c < cols; ++c) rope_rotate(&k_tile[std::size_t(c) * dk], dk, j0 + c, p.rope.base);
    const bool raw_scores_of_masked = f.max_over_masked || f.mask_after_softmax;
    bool any = false;
    for (int r = 0; r < rows; ++r) {
      for (int c = 0; c < cols; ++c) {
        const int j = j0 + c;
        const bool in_range = (j >= ranges[r].lo && j < ranges[r].hi) ||
                              (f.read_past_keys && j == p.shape.k_len && ranges[r].hi == p.shape.k_len);
        const bool modified = j < p.shape.k_len && modifiers.changes_logits();  // (read_past_keys reads one more)
        // A -inf bias masks the key before its score is read (unless the bias is taken for a mere number).
        const bool bias_masked =
            modified && !f.bias_inf_as_lowest && modifiers.masks(f.bias_batch0 ? 0 : b, h, i0 + r, j);
        const bool unmasked =
            in_range && (!mask.elementwise() || j >= p.shape.k_len || mask.elementwise_visible(b, i0 + r, j));
        const bool vis = unmasked && !bias_masked;
        const std::size_t t = std::size_t(r) * (bc + 1) + c;
        visible[t] = vis;
        const int lanes = f.dk128_drops_last_lane && dk == 128 ? dk - 1 : dk;
        s_tile[t] = vis || raw_scores_of_masked
                        ? dot(&q_tile[std::size_t(r) * dk], &k_tile[std::size_t(c) * dk], lanes) * scale
                        : f.masked_sentinel;
        if (modified && (vis || raw_scores_of_masked))
          s_tile[t] = logit(modifiers, s_tile[t], b, h, g, i0 + r, j, mask);
        if (!vis && f.masked_sentinel != kNegInf) visible[t] = 1;  // a finite sentinel takes part like any score
        if (modified && !unmasked && !bias_masked && f.softcap_after_mask && modifiers.has_softcap()) {
          s_tile[t] = logit(modifiers, kNegInf, b, h, g, i0 + r, j, mask);  // c tanh(-inf) = -c, then ALiBi and bias
          visible[t] = s_tile[t] != kNegInf;
        }
        any = any || visible[t];
      }
    }
    return any || f.mask_after_softmax;
  }

  // The logit of scaled score x for key j of query i: softcap, ALiBi's distance term, the bias (a key
  // whose bias is -inf is masked before it gets here, unless a fault says otherwise).
  float logit(const ModifierView& m, float x, int b, int h, int g, int i, int j, const MaskView& mask) const {
    const KernelFaults& f = faults_;
    if (m.has_softcap()) {
      const float c = m.softcap();
      if (f.softcap_naive_tanh) {
        const float e = std::exp(2.0f * (x / c));
        x = c * ((e - 1.0f) / (e + 1.0f));
      } else {
        x = c * std::tanh(x / c);
      }
    }
    if (m.has_slopes()) {
      const long long pos = mask.position(i);
      x += m.slope(f.alibi_kv_head ? g : h) * static_cast<float>(f.alibi_distance_flipped ? pos - j : j - pos);
    }
    if (m.has_bias()) {
      const float stored = m.bias(f.bias_batch0 ? 0 : b, h, i, j);
      const float bias = f.bias_in_f16 ? round_to(stored, Scalar::kF16) : stored;
      x += bias == kNegInf && f.bias_inf_as_lowest ? std::numeric_limits<float>::lowest() : bias;
    }
    return x;
  }

  // One row's online-softmax step over one key tile.
  void online_update(const Problem& p, const ModifierView& modifiers, int b, int h, int g, int r, int j0, int cols,
                     const std::vector<float>& s_tile, const std::vector<unsigned char>& visible,
                     std::vector<float>& row_max, std::vector<float>& row_sum, int& tiles_seen,
                     std::vector<float>& acc) const {
    const KernelFaults& f = faults_;
    const Layout at{p.shape};
    const int dv = p.shape.value_dim, bc = cfg_.block_k;
    const float* srow = &s_tile[std::size_t(r) * (bc + 1)];
    const unsigned char* vrow = &visible[std::size_t(r) * (bc + 1)];
    float tile_max = kNegInf;
    for (int c = 0; c < cols; ++c)
      if (vrow[c] || f.max_over_masked || f.mask_after_softmax) tile_max = std::max(tile_max, srow[c]);
    if (tile_max == kNegInf) return;
    const float new_max = f.no_max_subtraction ? 0.0f : std::max(row_max[r], tile_max);
    const float rescale = f.no_max_subtraction ? 1.0f : std::exp(row_max[r] - new_max);
    float* arow = &acc[std::size_t(r) * dv];
    if (!f.no_rescale)
      for (int d = 0; d < dv; ++d) arow[d] = round_to(arow[d] * rescale, cfg_.precision.accumulator);
    float tile_sum = 0.0f;
    // Split-KV with the sink in every split's state: the merge counts it once per tile.
    if (f.sink_per_key_tile && modifiers.has_sinks() && tiles_seen > 0)
      tile_sum = std::exp(modifiers.sink(h) - new_max);
    ++tiles_seen;
    const Scalar sum_format = cfg_.precision.sum_precision();
    for (int c = 0; c < cols; ++c) {
      const bool counted = vrow[c] || f.mask_after_softmax;
      if (!counted && !f.masked_value_times_zero) continue;  // masked: never touch its value row
      float pc = counted ? std::exp(srow[c] - new_max) : 0.0f;
      tile_sum = round_to(tile_sum + pc, sum_format);
      if (!vrow[c] && f.mask_after_softmax) continue;  // zeroed after softmax: in the sum, not the output
      if (f.weights_to_fp16) pc = round_to(pc, Scalar::kF16);
      pc = f.p_below_declaration ? round_to_bits(pc, 4) : round_to(pc, cfg_.precision.p);
      if (f.flush_below_2e_100 && pc < 0x1p-100f) pc = 0.0f;  // a normal weight zeroed
      const bool f16_sum = f.fp16_accumulator || (f.f16_accumulator_multi_tile && p.shape.k_len > bc);
      const float* value = p.v.data() + at.v(kv_batch(p.shape, b), g, j0 + c);
      for (int d = 0; d < dv; ++d) {
        arow[d] = round_to(arow[d] + pc * round_to(value[d], cfg_.precision.v_entry), cfg_.precision.accumulator);
        if (f16_sum) arow[d] = round_to(arow[d], Scalar::kF16);
      }
    }
    row_sum[r] = round_to(row_sum[r] * rescale + tile_sum, sum_format);
    row_max[r] = new_max;
  }

  // The batch entry whose K and V batch b reads (b itself, unless a fault wraps it).
  int kv_batch(const Shape& s, int b) const { return faults_.batch_table_of_4 && s.batch > 4 ? b % 4 : b; }

  // O in its storage format: round to nearest even, or (the fault) truncated towards zero.
  float stored_output(float x) const {
    const Scalar format = cfg_.precision.o;
    const float r = round_to(x, format);
    if (!faults_.o_truncated || format == Scalar::kF32 || !std::isfinite(r) || std::fabs(r) <= std::fabs(x)) return r;
    // Rounded away from zero: one step back (sign and magnitude: the pattern minus one).
    return from_bits16(static_cast<std::uint16_t>(to_bits16(r, format) - 1), format);
  }
  // Rounded to `bits` significant bits (round to nearest even), as a narrow float format would.
  static float round_to_bits(float x, int bits) {
    if (x == 0.0f || !std::isfinite(x)) return x;
    int exp;
    std::frexp(x, &exp);
    const float quantum = std::ldexp(1.0f, exp - bits);
    return std::nearbyint(x / quantum) * quantum;
  }

  static constexpr int kSplitKeys = 256;
  TiledConfig cfg_;
  KernelFaults faults_;
  std::string name_;
  mutable std::string path_ = "single-tile";
};

}  // namespace

std::unique_ptr<Kernel> make_faulty_tiled_kernel(TiledConfig config, const KernelFaults& faults, std::string name) {
  return std::make_unique<TiledKernel>(config, faults, std::move(name));
}

}  // namespace attest
