#include "attest/kernels/kernel.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>
#include <set>
#include <stdexcept>
#include <tuple>

#include "attest/kernels/builtin_kernels.h"
#include "builtin_tiled.h"

namespace attest {

std::string Capabilities::unsupported_because(const Problem& p) const {
  const FeatureSet missing = features_used_by(p).minus(features);
  if (!missing.empty()) return "uses " + missing.joined() + ", which the kernel does not declare";
  // A kernel that stores a buffer in 16 bits receives values representable there.
  for (auto [name, stored, wanted] :
       {std::tuple{"q", p.storage.q, precision.q}, std::tuple{"k", p.storage.k, precision.k},
        std::tuple{"v", p.storage.v, precision.v}})
    if (wanted != Scalar::kF32 && stored != wanted)
      return std::string(name) + " is stored as " + to_string(stored) + "; the kernel takes " + to_string(wanted);
  if (precision.bias != Scalar::kF32 && !p.modifiers.bias.empty() && p.storage.bias != precision.bias)
    return std::string("the bias is stored as ") + to_string(p.storage.bias) + "; the kernel takes " +
           to_string(precision.bias);
  return contract.violation(p);
}

const char* to_string(InputDomain d) {
  switch (d) {
    case InputDomain::kFinite:
      return "finite";
    case InputDomain::kMaskedScored:
      return "masked_scored";
    default:
      return "masked_may_be_nonfinite";
  }
}

namespace {
constexpr InputDomain kInputDomains[] = {InputDomain::kMaskedMayBeNonFinite, InputDomain::kFinite,
                                         InputDomain::kMaskedScored};
}  // namespace

bool parse_input_domain(const std::string& name, InputDomain& out) {
  for (InputDomain d : kInputDomains)
    if (name == to_string(d)) return out = d, true;
  return false;
}

std::string input_domain_names() {  // from the same list, so a new domain is named where it is parsed
  std::string out;
  const std::size_t n = std::size(kInputDomains);
  for (std::size_t i = 0; i < n; ++i)
    out += std::string(i == 0 ? "" : i + 1 == n ? " or " : ", ") + to_string(kInputDomains[i]);
  return out;
}

bool Capabilities::supports(const Problem& p) const { return unsupported_because(p).empty(); }

Precision Capabilities::precision_for(const std::string& path) const {
  const auto it = path_precision.find(path);
  if (it == path_precision.end()) return precision;
  Precision p = it->second;
  p.flush_subnormals = p.flush_subnormals || precision.flush_subnormals;  // the kernel's declaration covers its paths
  return p;
}

int Capabilities::key_tile_for(const Problem& p) const {
  const PathPredicate* path = declared_path_for(paths, p);
  return path && path->key_tile > 0 ? path->key_tile : contract.key_tile;
}

std::vector<int> Capabilities::key_tiles() const {
  std::set<int> tiles;
  if (contract.key_tile > 0) tiles.insert(contract.key_tile);
  for (const PathPredicate& path : paths)
    if (path.key_tile > 0) tiles.insert(path.key_tile);
  return {tiles.begin(), tiles.end()};
}

Precision Capabilities::loosest_precision() const {
  Precision out = precision;
  auto coarser = [](Scalar a, Scalar b) { return unit_roundoff(b) > unit_roundoff(a) ? b : a; };
  for (const auto& [path, p] : path_precision) {
    for (auto field : {&Precision::q_entry, &Precision::k_entry, &Precision::v_entry, &Precision::scores, &Precision::p,
                       &Precision::accumulator})
      out.*field = coarser(out.*field, p.*field);
    if (out.weight_sum || p.weight_sum) out.weight_sum = coarser(out.sum_precision(), p.sum_precision());
    out.pv_unnormalised = out.pv_unnormalised || p.pv_unnormalised;
    out.flush_subnormals = out.flush_subnormals || p.flush_subnormals;
    out.exp_ulps = std::max(out.exp_ulps, p.exp_ulps);
  }
  return out;
}

void DecodeConfig::validate() const {
  auto positive = [](const char* field, int v) {
    if (v < 1) throw ProblemError(std::string("invalid decode config: ") + field + " must be >= 1");
  };
  positive("batch", batch);
  positive("heads", heads);
  positive("kv_heads", kv_heads);
  positive("head_dim", head_dim);
  positive("value_dim", value_dim);
  if (heads % kv_heads != 0) throw ProblemError("invalid decode config: kv_heads must divide heads");
  for (const FeatureInfo* term : integer_mask_terms())
    if ((mask.*term->parameter).value_or(1) < 1)
      throw ProblemError(std::string("invalid decode config: ") + term->name + " must be >= 1");
  if (!mask.kv_valid.empty() || !mask.q_valid.empty() || !mask.q_segment.empty() || !mask.k_segment.empty() ||
      !mask.explicit_mask.empty())
    throw ProblemError("invalid decode config: only the integer mask terms (window, chunk, ...) apply to a session");
  if (softcap && !(*softcap > 0)) throw ProblemError("invalid decode config: softcap must be > 0");
  if (!alibi_slopes.empty() && alibi_slopes.size() != std::size_t(heads))
    throw ProblemError("invalid decode config: alibi_slopes must have one slope per head");
  if (!sinks.empty() && sinks.size() != std::size_t(heads))
    throw ProblemError("invalid decode config: sinks must have one logit per head");
  if (!std::isfinite(scale)) throw ProblemError("invalid decode config: scale must be finite");
  if (rope.enabled && head_dim % 2 != 0) throw ProblemError("invalid decode config: rope needs an even head_dim");
  for (const auto* scales : {&k_scales, &v_scales})
    if (!scales->empty() && scales->size() != std::size_t(batch) * kv_heads)
      throw ProblemError("invalid decode config: k_scales and v_scales must be empty or [batch][kv_heads]");
  if (k_scales.empty() != v_scales.empty())
    throw ProblemError("invalid decode config: k_scales and v_scales come together (q8_head K and V)");
}

std::unique_ptr<DecodeSession> Kernel::open_decode(const DecodeConfig&) const {
  throw std::logic_error("kernel " + name() + " does not support decode");
}

std::size_t Kernel::page_bytes(const DecodeConfig&) const {
  throw std::logic_error("kernel " + name() + " has no block-table cache");
}

void Kernel::decode_paged(const DecodeConfig&, const PagedStep&) const {
  throw std::logic_error("kernel " + name() + " has no block-table cache");
}

void check_paged_step(const DecodeConfig& c, int page_tokens, std::size_t page_bytes, const PagedStep& step) {
  auto refuse = [](const std::string& why) { throw ProblemError("invalid paged decode step: " + why); };
  const std::size_t batch = c.batch;
  if (page_tokens < 1 || page_bytes == 0) refuse("the kernel declares no page size");
  if (step.pool.size() % page_bytes != 0) refuse("the pool is not a whole number of pages");
  if (step.lengths.size() != batch || step.counts.size() != batch) refuse("lengths and counts must have B entries");
  if (step.table_width < 0 || step.tables.size() != batch * std::size_t(step.table_width))
    refuse("tables must be [B][table_width]");
  const std::int64_t pages = static_cast<std::int64_t>(step.pool.size() / page_bytes);
  std::size_t tokens = 0;
  for (std::size_t b = 0; b < batch; ++b) {
    if (step.lengths[b] < 0 || step.counts[b] < 0 || step.lengths[b] + step.counts[b] > INT32_MAX)
      refuse("sequence " + std::to_string(b) + ": lengths and counts must be >= 0, positions below 2^31");
    const std::int64_t used = (step.lengths[b] + step.counts[b] + page_tokens - 1) / page_tokens;
    if (used > step.table_width) refuse("sequence " + std::to_string(b) + "'s table is narrower than its tokens");
    for (std::int64_t e = 0; e < used; ++e) {
      const std::int32_t page = step.tables[b * step.table_width + e];
      if (page < 0 || page >= pages) refuse("sequence " + std::to_string(b) + " names a page outside the pool");
    }
    tokens += static_cast<std::size_t>(step.counts[b]);
  }
  const std::size_t dk = c.head_dim, dv = c.value_dim;
  if (step.q.size() != tokens * c.heads * dk || step.k.size() != tokens * c.kv_heads * dk ||
      step.v.size() != tokens * c.kv_heads * dv || step.o.size() != tokens * c.heads * dv ||
      (!step.lse.empty() && step.lse.size() != tokens * c.heads))
    refuse("q/k/v/o/lse sizes do not match the counts and the configuration");
}

void Kernel::backward(const Problem&, const BackwardInputs&, const GradientSpans&) const {
  throw std::logic_error("kernel " + name() + " has no backward");
}

void Kernel::merge(const MergeInputs&, std::span<float>, std::span<float>) const {
  throw std::logic_error("kernel " + name() + " has no merge");
}

void Kernel::forward_packed(const PackedCall&, std::span<float>, std::span<float>) const {
  throw std::logic_error("kernel " + name() + " has no packed forward");
}

const std::vector<KernelEntry>& kernel_registry() {
  static const std::vector<KernelEntry> registry = {
      {"loop", "textbook loops: scores, stable softmax, weighted sum", [] { return make_loop_kernel(); }},
      {"blocked", "32-query blocks against all keys, two-pass softmax", [] { return make_blocked_kernel(32); }},
      {"tiled", "online softmax over 128x64 tiles in 4-row panels (FlashAttention-2 style), vectorized",
       [] { return make_builtin_tiled_kernel(); }},
      {"tiled_bf16",
       "tiled with bf16 Q/K/V/O, P rounded to bf16 before P.V, f32 accumulation; AVX-512 BF16 dot products",
       [] {
         return make_tiled_bf16_kernel({128, 64});
       }},
      {"decode", "paged KV cache (16-token pages), incremental decode", [] { return make_decode_kernel(16); }},
      {"decode_q8", "decode-only over a paged q8 KV cache (int8 codes, a scale per 32 values), 16-token pages",
       [] { return make_quantized_decode_kernel(Scalar::kQ8); }},
      {"decode_sinks_recent",
       "decode-only, evicting: 4 sink positions + the 32 most recent kept (16-token pages, a ring for the recent)",
       [] { return make_sinks_recent_decode_kernel(4, 32); }},
  };
  return registry;
}

std::unique_ptr<Kernel> make_kernel(const std::string& name) {
  std::string known;
  for (const KernelEntry& e : kernel_registry()) {
    if (e.name == name) return e.make();
    known += (known.empty() ? "" : ", ") + e.name;
  }
  throw std::invalid_argument("unknown kernel '" + name + "' (known: " + known + ")");
}

Outputs run_forward(const Kernel& kernel, const Problem& p) {
  p.validate();
  Outputs out;
  out.o.assign(p.o_size(), std::numeric_limits<float>::quiet_NaN());
  out.lse.assign(p.lse_size(), std::numeric_limits<float>::quiet_NaN());
  kernel.forward(p, out.o, out.lse);
  out.path = kernel.last_path();
  return out;
}

Gradients run_backward(const Kernel& kernel, const Problem& p, const BackwardInputs& in) {
  p.validate();
  if (in.o.size() != p.o_size() || in.lse.size() != p.lse_size() || in.d_o.size() != p.o_size())
    throw ProblemError("backward: o, lse and d_o must have the forward's output sizes");
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Gradients g;
  g.dq.assign(p.q_size(), nan);
  g.dk.assign(p.k_size(), nan);
  g.dv.assign(p.v_size(), nan);
  g.dsinks.assign(p.modifiers.sinks.size(), nan);
  kernel.backward(p, in, {g.dq, g.dk, g.dv, g.dsinks});
  g.path = kBackwardPath;
  return g;
}

std::size_t dense_kv_cache_bytes(std::size_t layers, std::size_t tokens, std::size_t kv_heads, std::size_t head_dim,
                                 std::size_t element_bytes) {
  return 2 * layers * tokens * kv_heads * head_dim * element_bytes;
}

}  // namespace attest
