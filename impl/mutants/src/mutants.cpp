#include "attest/mutants/mutants.h"

#include <algorithm>
#include <cstddef>
#include <functional>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "attest/kernels/builtin_kernels.h"
#include "contract_2_7_subjects.h"

namespace attest {
namespace {

// A tiled (32x32 tiles, like the built-in) or decode (16-token pages) kernel with one fault.
MutantEntry tiled(std::string name, std::string bug, std::string property, KernelFaults faults) {
  return {name, std::move(bug), std::move(property), [=] {
            return make_faulty_tiled_kernel({32, 32}, faults, "mutant:" + name);
          }};
}
// The same kernel with the built-in tiled kernel's 128 x 64 tiles: bugs past the first tiles.
MutantEntry tiled_128x64(std::string name, std::string bug, std::string property, KernelFaults faults) {
  return {name, std::move(bug), std::move(property), [=] {
            return make_faulty_tiled_kernel({128, 64}, faults, "mutant:" + name);
          }};
}
// The same kernel with 128 x 128 tiles, a common training kernel's: backward bugs past its tiles.
MutantEntry tiled_128x128(std::string name, std::string bug, std::string property, KernelFaults faults,
                          int needs_len = 0) {
  return {name, std::move(bug), std::move(property),
          [=] {
            return make_faulty_tiled_kernel({128, 128}, faults, "mutant:" + name);
          },
          needs_len};
}
// The same tiled kernel storing Q, K, V and O in bf16 with f32 accumulation and P rounded to
// bf16 before P.V (the FlashAttention-2 arrangement), with one precision fault.
MutantEntry tiled_bf16(std::string name, std::string bug, std::string property, KernelFaults faults,
                       bool p_rounded = true) {
  Precision bf16;
  bf16.q = bf16.k = bf16.v = bf16.o = Scalar::kBF16;
  if (p_rounded) bf16.p = Scalar::kBF16;
  return {name, std::move(bug), std::move(property), [=] {
            return make_faulty_tiled_kernel({32, 32, bf16}, faults, "mutant:" + name);
          }};
}
// The tiled kernel with a split-KV path, declaring its paths (ABI 2.2 path predicates).
MutantEntry declared_paths(std::string name, std::string bug, std::string property, KernelFaults faults) {
  return {name, std::move(bug), std::move(property), [=] {
            return make_faulty_tiled_kernel({.split_kv = true, .declare_paths = true}, faults, "mutant:" + name);
          }};
}
MutantEntry decode(std::string name, std::string bug, std::string property, KernelFaults faults) {
  return {name, std::move(bug), std::move(property),
          [=] { return make_faulty_decode_kernel(16, faults, "mutant:" + name); }};
}

// A training kernel's forward: Tq == Tk with q_offset 0 only, anything else refused (it throws).
// `declared`: whether its contract says so; without, attest sends other shapes and it fails.
class SelfAttentionOnly final : public Kernel {
 public:
  SelfAttentionOnly(std::unique_ptr<Kernel> inner, bool declared) : inner_(std::move(inner)), declared_(declared) {}
  std::string name() const override { return declared_ ? "self-attention-only" : "self-attention-undeclared"; }
  Capabilities capabilities() const override {
    Capabilities c = inner_->capabilities();
    c.contract.self_attention_only = declared_;
    return c;
  }
  void forward(const Problem& p, std::span<float> o, std::span<float> lse) const override {
    if (p.shape.q_len != p.shape.k_len || p.effective_q_offset() != 0)
      throw std::invalid_argument("self-attention only: Tq == Tk and q_offset 0");
    inner_->forward(p, o, lse);
  }
  void backward(const Problem& p, const BackwardInputs& in, const GradientSpans& out) const override {
    if (p.shape.q_len != p.shape.k_len || p.effective_q_offset() != 0)
      throw std::invalid_argument("self-attention only: Tq == Tk and q_offset 0");
    inner_->backward(p, in, out);
  }
  // The inner kernel's capabilities include its merge: it must be served too.
  void merge(const MergeInputs& in, std::span<float> o, std::span<float> lse) const override {
    inner_->merge(in, o, lse);
  }
  std::string last_path() const override { return inner_->last_path(); }
  std::string last_backward_path() const override { return inner_->last_backward_path(); }

 private:
  std::unique_ptr<Kernel> inner_;
  bool declared_;
};

// A library kernel that computes the standard ALiBi slopes from H itself and ignores the ones it
// is given (as most do). `declared`: whether its contract says so; without, attest draws other
// slopes and its outputs are wrong.
class StandardAlibiOnly final : public Kernel {
 public:
  StandardAlibiOnly(std::unique_ptr<Kernel> inner, bool declared) : inner_(std::move(inner)), declared_(declared) {}
  std::string name() const override { return declared_ ? "standard-alibi-only" : "standard-alibi-undeclared"; }
  Capabilities capabilities() const override {
    Capabilities c = inner_->capabilities();
    if (declared_) c.contract.alibi_slopes = AlibiSlopes::kStandard;
    return c;
  }
  void forward(const Problem& p, std::span<float> o, std::span<float> lse) const override {
    if (p.modifiers.alibi_slopes.empty()) return inner_->forward(p, o, lse);
    Problem own = p;
    own.modifiers.alibi_slopes = standard_alibi_slopes(p.shape.heads);
    inner_->forward(own, o, lse);
  }
  void backward(const Problem& p, const BackwardInputs& in, const GradientSpans& out) const override {
    Problem own = p;
    if (!p.modifiers.alibi_slopes.empty()) own.modifiers.alibi_slopes = standard_alibi_slopes(p.shape.heads);
    inner_->backward(own, in, out);
  }
  // The inner kernel's capabilities include its merge: it must be served too.
  void merge(const MergeInputs& in, std::span<float> o, std::span<float> lse) const override {
    inner_->merge(in, o, lse);
  }
  std::string last_path() const override { return inner_->last_path(); }
  std::string last_backward_path() const override { return inner_->last_backward_path(); }

