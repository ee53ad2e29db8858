// attest's problems, decode configurations, gradients and descriptors as the C ABI and the
// protocol carry them, and back: each field mapped in one place.
#include "attest/abi/wire_conversion.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <tuple>

#include "attest/abi/storage_codecs.h"
#include "format_codes.h"

namespace attest {
namespace {

using abi_formats::code_of;
using abi_formats::scalar_of;

// The feature table's ABI bits are the header's (impl/model/src/features.cpp; integer_terms_test checks
// every integer mask term).
static_assert(ATTEST_CAP_CAUSAL == 1u << 0 && ATTEST_CAP_GQA == 1u << 6);
// 2.1 kept 2.0's layout: its fields took reserved room, its paths follow the 2.0 struct.
static_assert(sizeof(attest_contract) == 176 && offsetof(attest_contract, alibi_max_bias) == 152 &&
              offsetof(attest_contract, max_abs_value) == 160);
static_assert(sizeof(attest_precision_spec) == 56 && offsetof(attest_precision_spec, q_entry) == 52);
static_assert(offsetof(attest_kernel_v2, paths) == ATTEST_KERNEL_V2_0_SIZE);
static_assert(offsetof(attest_kernel_v2, path_predicates) == ATTEST_KERNEL_V2_1_SIZE);
static_assert(offsetof(attest_kernel_v2, decode_retained) == ATTEST_KERNEL_V2_2_SIZE &&
              offsetof(attest_kernel_v2, value_dim) == ATTEST_KERNEL_V2_4_SIZE &&
              offsetof(attest_kernel_v2, forward_packed) == ATTEST_KERNEL_V2_7_SIZE &&
              sizeof(attest_kernel_v2) == ATTEST_KERNEL_V2_8_SIZE);
// 2.8's packed call; 2.10's int64 offsets took its first two reserved pointers.
static_assert(sizeof(attest_packed_problem) == 176 && offsetof(attest_packed_problem, cu_seqlens_q) == 104 &&
              offsetof(attest_packed_problem, cu_seqlens_q64) == 144 &&
              offsetof(attest_packed_problem, reserved) == 160);
static_assert(sizeof(attest_packed_outputs) == 48 && offsetof(attest_packed_outputs, path) == 16);
static_assert(sizeof(attest_paged_step) == 120);
static_assert(sizeof(attest_path_predicate) == 144);
// 2.3 took the reserved backward pointer and contract.reserved[0]: the layout is 2.2's.
static_assert(offsetof(attest_kernel_v2, backward) == offsetof(attest_kernel_v2, last_error) + sizeof(void*));
static_assert(offsetof(attest_contract, deterministic_backward) == 168);
// 2.6 took the next reserved pointer for merge: still 2.2's layout.
static_assert(offsetof(attest_kernel_v2, merge) == offsetof(attest_kernel_v2, backward) + sizeof(void*) &&
              offsetof(attest_kernel_v2, reserved) == offsetof(attest_kernel_v2, merge) + sizeof(void*));
static_assert(sizeof(attest_merge_inputs) == 48 && offsetof(attest_merge_inputs, o) == 16);
static_assert(sizeof(attest_merge_outputs) == 48 && offsetof(attest_merge_outputs, path) == 16);
// 2.7 took attest_path_predicate's first reserved int for key_tile: its size is 2.2's.
static_assert(sizeof(attest_path_predicate) == 144 && offsetof(attest_path_predicate, key_tile) == 132);
static_assert(offsetof(attest_problem_v2, bias_stored) + 4 * sizeof(void*) == offsetof(attest_problem_v2, lookahead));

template <typename T>
std::vector<T> copy_of(const T* data, std::size_t n) {
  return data ? std::vector<T>(data, data + n) : std::vector<T>();
}

attest_range range_of(const Range& r) { return {r.min, r.max}; }
Range range_of(const attest_range& r) { return {r.min, r.max}; }

constexpr std::pair<std::int32_t, CachePolicy::Kind> kPolicies[] = {
    {ATTEST_CACHE_FULL, CachePolicy::Kind::kFull},
    {ATTEST_CACHE_WINDOW, CachePolicy::Kind::kWindow},
    {ATTEST_CACHE_SINKS_RECENT, CachePolicy::Kind::kSinksRecent},
    {ATTEST_CACHE_EXPLICIT, CachePolicy::Kind::kExplicit}};

std::int32_t flag_of(std::int32_t x, const std::string& field) {
  if (x != 0 && x != 1) throw std::invalid_argument("descriptor: " + field + " is " + std::to_string(x) + ": 0 or 1");
  return x;
}

// Where a kernel (or one of its paths, `where`) rounds. The 2.1 fields' zeros mean what 2.0 meant.
Precision precision_of(const attest_precision_spec& p, const std::string& where) {
  auto refuse = [&](const std::string& why) { throw std::invalid_argument("descriptor: " + where + "." + why); };
  auto scalar = [&](std::int32_t code, const char* field) { return scalar_of(code, where + "." + field); };
  Precision r;
  r.q = scalar(p.q, "q"), r.o = scalar(p.o, "o");
  r.k = scalar_of(p.k, where + ".k", true), r.v = scalar_of(p.v, where + ".v", true);
  r.scores = scalar(p.scores, "scores"), r.p = scalar(p.p, "p"), r.accumulator = scalar(p.accumulator, "accumulator");
  // 128 ulp covers the hardware approximations kernels use (CUDA's __expf is 2 + 1.16|x| ulp over
  // the softmax range); a looser exp loosens the bound until wrong kernels pass.
  if (!std::isfinite(p.exp_ulps) || p.exp_ulps < 0 || p.exp_ulps > kMaxExpUlps)
    refuse("exp_ulps is " + std::to_string(p.exp_ulps) + ": it must be in [0, " +
           std::to_string(static_cast<int>(kMaxExpUlps)) + "] (0 means 1)");
  r.exp_ulps = p.exp_ulps > 0 ? p.exp_ulps : 1.0;
  r.bias = scalar(p.bias, "bias");
  if (p.weight_sum != 0) r.weight_sum = scalar(p.weight_sum - 1, "weight_sum (as ATTEST_IN(precision))");
  r.pv_unnormalised = flag_of(p.pv_unnormalised, where + ".pv_unnormalised");
  // 2.6: Q may also be quantized on entry to q8 (ggml's Q for a q8_0 or q4_0 K).
  r.q_entry = p.q_entry == ATTEST_Q8 ? Scalar::kQ8 : scalar(p.q_entry, "q_entry (or ATTEST_Q8)");
  r.k_entry = scalar(p.k_entry, "k_entry"), r.v_entry = scalar(p.v_entry, "v_entry");
  r.flush_subnormals = flag_of(p.flush_subnormals, where + ".flush_subnormals") != 0;  // 2.9
  return r;
}

attest_precision_spec spec_of(const Precision& p) {
  attest_precision_spec s{};
  s.q = code_of(p.q), s.k = code_of(p.k), s.v = code_of(p.v), s.o = code_of(p.o);
  s.bias = code_of(p.bias);
  s.scores = code_of(p.scores), s.p = code_of(p.p), s.accumulator = code_of(p.accumulator), s.exp_ulps = p.exp_ulps;
  s.weight_sum = p.weight_sum ? ATTEST_IN(code_of(*p.weight_sum)) : 0;
  s.pv_unnormalised = p.pv_unnormalised;
  s.q_entry = static_cast<std::int8_t>(code_of(p.q_entry)), s.k_entry = static_cast<std::int8_t>(code_of(p.k_entry));
  s.v_entry = static_cast<std::int8_t>(code_of(p.v_entry));
  s.flush_subnormals = p.flush_subnormals ? 1 : 0;
  return s;
}

}  // namespace

DecodeConfig decode_config_of(const attest_decode_config_v2& c) {
  DecodeConfig config{c.batch, c.heads, c.kv_heads, c.head_dim, c.value_dim, c.scale, {}, {}};
#define ATTEST_TERM_FROM_WIRE(name, cap) \
  if (c.name) config.mask.name = c.name;
  ATTEST_INTEGER_MASK_TERMS(ATTEST_TERM_FROM_WIRE)
#undef ATTEST_TERM_FROM_WIRE
  if (c.softcap > 0) config.softcap = c.softcap;
  config.alibi_slopes = copy_of(c.alibi_slopes, std::size_t(c.heads));
  config.sinks = copy_of(c.sinks, std::size_t(c.heads));
  config.rope = {c.rope != 0, c.rope_base};
  const std::size_t heads = std::size_t(c.batch) * c.kv_heads;
  config.k_scales = copy_of(static_cast<const float*>(c.reserved[0]), heads);
  config.v_scales = copy_of(static_cast<const float*>(c.reserved[1]), heads);
  return config;
}

protocol::WireProblem to_wire(const Problem& p, const Precision& precision) {
  protocol::WireProblem w;
  attest_problem_v2& h = w.header;
  const Shape& s = p.shape;
  h.batch = s.batch, h.heads = s.heads, h.kv_heads = s.kv_heads, h.q_len = s.q_len, h.k_len = s.k_len;
  h.head_dim = s.head_dim, h.value_dim = s.value_dim;
  h.scale = p.effective_scale();
  h.q_offset = p.effective_q_offset();
  h.causal = p.mask.causal;
#define ATTEST_TERM_TO_WIRE(name, cap) h.name = p.mask.name.value_or(0);
  ATTEST_INTEGER_MASK_TERMS(ATTEST_TERM_TO_WIRE)
#undef ATTEST_TERM_TO_WIRE
  h.rope = p.rope.enabled;
  h.rope_base = p.rope.base;
  w.kv_valid.assign(p.mask.kv_valid.begin(), p.mask.kv_valid.end());
  w.q_valid.assign(p.mask.q_valid.begin(), p.mask.q_valid.end());
  w.q_segment.assign(p.mask.q_segment.begin(), p.mask.q_segment.end());
  w.k_segment.assign(p.mask.k_segment.begin(), p.mask.k_segment.end());
  w.explicit_mask = p.mask.explicit_mask;
  const ScoreModifiers& m = p.modifiers;
  h.softcap = m.softcap.value_or(0.0);
  w.alibi_slopes = m.alibi_slopes, w.sinks = m.sinks;
  if (precision.bias == Scalar::kF32) {
    w.bias = m.bias;
  } else {
    w.bias16.resize(m.bias.size());
    for (std::size_t i = 0; i < m.bias.size(); ++i) w.bias16[i] = to_bits16(m.bias[i], precision.bias);
  }
  h.bias_per_batch = m.bias_per_batch, h.bias_per_head = m.bias_per_head;
  w.q = stored(p.q, precision.q);
  w.k = stored_kv(p.k, precision.k, s.k_len, s.head_dim), w.v = stored_kv(p.v, precision.v, s.k_len, s.value_dim);
  return w;
}

protocol::WireDecodeConfig to_wire(const DecodeConfig& c) {
  protocol::WireDecodeConfig w;
  attest_decode_config_v2& h = w.header;
  h.batch = c.batch, h.heads = c.heads, h.kv_heads = c.kv_heads, h.head_dim = c.head_dim, h.value_dim = c.value_dim;
  h.scale = c.scale;
#define ATTEST_TERM_TO_WIRE(name, cap) h.name = c.mask.name.value_or(0);
  ATTEST_INTEGER_MASK_TERMS(ATTEST_TERM_TO_WIRE)
#undef ATTEST_TERM_TO_WIRE
  h.rope = c.rope.enabled;
  h.rope_base = c.rope.base;
  h.softcap = c.softcap.value_or(0.0);
  w.alibi_slopes = c.alibi_slopes, w.sinks = c.sinks;
  w.k_scales = c.k_scales, w.v_scales = c.v_scales;
  return w;
}

protocol::WireBackward to_wire(const Problem& p, const BackwardInputs& in, const Precision& precision) {
  protocol::WireBackward w;
  w.problem = to_wire(p, precision);
  w.threads = in.threads;
  w.o = stored({in.o.begin(), in.o.end()}, precision.o), w.d_o = stored({in.d_o.begin(), in.d_o.end()}, precision.o);
  w.lse.assign(in.lse.begin(), in.lse.end());
  return w;
}

bool gradients_from_storage(const std::vector<std::uint8_t>& dq, const std::vector<std::uint8_t>& dk,
                            const std::vector<std::uint8_t>& dv, const std::vector<float>& dsinks,
                            const Precision& precision, const GradientSpans& out) {
  const std::tuple<const std::vector<std::uint8_t>*, std::span<float>, Scalar> parts[] = {
      {&dq, out.dq, precision.q}, {&dk, out.dk, precision.k}, {&dv, out.dv, precision.v}};
  for (const auto& [bytes, span, format] : parts)
    if (bytes->size() != span.size() * info(format).bytes) return false;
  if (dsinks.size() != out.dsinks.size()) return false;
  for (const auto& [bytes, span, format] : parts) {
    const std::vector<float> values = floats_from_storage(bytes->data(), span.size(), format);
    std::copy(values.begin(), values.end(), span.begin());
  }
  std::copy(dsinks.begin(), dsinks.end(), out.dsinks.begin());
  return true;
}

Problem from_wire(const attest_problem_v2& h, const Precision& precision) {
  Problem p;
  p.shape = {h.batch, h.heads, h.kv_heads, h.q_len, h.k_len, h.head_dim, h.value_dim};
  p.scale = h.scale;
  p.q_offset = h.q_offset;
  p.mask.causal = h.causal != 0;
#define ATTEST_TERM_FROM_WIRE(name, cap) \
  if (h.name) p.mask.name = h.name;
  ATTEST_INTEGER_MASK_TERMS(ATTEST_TERM_FROM_WIRE)
#undef ATTEST_TERM_FROM_WIRE
  p.rope.enabled = h.rope != 0;
  p.rope.base = h.rope_base;
  const std::size_t b = h.batch, tq = h.q_len, tk = h.k_len;
  p.mask.kv_valid = copy_of(h.kv_valid, b);
  p.mask.q_valid = copy_of(h.q_valid, b);
  p.mask.q_segment = copy_of(h.q_segment, b * tq);
  p.mask.k_segment = copy_of(h.k_segment, b * tk);
  p.mask.explicit_mask = copy_of(h.explicit_mask, b * tq * tk);
  ScoreModifiers& m = p.modifiers;
  if (h.softcap > 0) m.softcap = h.softcap;
  m.alibi_slopes = copy_of(h.alibi_slopes, std::size_t(h.heads));
  m.sinks = copy_of(h.sinks, std::size_t(h.heads));
  m.bias_per_batch = h.bias_per_batch != 0, m.bias_per_head = h.bias_per_head != 0;
  const std::size_t bias_size = std::size_t(m.bias_per_batch ? h.batch : 1) * (m.bias_per_head ? h.heads : 1) * tq * tk;
  if (precision.bias == Scalar::kF32)
    m.bias = copy_of(h.bias, bias_size);
  else if (h.bias_stored)
    m.bias = floats_from_storage(static_cast<const std::uint8_t*>(h.bias_stored), bias_size, precision.bias);
  p.storage = {precision.q, precision.k, precision.v, precision.bias};
  p.q = floats_from_storage(static_cast<const std::uint8_t*>(h.q), p.q_size(), precision.q);
  const std::size_t heads = std::size_t(h.batch) * h.kv_heads;
  p.k = kv_from_storage(static_cast<const std::uint8_t*>(h.k), precision.k, heads, h.k_len, h.head_dim);
  p.v = kv_from_storage(static_cast<const std::uint8_t*>(h.v), precision.v, heads, h.k_len, h.value_dim);
  return p;
}

namespace {

// A declared path (2.2), refused with the reason when it cannot be a predicate.
PathPredicate predicate_of(const protocol::PathDeclaration& declared, std::int32_t key_tile) {
  const attest_path_predicate& x = declared.predicate;
  const std::string where = "path_predicates[" + declared.path + "]";
  if (declared.path.empty() || declared.path.size() > 31)
    throw std::invalid_argument("descriptor: a declared path's name must have 1 to 31 characters");
  PathPredicate p;
  p.path = declared.path;
  p.batch = range_of(x.batch), p.heads = range_of(x.heads), p.q_len = range_of(x.q_len), p.k_len = range_of(x.k_len);
  p.head_dim = range_of(x.head_dim), p.value_dim = range_of(x.value_dim);
  p.head_dim_multiple = x.head_dim_multiple, p.value_dim_multiple = x.value_dim_multiple;
  p.k_len_multiple = x.k_len_multiple;
  p.k_len_not_multiple = flag_of(x.k_len_not_multiple, where + ".k_len_not_multiple") != 0;
  p.no_mask = flag_of(x.no_mask, where + ".no_mask") != 0;
  p.required = FeatureSet::from_abi_bits(x.required), p.excluded = FeatureSet::from_abi_bits(x.excluded);
  if (p.required.abi_bits() != x.required || p.excluded.abi_bits() != x.excluded)
    throw std::invalid_argument("descriptor: " + where + " names capability bits this attest does not know");
  if (key_tile < 0 || key_tile > kMaxContractTile)
    throw std::invalid_argument("descriptor: " + where + ".key_tile must be in [0, " +
                                std::to_string(kMaxContractTile) + "] (got " + std::to_string(key_tile) + ")");
  p.key_tile = key_tile;
  if (const std::string why = p.invalid_because(); !why.empty()) throw std::invalid_argument("descriptor: " + why);
  return p;
}

attest_path_predicate predicate_spec(const PathPredicate& p) {
  attest_path_predicate x{};
  x.batch = range_of(p.batch), x.heads = range_of(p.heads), x.q_len = range_of(p.q_len), x.k_len = range_of(p.k_len);
  x.head_dim = range_of(p.head_dim), x.value_dim = range_of(p.value_dim);
  x.head_dim_multiple = p.head_dim_multiple, x.value_dim_multiple = p.value_dim_multiple;
  x.k_len_multiple = p.k_len_multiple, x.k_len_not_multiple = p.k_len_not_multiple;
  x.required = p.required.abi_bits(), x.excluded = p.excluded.abi_bits(), x.no_mask = p.no_mask;
  x.key_tile = p.key_tile;
  return x;
}

// 2.7: Dv's own widths and range, refused when they contradict dk_equals_dv or admit no width attest tests.
void value_widths_of(const protocol::Descriptor& d, Contract& t) {
  auto refuse = [](const std::string& why) { throw std::invalid_argument("descriptor: " + why); };
  t.value_dim = range_of(d.value_dim);
  t.value_dims.assign(d.value_dims.begin(), d.value_dims.end());
  if (t.value_dim.unlimited() && t.value_dims.empty()) return;
  if (t.dk_equals_dv) refuse("value_dim or value_dims with contract.dk_equals_dv (Dv is then Dk)");
  if (!t.value_dim.unlimited() && (t.value_dim.min > t.value_dim.max || t.value_dim.max < 1))
    refuse("value_dim admits no size >= 1");
  if (!t.value_dim.unlimited() && t.value_dim.min > kMaxContractMinHeadDim)
    refuse("value_dim starts at " + std::to_string(t.value_dim.min) + ": attest tests widths up to " +
           std::to_string(kMaxContractMinHeadDim));
  for (int dim : t.value_dims)
    if (dim < 1 || dim > kMaxContractMinHeadDim)
      refuse("value_dims holds " + std::to_string(dim) + ": widths 1 to " + std::to_string(kMaxContractMinHeadDim));
  if (!t.value_dims.empty() &&
      std::none_of(t.value_dims.begin(), t.value_dims.end(), [&](int x) { return t.value_dim_range().contains(x); }))
    refuse("value_dims holds no width within value_dim (or contract.head_dim when value_dim is {0, 0})");
}

}  // namespace

Capabilities capabilities_from_descriptor(const protocol::Descriptor& d) {
  auto refuse = [](const std::string& why) { throw std::invalid_argument("descriptor: " + why); };
  Capabilities c;
  // Merge is an operation beside the forward, not a feature of problems: Capabilities::merge.
  c.merge = (d.capabilities & ATTEST_CAP_MERGE) != 0;
  c.packed = (d.capabilities & ATTEST_CAP_PACKED) != 0;              // likewise a layout, not a feature
  c.packed_int64 = (d.capabilities & ATTEST_CAP_PACKED_INT64) != 0;  // and the layout's offset width
  if (c.packed_int64 && !c.packed) refuse("capabilities declare packed_int64 without packed");
  const std::uint32_t feature_bits = d.capabilities & ~(ATTEST_CAP_MERGE | ATTEST_CAP_PACKED | ATTEST_CAP_PACKED_INT64);
  c.features = FeatureSet::from_abi_bits(feature_bits);
  if (c.features.abi_bits() != feature_bits)
    refuse("capabilities has bits this attest does not know (0x" + std::to_string(d.capabilities) + ")");
  // Version 1's structs end before chunk: a version-1 kernel cannot be handed a version-2 feature.
  constexpr std::uint32_t kVersion1Bits = (1u << 10) - 1;
  if (d.abi_version == ATTEST_ABI_VERSION_1 && (d.capabilities & ~kVersion1Bits))
    refuse(
        "a version-1 kernel declares version-2 capability bits (chunk and later): its structs have no field for them");
  if (d.empty_rows != ATTEST_EMPTY_ZERO && d.empty_rows != ATTEST_EMPTY_NAN)
    refuse("empty_rows is " + std::to_string(d.empty_rows) + ": ATTEST_EMPTY_ZERO (0) or ATTEST_EMPTY_NAN (1)");
  c.empty_rows = d.empty_rows == ATTEST_EMPTY_NAN ? EmptyRowPolicy::kNan : EmptyRowPolicy::kZero;
  c.precision = precision_of(d.precision, "precision");
  for (const protocol::PathPrecision& path : d.paths) {
    const std::string where = "paths[" + path.path + "].precision";
    if (path.path.empty() || path.path.size() > 31) refuse("a path name must have 1 to 31 characters");
    if (c.path_precision.count(path.path)) refuse("path " + path.path + " is declared twice");
    Precision p = precision_of(path.precision, where);
    // Flushing subnormals is the kernel's declaration (the protocol carries it once): a path inherits it.
    if (p.flush_subnormals && !c.precision.flush_subnormals)
      refuse(where + ".flush_subnormals: only the kernel's precision declares it (its paths inherit it)");
    p.flush_subnormals = c.precision.flush_subnormals;
    if (!p.same_storage(c.precision))
      refuse(where + ": its storage differs from the kernel's (a path may change only where it rounds inside)");
    c.path_precision[path.path] = p;
  }

  for (std::size_t i = 0; i < d.declared_paths.size(); ++i)
    c.paths.push_back(predicate_of(d.declared_paths[i], i < d.declared_key_tiles.size() ? d.declared_key_tiles[i] : 0));

  const attest_contract& k = d.contract;
  Contract& t = c.contract;
  for (std::int32_t dim : d.head_dims)
    if (dim < 1) refuse("contract.head_dims holds " + std::to_string(dim));
  t.head_dims.assign(d.head_dims.begin(), d.head_dims.end());
  c.deterministic_backward = flag_of(k.deterministic_backward, "contract.deterministic_backward") != 0;
  if (c.deterministic_backward && !c.backward()) refuse("contract.deterministic_backward without ATTEST_CAP_BACKWARD");
  // The gradient's bound (reference/include/attest/reference/gradient.h) is a float32 backward's.
  if (c.backward()) {
    auto float32_backward = [&](Precision p, const std::string& where) {
      p.pv_unnormalised = false;  // where the forward normalises is no concern of its backward's
      if (!p.all_f32())
        refuse("ATTEST_CAP_BACKWARD with " + where +
               " not float32 throughout: this attest certifies a float32 "
               "backward (storage and arithmetic); a 16-bit backward's bound is not derived yet");
    };
    float32_backward(c.precision, "precision");
    for (const auto& [path, precision] : c.path_precision) float32_backward(precision, "paths[" + path + "].precision");
  }
  const std::pair<const attest_range*, Range*> ranges[] = {{&k.head_dim, &t.head_dim}, {&k.batch, &t.batch},
                                                           {&k.heads, &t.heads},       {&k.q_len, &t.q_len},
                                                           {&k.k_len, &t.k_len},       {&k.q_offset, &t.q_offset}};
  for (auto [from, to] : ranges) {
    *to = range_of(*from);
    if (!to->unlimited() && to->min > to->max) refuse("contract has a range with min > max");
  }
  for (auto [range, name] : {std::pair{&t.head_dim, "head_dim"},
                             {&t.batch, "batch"},
                             {&t.heads, "heads"},
                             {&t.q_len, "q_len"},
                             {&t.k_len, "k_len"}})
    if (!range->unlimited() && range->max < 1) refuse(std::string("contract.") + name + " admits no size >= 1");
  t.dk_equals_dv = k.dk_equals_dv, t.default_scale_only = k.default_scale_only;
  t.causal_required = k.causal_required, t.decode_only = k.decode_only;
  value_widths_of(d, t);
  if (k.query_tile < 0 || k.key_tile < 0) refuse("contract tiles must be >= 0");
  if (k.query_tile > kMaxContractTile || k.key_tile > kMaxContractTile)
    refuse("contract tiles must be <= " + std::to_string(kMaxContractTile) + " (query_tile " +
           std::to_string(k.query_tile) + ", key_tile " + std::to_string(k.key_tile) + ")");
  for (auto [range, name, cap] : {std::tuple{&t.head_dim, "head_dim", kMaxContractMinHeadDim},
                                  {&t.batch, "batch", kMaxContractMinBatch},
                                  {&t.heads, "heads", kMaxContractMinHeads},
                                  {&t.q_len, "q_len", kMaxContractMinLength},
                                  {&t.k_len, "k_len", kMaxContractMinLength}})
    if (!range->unlimited() && range->min > cap)
      refuse(std::string("contract.") + name + " starts at " + std::to_string(range->min) +
             ": attest tests sizes up to " + std::to_string(cap) +
             " there (a larger smallest problem would take gigabytes)");
  for (std::int32_t dim : d.head_dims)
    if (dim > kMaxContractMinHeadDim)
      refuse("contract.head_dims holds " + std::to_string(dim) + ": attest tests widths up to " +
             std::to_string(kMaxContractMinHeadDim));
  if (!t.q_offset.unlimited()) {
    if (t.q_offset.max < -kMaxContractOffset || t.q_offset.min > kMaxContractOffset)
      refuse("contract.q_offset admits no offset within +-" + std::to_string(kMaxContractOffset) +
             " (beyond it a correct kernel's positions are no longer exact)");
    t.q_offset.min = std::max(t.q_offset.min, -kMaxContractOffset);
    t.q_offset.max = std::min(t.q_offset.max, kMaxContractOffset);
  }
  t.query_tile = k.query_tile, t.key_tile = k.key_tile;
  t.decode_lse_optional = k.decode_lse_optional;
  t.self_attention_only = flag_of(k.self_attention_only, "contract.self_attention_only");
  t.alibi_excludes_bias = flag_of(d.alibi_excludes_bias, "alibi_excludes_bias") != 0;
  if (k.alibi_slopes != ATTEST_ALIBI_ARBITRARY && k.alibi_slopes != ATTEST_ALIBI_STANDARD)
    refuse("contract.alibi_slopes is " + std::to_string(k.alibi_slopes) +
           ": ATTEST_ALIBI_ARBITRARY (0) or ATTEST_ALIBI_STANDARD (1)");
  t.alibi_slopes = k.alibi_slopes == ATTEST_ALIBI_STANDARD ? AlibiSlopes::kStandard : AlibiSlopes::kArbitrary;
  if (!std::isfinite(k.alibi_max_bias) || k.alibi_max_bias < 0 || k.alibi_max_bias > 64)
    refuse("contract.alibi_max_bias is " + std::to_string(k.alibi_max_bias) + ": it must be in [0, 64] (0 means 8)");
  t.alibi_max_bias = k.alibi_max_bias > 0 ? k.alibi_max_bias : 8.0;
  // attest's probes put V = 1 (rows sum to one, V = I): a range below that could not hold them.
  if (!std::isfinite(k.max_abs_value) || (k.max_abs_value != 0 && !(k.max_abs_value >= 1 && k.max_abs_value <= 3.4e38)))
    refuse("contract.max_abs_value is " + std::to_string(k.max_abs_value) + ": 0 (any) or in [1, 3.4e38]");
  t.max_abs_value = k.max_abs_value;
  if (t.alibi_slopes == AlibiSlopes::kStandard && !c.declares(Feature::kAlibi))
    refuse("contract.alibi_slopes is ATTEST_ALIBI_STANDARD without ATTEST_CAP_ALIBI");
  if (k.inputs != ATTEST_INPUTS_MASKED_MAY_BE_NONFINITE && k.inputs != ATTEST_INPUTS_FINITE &&
      k.inputs != ATTEST_INPUTS_MASKED_SCORED)
    refuse("contract.inputs is " + std::to_string(k.inputs) +
           ": ATTEST_INPUTS_MASKED_MAY_BE_NONFINITE (0), ATTEST_INPUTS_FINITE (1) or ATTEST_INPUTS_MASKED_SCORED (2)");
  c.inputs = k.inputs == ATTEST_INPUTS_FINITE          ? InputDomain::kFinite
             : k.inputs == ATTEST_INPUTS_MASKED_SCORED ? InputDomain::kMaskedScored
                                                       : InputDomain::kMaskedMayBeNonFinite;
  if (t.decode_only && !c.decode()) refuse("contract.decode_only without ATTEST_CAP_DECODE");
  bool known_policy = false;
  for (const auto& [code, kind] : kPolicies)
    if (code == d.cache_policy) c.cache.kind = kind, known_policy = true;
  if (!known_policy)
    refuse("cache_policy is " + std::to_string(d.cache_policy) +
           ": ATTEST_CACHE_FULL (0) .. ATTEST_CACHE_EXPLICIT (3)");
  c.cache.sinks = d.cache_sinks, c.cache.recent = d.cache_recent;
  try {
    c.cache.validate();
  } catch (const std::invalid_argument& e) {
    refuse(e.what());
  }
  if (c.cache.evicts() && !c.decode()) refuse("a cache policy without ATTEST_CAP_DECODE");
  if (d.page_tokens < 0 || d.page_tokens > kMaxContractTile)
    refuse("page_tokens is " + std::to_string(d.page_tokens) + ": 0 (no block tables) to " +
           std::to_string(kMaxContractTile));
  if (d.page_tokens > 0 && !c.decode()) refuse("page_tokens without ATTEST_CAP_DECODE");
  if (d.page_tokens > 0 && c.cache.evicts())
    refuse("page_tokens with an evicting cache policy (block tables keep every token)");
  c.page_tokens = d.page_tokens;
  if ((c.cache.kind == CachePolicy::Kind::kExplicit) != (d.reports_retained != 0))
    refuse("ATTEST_CACHE_EXPLICIT and decode_retained come together (an explicit cache reports what it keeps)");
  for (Scalar s : {c.precision.k, c.precision.v})
    if (s == Scalar::kQ8Head && !t.decode_only)
      refuse("q8_head storage is a decode cache's (its scales come with the session): declare contract.decode_only");
  if (t.causal_required && !c.declares(Feature::kCausal)) refuse("contract.causal_required without ATTEST_CAP_CAUSAL");
  for (std::size_t i = 0; i < c.paths.size(); ++i)
    for (std::size_t j = 0; j < i; ++j)
      if (c.paths[i].path == c.paths[j].path) refuse("declared path " + c.paths[i].path + " is declared twice");
  return c;
}

protocol::Descriptor descriptor_from_capabilities(const Capabilities& c, const std::string& name) {
  protocol::Descriptor d;
  for (const auto& [code, kind] : kPolicies)
    if (kind == c.cache.kind) d.cache_policy = code;
  d.cache_sinks = c.cache.sinks, d.cache_recent = c.cache.recent;
  d.reports_retained = c.cache.kind == CachePolicy::Kind::kExplicit;
  d.page_tokens = c.page_tokens;
  d.value_dims.assign(c.contract.value_dims.begin(), c.contract.value_dims.end());
  d.value_dim = range_of(c.contract.value_dim);
  d.alibi_excludes_bias = c.contract.alibi_excludes_bias;
  d.abi_version = ATTEST_ABI_VERSION_2;
  d.name = name;
  d.capabilities = c.features.abi_bits() | (c.merge ? ATTEST_CAP_MERGE : 0u) | (c.packed ? ATTEST_CAP_PACKED : 0u) |
                   (c.packed && c.packed_int64 ? ATTEST_CAP_PACKED_INT64 : 0u);
  d.empty_rows = c.empty_rows == EmptyRowPolicy::kNan ? ATTEST_EMPTY_NAN : ATTEST_EMPTY_ZERO;
  d.precision = spec_of(c.precision);
  for (const auto& [path, p] : c.path_precision) d.paths.push_back({path, spec_of(p)});
  for (const PathPredicate& p : c.paths) d.declared_paths.push_back({p.path, predicate_spec(p)});
  if (std::any_of(c.paths.begin(), c.paths.end(), [](const PathPredicate& p) { return p.key_tile != 0; }))
    for (const PathPredicate& p : c.paths) d.declared_key_tiles.push_back(p.key_tile);
  const Contract& t = c.contract;
  d.head_dims.assign(t.head_dims.begin(), t.head_dims.end());
  attest_contract& k = d.contract;
  k.head_dim = range_of(t.head_dim), k.batch = range_of(t.batch), k.heads = range_of(t.heads);
  k.q_len = range_of(t.q_len), k.k_len = range_of(t.k_len), k.q_offset = range_of(t.q_offset);
  k.dk_equals_dv = t.dk_equals_dv, k.default_scale_only = t.default_scale_only;
  k.causal_required = t.causal_required, k.decode_only = t.decode_only;
  k.query_tile = t.query_tile, k.key_tile = t.key_tile, k.decode_lse_optional = t.decode_lse_optional;
  k.self_attention_only = t.self_attention_only;
  k.alibi_slopes = t.alibi_slopes == AlibiSlopes::kStandard ? ATTEST_ALIBI_STANDARD : ATTEST_ALIBI_ARBITRARY;
  k.alibi_max_bias = t.alibi_max_bias;
  k.max_abs_value = t.max_abs_value;
  k.inputs = c.inputs == InputDomain::kFinite         ? ATTEST_INPUTS_FINITE
             : c.inputs == InputDomain::kMaskedScored ? ATTEST_INPUTS_MASKED_SCORED
                                                      : ATTEST_INPUTS_MASKED_MAY_BE_NONFINITE;
  k.deterministic_backward = c.deterministic_backward;
  return d;
}

}  // namespace attest