 private:
  std::unique_ptr<Kernel> inner_;
  bool declared_;
};

// The built-in tiled kernel (vectorized: the mutation run takes its long stage to 32768 keys) whose
// backward `corrupt` edits after the fact: a gradient bug only some problems show.
class BackwardCorrupted final : public Kernel {
 public:
  using Corruption = std::function<void(const Problem&, const GradientSpans&)>;
  BackwardCorrupted(TiledConfig tiles, std::string name, Corruption corrupt)
      : inner_(make_tiled_kernel(tiles)), name_(std::move(name)), corrupt_(std::move(corrupt)) {}
  std::string name() const override { return name_; }
  Capabilities capabilities() const override { return inner_->capabilities(); }
  void forward(const Problem& p, std::span<float> o, std::span<float> lse) const override {
    inner_->forward(p, o, lse);
  }
  void backward(const Problem& p, const BackwardInputs& in, const GradientSpans& out) const override {
    inner_->backward(p, in, out);
    corrupt_(p, out);
  }
  void merge(const MergeInputs& in, std::span<float> o, std::span<float> lse) const override {
    inner_->merge(in, o, lse);
  }
  std::string last_path() const override { return inner_->last_path(); }
  std::string last_backward_path() const override { return inner_->last_backward_path(); }

 private:
  std::unique_ptr<Kernel> inner_;
  std::string name_;
  Corruption corrupt_;
};

MutantEntry backward_corrupted(std::string name, std::string bug, std::string property, TiledConfig tiles,
                               BackwardCorrupted::Corruption corrupt, int needs_len = 0) {
  return {name, std::move(bug), std::move(property),
          [=] { return std::make_unique<BackwardCorrupted>(tiles, "mutant:" + name, corrupt); }, needs_len};
}

// dK 1% off for every key past 8192 under a window: wrong only at lengths the size ladder never
// reaches, where only the long stage's windowed backward (16384 and 32768 keys) looks.
void dk_wrong_past_8192_under_window(const Problem& p, const GradientSpans& out) {
  constexpr std::size_t kFirstWrongKey = 8192;
  const Shape& s = p.shape;
  if (!p.mask.window || std::size_t(s.k_len) <= kFirstWrongKey) return;
  const std::size_t row = static_cast<std::size_t>(s.head_dim), keys = static_cast<std::size_t>(s.k_len);
  for (std::size_t slice = 0; slice < std::size_t(s.batch) * s.kv_heads; ++slice)  // dK [B][Hkv][Tk][Dk]
    for (std::size_t e = kFirstWrongKey * row; e < keys * row; ++e) out.dk[slice * keys * row + e] *= 1.01f;
}

// dQ 1% off once Tq or Tk passes 128, two 64-wide tiles: gradient properties drawing no more than
// two tiles per dimension never see it.
void dq_wrong_past_128(const Problem& p, const GradientSpans& out) {
  if (p.shape.q_len <= 128 && p.shape.k_len <= 128) return;
  for (float& x : out.dq) x *= 1.01f;
}

// Two tiled kernels behind one name, one per internal path: "short" (Tk <= 64) with `short_path`'s
// arithmetic, "long" with `long_path`'s, each declared in path_precision (ABI 2.1's paths).
class TwoPaths final : public Kernel {
 public:
  TwoPaths(std::string name, Precision short_path, Precision long_path)
      : name_(std::move(name)),
        short_(make_faulty_tiled_kernel({32, 32, short_path}, {}, name_)),
        long_(make_faulty_tiled_kernel({32, 32, long_path}, {}, name_)),
        long_precision_(long_path) {}
  std::string name() const override { return name_; }
  Capabilities capabilities() const override {
    Capabilities c = short_->capabilities();
    c.features.erase(Feature::kBackward);  // two forward paths; no backward of its own
    c.path_precision = {{"short", c.precision}, {"long", long_precision_}};
    return c;
  }
  void forward(const Problem& p, std::span<float> o, std::span<float> lse) const override {
    path_ = p.shape.k_len <= 64 ? "short" : "long";
    (path_ == "short" ? short_ : long_)->forward(p, o, lse);
  }
  std::string last_path() const override { return path_; }

 private:
  std::string name_;
  std::unique_ptr<Kernel> short_, long_;
  Precision long_precision_;
  mutable std::string path_ = "short";
};

// Calibration subjects for ABI 2.1's precision declarations (`attest calibrate --kernel NAME`):
// the scalar tiled kernel (an online softmax, so another summation order than the model's)
// rounding as each declares.
std::unique_ptr<Kernel> declared_arithmetic_subject(const std::string& name) {
  if (name == "tiled-entry-f16") {  // f32 buffers, rounded to f16 on entry
    Precision p;
    p.q_entry = p.k_entry = p.v_entry = Scalar::kF16;
    return make_faulty_tiled_kernel({32, 32, p}, {}, name);
  }
  if (name == "tiled-f16-kv-unnormalised") {  // f16 K/V, softmax sum in f32, P.V in f16 before normalising
    Precision p;
    p.k = p.v = Scalar::kF16;
    p.accumulator = Scalar::kF16;
    p.weight_sum = Scalar::kF32;
    p.pv_unnormalised = true;
    return make_faulty_tiled_kernel({32, 32, p}, {}, name);
  }
  if (name == "tiled-bias-f16") {  // the additive mask taken in f16 (a -inf bias still masks)
    Precision p;
    p.bias = Scalar::kF16;
    return make_faulty_tiled_kernel({32, 32, p}, {.bias_in_f16 = true}, name);
  }
  if (name == "tiled-declared-paths")  // a split-KV path for decode shapes; every path declared (ABI 2.2)
    return make_faulty_tiled_kernel({.split_kv = true, .declare_paths = true}, {}, name);
  if (name == "tiled-two-paths") {  // f16 K/V; up to 64 keys P.V in f16 before normalising, beyond in f32
    Precision long_path;
    long_path.k = long_path.v = Scalar::kF16;
    Precision short_path = long_path;
    short_path.accumulator = Scalar::kF16;
    short_path.weight_sum = Scalar::kF32;
    short_path.pv_unnormalised = true;
    return std::make_unique<TwoPaths>(name, short_path, long_path);
  }
  return nullptr;
}

// The decode kernel with one fault, declaring itself decode-only: certified through sessions.
MutantEntry decode_only(std::string name, std::string bug, std::string property, KernelFaults faults) {
  return {name, std::move(bug), std::move(property),
          [=] { return make_decode_only(make_faulty_decode_kernel(16, faults, "mutant:" + name)); }};
}

// The quantized-cache decoder (decode-only, paged cache in `format`) with one fault.
MutantEntry quantized(Scalar format, std::string name, std::string bug, std::string property, KernelFaults faults) {
  return {name, std::move(bug), std::move(property),
          [=] { return make_faulty_quantized_decode_kernel(format, faults, "mutant:" + name); }};
}

// The same with a fault only past the block-table properties' 4096 tokens: the long stage's paged
// sessions (at least 8192 tokens) are expected to kill it.
MutantEntry quantized_long(Scalar format, std::string name, std::string bug, KernelFaults faults) {
  return {name, std::move(bug), "paged_sampled_steps",
          [=] { return make_faulty_quantized_decode_kernel(format, faults, "mutant:" + name); }, 8192};
}

// The sinks + recent decoder (4 sinks, 32 recent, decode-only) with one fault; `property`: the
// check expected to kill it (a bug far past the cache's capacity: the long stage's sessions).
MutantEntry evicting(std::string name, std::string bug, KernelFaults faults,
                     std::string property = "eviction_matches_retained_set", int needs_len = 0) {
  return {name, std::move(bug), std::move(property),
          [=] { return make_faulty_sinks_recent_decode_kernel(4, 32, false, faults, "mutant:" + name); }, needs_len};
}

// A cache declaring sinks 4 + recent 32 (decode-only) that keeps only 24 recent keys from position
// 200 on: two sessions fed the same tokens, the answers of the narrower one for queries from 200.
// Wrong only past 200 positions, more than 5 times the cache's capacity.
class RecentShrinksFrom200 final : public Kernel {
 public:
  explicit RecentShrinksFrom200(std::string name)
      : declared_(make_decode_only(make_sinks_recent_decode_kernel(4, 32))),
        narrow_(make_sinks_recent_decode_kernel(4, 24)),
        name_(std::move(name)) {}
  std::string name() const override { return name_; }
  Capabilities capabilities() const override { return declared_->capabilities(); }
  void forward(const Problem& p, std::span<float> o, std::span<float> lse) const override {
    declared_->forward(p, o, lse);
  }
  std::unique_ptr<DecodeSession> open_decode(const DecodeConfig& config) const override {
    return std::make_unique<Session>(declared_->open_decode(config), narrow_->open_decode(config), config);
  }

 private:
  class Session final : public DecodeSession {
   public:
    Session(std::unique_ptr<DecodeSession> wide, std::unique_ptr<DecodeSession> narrow, const DecodeConfig& config)
        : wide_(std::move(wide)), narrow_(std::move(narrow)), config_(config) {}
    void step(int n, std::span<const float> q, std::span<const float> k, std::span<const float> v, std::span<float> o,
              std::span<float> lse) override {
      const long long first = wide_->length();
      std::vector<float> narrow_o(o.size()), narrow_lse(lse.size());
      wide_->step(n, q, k, v, o, lse);
      narrow_->step(n, q, k, v, narrow_o, narrow_lse);
      const std::size_t dv = static_cast<std::size_t>(config_.value_dim);
      for (std::size_t row = 0; row < std::size_t(config_.batch) * config_.heads * n; ++row) {
        if (first + static_cast<long long>(row % n) < kFirstNarrowPosition) continue;  // rows are [B][H][n]
        std::copy_n(&narrow_o[row * dv], dv, &o[row * dv]);
        if (!lse.empty()) lse[row] = narrow_lse[row];
      }
    }
    long long length() const override { return wide_->length(); }
    std::size_t cache_bytes() const override { return wide_->cache_bytes(); }

   private:
    static constexpr long long kFirstNarrowPosition = 200;
    std::unique_ptr<DecodeSession> wide_, narrow_;
    DecodeConfig config_;
  };

  std::unique_ptr<Kernel> declared_, narrow_;
  std::string name_;
};

}  // namespace

// NOLINTNEXTLINE(readability-function-size): a table, one row per mutant
const std::vector<MutantEntry>& mutant_registry() {
  static const std::vector<MutantEntry> registry = {
      tiled("causal_sees_next", "causal off by one: one future key visible", "masked_inputs_have_no_influence",
            {.causal_sees_next = true}),
      tiled("causal_excludes_self", "causal off by one: a query does not see its own key", "matches_reference",
            {.causal_excludes_self = true}),
      tiled("causal_top_left", "top-left causal alignment instead of bottom-right when Tq < Tk", "matches_reference",
            {.causal_top_left = true}),
      tiled("causal_tile_only", "causal applied per tile only: the diagonal tile leaks the future",
            "zero_masked_weight", {.causal_tile_only = true}),
      tiled("drop_partial_tile", "the last partial key tile is dropped", "matches_reference",
            {.drop_partial_tile = true}),
      tiled("no_rescale", "accumulator not rescaled when the running max grows", "rows_sum_to_one",
            {.no_rescale = true}),
      tiled("no_max_subtraction", "exp without max subtraction overflows", "overflow_safe",
            {.no_max_subtraction = true}),
      tiled("sentinel_masked_1e4", "finite sentinel -1e4 instead of -inf for masked logits", "empty_row_policy",
            {.masked_sentinel = -1e4f}),
      tiled("sentinel_masked_5e4", "finite sentinel -5e4 instead of -inf for masked logits",
            "masked_inputs_have_no_influence", {.masked_sentinel = -5e4f}),
      tiled("sentinel_initial_max", "running max starts at a finite -1e4 instead of -inf", "overflow_safe",
            {.initial_max = -1e4f}),
      tiled("max_over_masked", "running max taken over masked logits", "masked_inputs_have_no_influence",
            {.max_over_masked = true}),
      tiled("mask_after_softmax", "mask applied after softmax: masked keys stay in the denominator", "rows_sum_to_one",
            {.mask_after_softmax = true}),
      tiled("ignore_key_padding", "key padding ignored", "zero_masked_weight", {.ignore_key_padding = true}),
      tiled("window_one_wider", "sliding window one key too wide", "zero_masked_weight", {.window_one_wider = true}),
      tiled("chunk_from_query_index", "chunked attention: the query's chunk taken from its index, not its position",
            "zero_masked_weight", {.chunk_from_query_index = true}),
      tiled("lookahead_inclusive", "lookahead read inclusively (j - qpos <= a): one key ahead too many",
            "zero_masked_weight", {.lookahead_inclusive = true}),
      tiled("gqa_modulo", "GQA maps query head h to kv head h % Hkv", "gqa_matches_repeated_heads",
            {.gqa_modulo = true}),
      tiled("dk128_drops_last_lane", "Dk = 128 only: the unrolled dot product misses the last coordinate",
            "matches_reference", {.dk128_drops_last_lane = true}),
      tiled("kv_head_table_of_8", "more than 8 query heads only: query head h reads the kv head of h % 8",
            "matches_reference", {.kv_head_table_of_8 = true}),
      tiled("head_dim_48_off", "Dk = 48 only, a width between the listed classes: outputs 0.1% off", "grid",
            {.head_dim_48_off = true}),
      tiled("pair_bug_seventeen_paths",
            "H > 8 with B > 4 only (a pair of classes): outputs 0.1% off, from a kernel "
            "reporting 17 path names hashed from the shape",
            "matches_reference", {.heads_and_batch_off = true, .paths_named_by_shape = true}),
      tiled("batch_table_of_4", "more than 4 batch entries only: batch b reads the K and V of batch b % 4",
            "matches_reference", {.batch_table_of_4 = true}),
      tiled("wide_path_unmasked_softcap",
            "a wide path (Tq >= 64, Dv % 16 == 0) drops the partial last key tile with a "
            "softcap and no mask at all: one feature pair on one path",
            "matches_reference", {.wide_path_unmasked_softcap = true}),
      tiled("sinks_drop_partial_tile", "with attention sinks only: the last partial key tile is dropped",
            "matches_reference", {.sinks_drop_partial_tile = true}),
      tiled("split_kv_drops_remainder",
            "a split-KV path (B = 1, Tq <= 4, Tk >= 512, splits of 256 keys) loses the keys "
            "past the last whole split when Tk % 256 != 0",
            "matches_reference", {.split_kv_drops_remainder = true}),
      declared_paths("split_kv_declared",
                     "the same split-KV remainder bug in a kernel that declares its paths (ABI 2.2)",
                     "matches_reference", {.split_kv_drops_remainder = true}),
      declared_paths("declared_split_wider", "a kernel declaring its split-KV path for Tq <= 4 takes it up to Tq = 8",
                     "declared_paths", {.split_kv_for_tq_8 = true}),
      tiled("dv_beyond_dk_zero", "Dv > Dk only: O's columns past Dk are written as 0 (an output loop over Dk)",
            "matches_reference", {.dv_beyond_dk_zero = true}),
      // Merging partial states (Kernel::merge): the tiled kernel's merge with one bug each.
      tiled("merge_empty_part_nan", "merge: an empty part's O weighted by exp(-inf) = 0, not skipped: 0 * NaN",
            "merge_equals_whole", {.merge_reads_empty_part = true}),
      tiled("merge_without_max", "merge: weights exp(lse_i) without subtracting the largest: inf / inf past lse 88",
            "merge_equals_whole", {.merge_without_max = true}),
      tiled("merge_lse_bf16", "merge: the partial LSEs read in bf16", "merge_equals_whole", {.merge_lse_bf16 = true}),
      tiled("split_lse_log2",
            "forward LSE left in base 2 (a base-2 softmax's state, never converted): split-KV states mis-weighted "
            "when merged",
            "split_invariance", {.split_lse_log2 = true}),
      // The packed varlen layout (Kernel::forward_packed): the packed forward with one bug each.
      tiled("packed_drops_last_sequence", "packed: sequences 0 .. B - 2 only, the last one's rows never written",
            "packed_equals_padded", {.packed_drops_last_sequence = true}),
      tiled("packed_next_offset", "packed: sequence b's keys from cu_seqlens_k[b + 1], the next sequence's offset",
            "packed_equals_padded", {.packed_next_offset = true}),
      tiled("packed_max_seqlen_as_length",
            "packed: every sequence taken as max_seqlen_k keys long, reading into the next sequence",
            "sequences_do_not_interact", {.packed_max_seqlen_as_length = true}),
      // Backward (docs/design.md#backward): the tiled backward with one bug each.
      tiled("backward_drops_d", "backward: dS = P dP, the D = rowsum(dO * O) term dropped",
            "gradient_ds_rows_sum_to_zero", {.backward_drops_d = true}),
      tiled("backward_d_from_bf16_o", "backward: D from a bf16 copy of O", "gradient_matches_reference",
            {.backward_d_from_bf16_o = true}),
      tiled("backward_dk_unscaled", "backward: dK not multiplied by the softmax scale", "gradient_matches_reference",
            {.backward_dk_unscaled = true}),
      tiled("backward_gqa_last_head_wins",
            "backward: a kv head's dK and dV overwritten by each query head of its group",
            "gradient_gqa_matches_repeated_heads", {.backward_gqa_last_head_wins = true}),
      tiled("backward_masked_ds_kept", "backward: dS from P recomputed without the mask (only dV's P masked)",
            "gradient_masked_keys_zero", {.backward_masked_ds_kept = true}),
      tiled("backward_softcap_no_derivative", "backward: the softcap's 1 - tanh^2 factor missing",
            "gradient_matches_reference", {.backward_softcap_no_derivative = true}),
      tiled("backward_dq_nondeterministic",
            "backward: dQ summed over key tiles in an order that changes per call "
            "(atomics), while promising deterministic gradients",
            "gradient_deterministic", {.backward_dq_nondeterministic = true}),
      tiled("backward_dq_split_by_threads",
            "backward: dQ summed per worker over its share of the key tiles (split-K), "
            "the order following the thread count, while promising deterministic gradients",
            "gradient_deterministic", {.backward_dq_split_by_threads = true}),
      tiled("backward_dq_split_from_four_threads",
            "backward: the split-K dQ only at 4 or more workers, while "
            "promising deterministic gradients",
            "gradient_deterministic", {.backward_dq_split_from_four_threads = true}),
      tiled("backward_dq_wrong_when_threaded", "backward: dQ 1% off whenever a thread count is given",
            "gradient_matches_reference", {.backward_dq_wrong_when_threaded = true}),
      tiled_128x128("backward_dq_wrong_past_512", "backward with 128 x 128 tiles: dQ 1% off when Tk > 512", "sizes",
                    {.backward_dq_wrong_past_512 = true}),
      tiled_128x128("backward_dq_wrong_past_2048",
                    "backward with 128 x 128 tiles: dQ 1% off when Tk > 2048 (past "
                    "the size ladder's backward)",
                    "backward_sampled_rows", {.backward_dq_wrong_past_2048 = true}, 4096),
      tiled_128x128("backward_dk_wrong_rect_past_2048",
                    "backward with 128 x 128 tiles: dK 1% off when Tq != Tk and "
                    "Tk > 2048 (a cross-attention path past the size ladder)",
                    "backward_sampled_rows", {.backward_dk_wrong_rect_past_2048 = true}, 4096),
      tiled_128x128("backward_dv_wrong_padded_past_2048",
                    "backward with 128 x 128 tiles: dV 1% off in a batch entry "
                    "with padded keys when Tk > 2048",
                    "backward_sampled_rows", {.backward_dv_wrong_padded_past_2048 = true}, 4096),
      backward_corrupted("backward_windowed_dk_wrong_past_8192",
                         "backward with 128 x 128 tiles: dK 1% off for keys past 8192 under a sliding window",
                         "backward_sampled_rows", {128, 128}, dk_wrong_past_8192_under_window, 32768),
      backward_corrupted("backward_dq_wrong_past_128",
                         "backward with 64 x 64 tiles: dQ 1% off when Tq or Tk > 128 (past two tiles)",
                         "gradient_matches_reference", {64, 64}, dq_wrong_past_128),
      tiled("backward_lse_wrong_row", "backward: P recomputed with the LSE of the next row of the query tile",
            "gradient_matches_reference", {.backward_lse_wrong_row = true}),
      tiled("backward_dv_unnormalised", "backward: dV from exp(s - rowmax), P never normalised", "gradient_dv_is_pt_do",
            {.backward_dv_unnormalised = true}),
      tiled("backward_sink_gradient_sign", "backward: dsinks = +sum p_sink D (the sign flipped)",
            "gradient_matches_reference", {.backward_sink_gradient_sign = true}),
      tiled("backward_skipped_rows_unwritten", "backward: dQ never written for a row that sees no key",
            "gradient_empty_rows_contribute_nothing", {.backward_skipped_rows_unwritten = true}),
      tiled("batch0_padding", "batch 0's key padding used for every batch", "slices_are_independent",
            {.batch0_padding_for_all = true}),
      tiled("empty_row_nan", "an empty row divides 0 by 0 while declaring the zero policy", "empty_row_policy",
            {.empty_row_nan = true}),
      tiled("masked_value_times_zero", "masked V rows multiplied by weight 0: 0 * NaN leaks",
            "masked_inputs_have_no_influence", {.masked_value_times_zero = true}),
      tiled("lse_without_max", "LSE returned without the max term", "matches_reference", {.lse_without_max = true}),
      tiled("rope_query_at_zero", "queries rotated at their index, ignoring q_offset", "rope_relative_position",
            {.rope_query_at_zero = true}),
      tiled("accumulate_into_output", "output buffer read before it is written", "deterministic_and_in_bounds",
            {.accumulate_into_output = true}),
      tiled("read_past_keys", "one key row read past Tk", "matches_reference", {.read_past_keys = true}),
      tiled("write_past_output", "one float written past O", "deterministic_and_in_bounds",
            {.write_past_output = true}),
      tiled("weights_fp16", "P rounded to fp16 before P.V", "precision_gate", {.weights_to_fp16 = true}),
      tiled("accumulator_fp16", "P.V accumulated in fp16", "precision_gate", {.fp16_accumulator = true}),
      {"entry_f16_accumulator_fp16",
       "Q, K, V rounded to f16 on entry (declared), P.V accumulated in fp16 (not declared)", "precision_gate",
       [] {
         Precision p;
         p.q_entry = p.k_entry = p.v_entry = Scalar::kF16;
         return make_faulty_tiled_kernel({32, 32, p}, {.fp16_accumulator = true}, "mutant:entry_f16_accumulator_fp16");
       }},
      {"flush_above_subnormals",
       "declares flushed subnormals (below 2^-126) but zeroes softmax weights below 2^-100, normal values",
       "zero_masked_weight",
       [] {
         Precision p;
         p.flush_subnormals = true;
         return make_faulty_tiled_kernel({32, 32, p}, {.flush_below_2e_100 = true}, "mutant:flush_above_subnormals");
       }},
      tiled("scale_bf16", "the scale rounded to bf16", "precision_gate", {.scale_to_bf16 = true}),
      tiled("scale_inverse_dk", "scale 1/Dk instead of 1/sqrt(Dk)", "matches_reference", {.scale_inverse_dk = true}),
      tiled_bf16("bf16_p_below_declaration", "bf16 kernel: P rounded to 4 significant bits while declaring bf16",
                 "precision_gate", {.p_below_declaration = true}),
      tiled_bf16("bf16_f16_accumulator_multi_tile",
                 "bf16 kernel: P.V accumulated in f16 on its multi-tile path only, declaring f32", "precision_gate",
                 {.f16_accumulator_multi_tile = true}),
      // Truncation at most doubles O's rounding error: with P rounded to bf16 as well, the declaration
      // allows that much. This host keeps P in f32, so O's rounding is what its bound charges.
      tiled_bf16("bf16_o_truncated",
                 "bf16-storage kernel (P in f32): O converted by truncation, not round to nearest even",
                 "matches_reference", {.o_truncated = true}, /*p_rounded=*/false),
      tiled_bf16("bf16_scale_in_storage", "bf16 kernel: the scale folded into Q in bf16", "matches_reference",
                 {.scale_in_storage = true}),
      tiled_bf16("bf16_k_as_f16", "bf16 kernel: K kept in f16 (range 65504) while declaring bf16", "matches_reference",
                 {.k_as_f16 = true}),
      tiled_bf16("bf16_lse_in_storage", "bf16 kernel: LSE rounded to bf16", "matches_reference",
                 {.lse_in_storage = true}),
      tiled("scale_from_dv", "scale 1/sqrt(Dv) instead of 1/sqrt(Dk)", "matches_reference", {.scale_from_dv = true}),
      tiled("alibi_kv_head", "ALiBi slope of the kv head, not the query head: wrong only under GQA",
            "gqa_matches_repeated_heads", {.alibi_kv_head = true}),
      tiled("alibi_distance_flipped", "ALiBi distance with its sign flipped: slope * (qpos - j)", "alibi_matches_bias",
            {.alibi_distance_flipped = true}),
      tiled("softcap_after_mask", "masked scores set to -inf, then capped: a masked key gets -c and its value leaks",
            "softcap_saturates", {.softcap_after_mask = true}),
      tiled("softcap_naive_tanh", "softcap's tanh as (e^2y - 1) / (e^2y + 1): NaN once e^2y overflows",
            "softcap_saturates", {.softcap_naive_tanh = true}),
      tiled("bias_batch0", "a per-batch bias read as broadcast: batch 0's bias for every batch",
            "slices_are_independent", {.bias_batch0 = true}),
      tiled("bias_inf_as_lowest", "-inf bias replaced by the lowest float: a fully masked row attends uniformly",
            "bias_minus_inf_equals_mask", {.bias_inf_as_lowest = true}),
      tiled("bias_in_f16", "the bias rounded to f16 while declaring it f32 (an additive mask kept in half precision)",
            "matches_reference", {.bias_in_f16 = true}),
      tiled("sink_outside_max",
            "the sink added to the sum at the end, not to the running max: exp(sigma - m) overflows", "sink_takes_mass",
            {.sink_outside_max = true}),
      tiled("sink_per_key_tile", "split-KV merge with the sink in every split's state: counted once per key tile",
            "sink_takes_mass", {.sink_per_key_tile = true}),
      tiled_128x64("third_key_tile_stale",
                   "128x64 tiles: the third key tile scores the first tile's keys (a stale "
                   "double buffer)",
                   "sizes", {.third_key_tile_stale = true}),
      tiled_128x64("query_tile_local_positions",
                   "128x64 tiles: past the first query tile a row's mask position comes "
                   "from its index within the tile",
                   "sizes", {.query_tile_local_positions = true}),
      decode("decode_skips_self", "decode: the new token does not attend to itself", "decode_matches_prefill",
             {.decode_skips_self = true}),
      decode("decode_page_off_by_one", "decode: the last key of every page is skipped", "decode_matches_prefill",
             {.decode_page_off_by_one = true}),
      decode("decode_rope_at_zero", "decode: new queries rotated from position 0, not the cache length",
             "decode_matches_prefill", {.rope_query_at_zero = true}),
      decode("decode_window_evicts_page",
             "decode with a window: a page is evicted once its first key leaves the "
             "window, losing its keys still inside",
             "decode_matches_prefill", {.decode_window_evicts_page = true}),
      decode("decode_gqa_modulo", "decode: GQA maps query head h to kv head h % Hkv", "gqa_matches_repeated_heads",
             {.gqa_modulo = true}),
      decode_only("decode_only_finite_max",
                  "a decode-only kernel whose running max starts at -10000: rows whose "
                  "logits all lie below it divide 0 by 0",
                  "overflow_safe", {.finite_max_sentinel = true}),
      quantized(Scalar::kQ8, "q8_scale_next_block", "q8 cache: each block of 32 codes scaled by the next block's scale",
                "decode_matches_prefill", {.q8_scale_next_block = true}),
      quantized(Scalar::kQ8, "kv_drops_partial_page", "q8 cache: the sequence's last page is not read until it is full",
                "decode_matches_prefill", {.decode_drops_partial_page = true}),
      quantized(Scalar::kQ8, "kv_page_table_off_by_one",
                "q8 cache: logical page p read through the block table's "
                "entry p + 1",
                "decode_matches_prefill", {.page_table_off_by_one = true}),
      quantized(Scalar::kQ4, "q4_nibbles_swapped", "q4 cache: each pair of 4-bit codes written high nibble first",
                "decode_matches_prefill", {.q4_nibbles_swapped = true}),
      quantized(Scalar::kE4M3, "e4m3_saturated_as_inf", "e4m3 cache: the saturated code 448 read as infinity",
                "decode_matches_prefill", {.e4m3_saturated_as_inf = true}),
      quantized(Scalar::kQ8Head, "q8_head_scale_of_next_head",
                "q8_head cache: kv head g's rows quantized with the "
                "static scale of kv head g + 1 (another group's)",
                "decode_matches_prefill", {.q8_head_scale_of_next_head = true}),
      quantized(Scalar::kQ8, "kv_shared_page_written_through",
                "q8 cache behind block tables: new tokens written "
                "through sequence 0's table, into a page another sequence owns or shares",
                "shared_prefix_equals_private", {.paged_writes_through_first_table = true}),
      quantized(Scalar::kQ8, "kv_pages_assumed_contiguous",
                "q8 cache behind block tables: a sequence's pages read as "
                "consecutive physical pages from its first",
                "page_order_invariance", {.paged_pages_contiguous = true}),
      quantized(Scalar::kQ8, "kv_batch_positions_of_first",
                "q8 cache behind block tables: every sequence's new tokens "
                "at sequence 0's length (a batch of equal lengths assumed)",
                "ragged_batch_equals_single", {.paged_positions_of_first_sequence = true}),
      quantized(Scalar::kQ8, "kv_one_token_steps_at_longest",
                "q8 cache behind block tables: in a call where every sequence adds one token, "
                "each reads to the batch's longest length (a padded seqlens_k)",
                "ragged_batch_equals_single", {.paged_one_token_steps_at_longest = true}),
      quantized(Scalar::kQ8, "kv_table_copy_of_eight",
                "q8 cache behind block tables: the kernel's copy of a table "
                "holds 8 entries, so keys past 128 tokens are read through entry 7",
                "ragged_batch_equals_single", {.paged_table_of_eight = true}),
      quantized_long(Scalar::kQ8, "kv_table_copy_of_256",
                     "q8 cache behind block tables: the kernel's copy of a table "
                     "holds 256 entries, so keys past 4096 tokens are read through entry 255 (long sessions only)",
                     {.paged_table_of_256 = true}),
      evicting("eviction_fencepost", "sinks + recent cache: one key more than the recent 32 kept (p - j <= 32)",
               {.eviction_fencepost = true}),
      evicting("ring_wrap_current_lap",
               "sinks + recent cache: only the ring's current lap read, the previous lap's "
               "still-recent keys taken as evicted",
               {.ring_wrap_current_lap = true}),
      evicting("sinks_evicted", "sinks + recent cache: the sinks dropped once the cache is full",
               {.sinks_evicted = true}),
      evicting("sinks_evicted_from_150",
               "sinks + recent cache: the sinks dropped from position 150 on (the cache "
               "holds 36)",
               {.sinks_evicted_from_150 = true}),
      {"recent_24_from_200",
       "sinks + recent cache declaring recent 32: only 24 recent keys kept from position 200 on (more than 5x "
       "the cache's 36)",
       "eviction_matches_retained_set",
       [] { return std::make_unique<RecentShrinksFrom200>("mutant:recent_24_from_200"); }},
      evicting("sinks_evicted_from_5000",
               "sinks + recent cache: the sinks dropped from position 5000 on (long "
               "sessions only)",
               {.sinks_evicted_from_5000 = true}, "eviction_sampled_steps", 8192),
      // ABI 2.7's contract fields declared falsely.
      {"value_tile_of_32",
       "declares Dv in {32, 64} but its V tile is 32 wide: for Dv = 64 the second 32 columns stay 0",
       "matches_reference", [] { return make_value_tile_of_32_mutant("mutant:value_tile_of_32"); }},
      {"alibi_mask_input_head_0",
       "declares ALiBi or a bias; ALiBi alone goes into its one [Tq][Tk] mask input: head 0's slope "
       "for every head",
       "matches_reference", [] { return make_alibi_mask_input_head_0_mutant("mutant:alibi_mask_input_head_0"); }},
  };
  return registry;
}

std::unique_ptr<Kernel> make_in_process_kernel(const std::string& name) {
  if (name.starts_with("mutant:")) return find_mutant(name.substr(7)).make();
  // The mutants' host with no fault: the scalar tiled kernel, f32 or storing Q, K, V, O in 16 bits
  // (f32 accumulation, P rounded to the storage format): calibration subjects for each precision.
  for (Scalar s : {Scalar::kF32, Scalar::kBF16, Scalar::kF16}) {
    const std::string variant = s == Scalar::kF32 ? "tiled-scalar" : std::string("tiled-scalar-") + to_string(s);
    if (name != variant && name != "builtin:" + variant) continue;
    Precision precision;
    precision.q = precision.k = precision.v = precision.o = precision.p = s;
    return make_faulty_tiled_kernel({32, 32, precision}, {}, variant);
  }
  if (auto subject = declared_arithmetic_subject(name.starts_with("builtin:") ? name.substr(8) : name)) return subject;
  // The decode kernel declaring itself decode-only: what a serving library's decoder declares.
  if (name == "decode-only" || name == "builtin:decode-only") return make_decode_only(make_decode_kernel(16));
  // The quantized-cache decoder in its other formats (decode_q8 is built in): their mutants' hosts.
  for (Scalar s : {Scalar::kQ8Token, Scalar::kQ8Head, Scalar::kQ4, Scalar::kE4M3, Scalar::kE5M2, Scalar::kF16})
    if (name == std::string("decode_") + to_string(s)) return make_quantized_decode_kernel(s);
  // The sinks + recent cache declaring an explicit policy: it reports the positions each query kept.
  if (name == "decode_sinks_recent_explicit") return make_sinks_recent_decode_kernel(4, 32, true);
  for (const bool declared : {true, false})
    if (name == (declared ? "standard-alibi-only" : "standard-alibi-undeclared"))
      return std::make_unique<StandardAlibiOnly>(make_tiled_kernel({128, 64}), declared);
  // ABI 2.7's subjects: Dv in {32, 64} only, and one mask input (ALiBi or a bias), declared so or not.
  for (const bool declared : {true, false}) {
    if (name == (declared ? "value-widths-only" : "value-widths-undeclared")) return make_value_widths_kernel(declared);
    if (name == (declared ? "alibi-or-bias-only" : "alibi-or-bias-undeclared"))
      return make_alibi_or_bias_kernel(declared);
  }
  // The tiled kernel refusing all but self-attention, declared so or not.
  for (const bool declared : {true, false})
    if (name == (declared ? "self-attention-only" : "self-attention-undeclared"))
      return std::make_unique<SelfAttentionOnly>(make_tiled_kernel({128, 64}), declared);
  if (name.starts_with("builtin:")) return make_kernel(name.substr(8));
  return make_kernel(name);
}

const MutantEntry& find_mutant(const std::string& name) {
  for (const MutantEntry& m : mutant_registry())
    if (m.name == name || "mutant:" + m.name == name) return m;
  throw std::invalid_argument("unknown mutant '" + name + "'");
}

}  // namespace attest
