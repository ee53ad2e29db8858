// A C++ kernel behind the C ABI's callbacks: each call converted from the wire, run, and its
// exception turned into a status (nothing unwinds across the C boundary).
#include "attest/abi/abi_adapter.h"

#include <cstddef>
#include <cstring>
#include <span>
#include <string>

#include "attest/kernels/unwritten.h"
#include "format_codes.h"

namespace attest {
namespace {

using abi_formats::code_of;

// The C header's never-written NaN is the harness's (attest/kernels/unwritten.h).
static_assert(ATTEST_UNWRITTEN_F32 == kUnwrittenF32Bits);

}  // namespace

AbiAdapter::AbiAdapter(std::unique_ptr<Kernel> kernel) : kernel_(std::move(kernel)), name_(kernel_->name()) {
  const Capabilities c = kernel_->capabilities();
  const protocol::Descriptor d = descriptor_from_capabilities(c, name_);
  head_dims_ = d.head_dims;
  descriptor_.abi_version = ATTEST_ABI_VERSION_2;
  descriptor_.struct_size = sizeof(attest_kernel_v2);
  descriptor_.name = name_.c_str();
  descriptor_.capabilities = d.capabilities;
  descriptor_.empty_rows = d.empty_rows;
  descriptor_.precision = d.precision;
  descriptor_.contract = d.contract;
  descriptor_.contract.head_dims = head_dims_.empty() ? nullptr : head_dims_.data();
  descriptor_.contract.head_dim_count = static_cast<std::int32_t>(head_dims_.size());
  for (const protocol::PathPrecision& path : d.paths) path_names_.push_back(path.path);
  for (std::size_t i = 0; i < d.paths.size(); ++i) paths_.push_back({path_names_[i].c_str(), d.paths[i].precision});
  descriptor_.paths = paths_.empty() ? nullptr : paths_.data();
  descriptor_.path_count = static_cast<std::int32_t>(paths_.size());
  for (const protocol::PathDeclaration& declared : d.declared_paths) declared_names_.push_back(declared.path);
  for (std::size_t i = 0; i < d.declared_paths.size(); ++i) {
    declared_paths_.push_back(d.declared_paths[i].predicate);
    declared_paths_.back().path = declared_names_[i].c_str();
    declared_paths_.back().key_tile = i < d.declared_key_tiles.size() ? d.declared_key_tiles[i] : 0;
  }
  descriptor_.path_predicates = declared_paths_.empty() ? nullptr : declared_paths_.data();
  descriptor_.path_predicate_count = static_cast<std::int32_t>(declared_paths_.size());
  descriptor_.user = this;
  if (c.forward()) descriptor_.forward = &AbiAdapter::forward;
  if (c.decode()) {
    descriptor_.decode_open = &AbiAdapter::decode_open;
    descriptor_.decode_step = &AbiAdapter::decode_step;
    descriptor_.decode_close = &AbiAdapter::decode_close;
  }
  if (c.backward()) descriptor_.backward = &AbiAdapter::backward;
  if (c.merge) descriptor_.merge = &AbiAdapter::merge;
  if (c.packed) descriptor_.forward_packed = &AbiAdapter::forward_packed;
  descriptor_.last_error = &AbiAdapter::last_error;
  descriptor_.cache_policy = d.cache_policy;
  descriptor_.cache_sinks = d.cache_sinks, descriptor_.cache_recent = d.cache_recent;
  if (d.reports_retained) descriptor_.decode_retained = &AbiAdapter::decode_retained;
  descriptor_.page_tokens = d.page_tokens;
  value_dims_ = d.value_dims;
  descriptor_.value_dim = d.value_dim;
  descriptor_.value_dims = value_dims_.empty() ? nullptr : value_dims_.data();
  descriptor_.value_dim_count = static_cast<std::int32_t>(value_dims_.size());
  descriptor_.alibi_excludes_bias = d.alibi_excludes_bias;
  if (d.page_tokens > 0) {
    descriptor_.page_bytes = &AbiAdapter::page_bytes;
    descriptor_.decode_paged = &AbiAdapter::decode_paged;
  }
}

// A call's status: OK, or the exception's message kept for last_error (a problem the kernel refuses:
// INVALID_ARGUMENT; anything else: INTERNAL_ERROR). Nothing unwinds across the C boundary.
template <typename Call>
attest_status AbiAdapter::status_of(Call&& call) {
  try {
    call();
    return ATTEST_OK;
  } catch (const ProblemError& e) {
    error_ = e.what();
    return ATTEST_INVALID_ARGUMENT;
  } catch (const std::exception& e) {
    error_ = e.what();
    return ATTEST_INTERNAL_ERROR;
  }
}

attest_status AbiAdapter::forward(void* user, const attest_problem_v2* problem, attest_outputs_v2* out) {
  auto* self = static_cast<AbiAdapter*>(user);
  return self->status_of([&] {
    const Precision precision = self->kernel_->capabilities().precision;
    const Problem p = from_wire(*problem, precision);
    p.validate();
    std::vector<float> o(p.o_size());
    self->kernel_->forward(p, o, out->lse ? std::span<float>(out->lse, p.lse_size()) : std::span<float>());
    const std::vector<std::uint8_t> bytes = stored(o, precision.o);  // O in its storage format
    std::memcpy(out->o, bytes.data(), bytes.size());
    std::strncpy(out->path, self->kernel_->last_path().c_str(), sizeof out->path - 1);
  });
}

attest_status AbiAdapter::backward(void* user, const attest_problem_v2* problem, const attest_backward_inputs* in,
                                   attest_gradients* out) {
  auto* self = static_cast<AbiAdapter*>(user);
  return self->status_of([&] {
    const Problem p = from_wire(*problem, self->kernel_->capabilities().precision);  // float32 storage (a backward's)
    p.validate();
    const std::size_t sinks = p.modifiers.sinks.size();
    if (!in->o || !in->lse || !in->d_o || !out->dq || !out->dk || !out->dv || (sinks != 0) != (out->dsinks != nullptr))
      throw ProblemError("backward: a buffer is NULL, or dsinks does not match the problem's sinks");
    const std::vector<float> o = floats_of(in->o, p.o_size()), lse = floats_of(in->lse, p.lse_size()),
                             d_o = floats_of(in->d_o, p.o_size());
    self->kernel_->backward(p, {o, lse, d_o, in->threads},
                            {{static_cast<float*>(out->dq), p.q_size()},
                             {static_cast<float*>(out->dk), p.k_size()},
                             {static_cast<float*>(out->dv), p.v_size()},
                             {out->dsinks, out->dsinks ? sinks : 0}});
    std::strncpy(out->path, self->kernel_->last_backward_path().c_str(), sizeof out->path - 1);
  });
}

attest_status AbiAdapter::merge(void* user, const attest_merge_inputs* in, attest_merge_outputs* out) {
  auto* self = static_cast<AbiAdapter*>(user);
  return self->status_of([&] {
    std::vector<float> o_parts;
    const MergeInputs m = merge_inputs_of(*in, o_parts);
    const std::size_t rows = std::size_t(m.rows), width = std::size_t(m.value_dim);
    if (rows > 0 && (!out->o || !out->lse)) throw ProblemError("merge: the output o or lse is NULL");
    const std::span<float> o(out->o, rows * width), lse(out->lse, rows);
    check_merge_inputs(m, o, lse);
    self->kernel_->merge(m, o, lse);
    std::strncpy(out->path, "merge", sizeof out->path - 1);
  });
}

attest_status AbiAdapter::forward_packed(void* user, const attest_packed_problem* problem, attest_packed_outputs* out) {
  auto* self = static_cast<AbiAdapter*>(user);
  return self->status_of([&] {
    const PackedCall call = packed_call_of(*problem);
    if (call.total_q() > 0 && !out->o) throw ProblemError("packed: the output o is NULL");
    const std::span<float> o(out->o, call.o_size());
    const std::span<float> lse = out->lse ? std::span<float>(out->lse, call.lse_size()) : std::span<float>();
    check_packed_call(call, o, lse);
    self->kernel_->forward_packed(call, o, lse);
    const std::string reported = self->kernel_->last_packed_path();  // the kernel's own name, if any
    std::strncpy(out->path, reported.empty() ? kPackedPath : reported.c_str(), sizeof out->path - 1);
  });
}

attest_status AbiAdapter::decode_open(void* user, const attest_decode_config_v2* c, void** session) {
  auto* self = static_cast<AbiAdapter*>(user);
  try {
    const DecodeConfig config = decode_config_of(*c);
    *session = self->kernel_->open_decode(config).release();
    self->sessions_[*session] = config;
    return ATTEST_OK;
  } catch (const std::exception& e) {
    self->error_ = e.what();
    return ATTEST_INVALID_ARGUMENT;
  }
}

attest_status AbiAdapter::decode_step(void* user, void* session, std::int32_t n, const void* q, const void* k,
                                      const void* v, void* o, float* lse, char path[32]) {
  auto* self = static_cast<AbiAdapter*>(user);
  auto* s = static_cast<DecodeSession*>(session);
  try {
    // Sizes follow from the session's configuration; the server checked the arrays.
    const DecodeConfig& c = self->sessions_.at(session);
    const Precision precision = self->kernel_->capabilities().precision;  // buffers in their storage formats
    const std::size_t rows = std::size_t(c.batch) * c.heads * n, heads = std::size_t(c.batch) * c.kv_heads;
    std::vector<float> ignored_lse(lse ? 0 : rows), out(rows * c.value_dim);
    s->step(n,
            kv_from_storage(static_cast<const std::uint8_t*>(q), precision.q, std::size_t(c.batch) * c.heads, n,
                            c.head_dim),
            step_rows_from_storage(k, precision.k, heads, n, c.head_dim, c.k_scales),
            step_rows_from_storage(v, precision.v, heads, n, c.value_dim, c.v_scales), out,
            lse ? std::span<float>(lse, rows) : std::span<float>(ignored_lse));
    const std::vector<std::uint8_t> bytes = stored(out, precision.o);  // O in its storage format
    std::memcpy(o, bytes.data(), bytes.size());
    std::strncpy(path, "decode", 31);
    return ATTEST_OK;
  } catch (const std::exception& e) {
    self->error_ = e.what();
    return ATTEST_INVALID_ARGUMENT;
  }
}

attest_status AbiAdapter::decode_retained(void* user, void* session, std::int32_t b, std::int32_t t,
                                          std::int64_t* positions, std::int32_t capacity, std::int32_t* count) {
  auto* self = static_cast<AbiAdapter*>(user);
  return self->status_of([&] {
    const std::vector<long long> kept = static_cast<DecodeSession*>(session)->retained_positions(b, t);
    if (kept.size() > static_cast<std::size_t>(std::max(capacity, 0)))
      throw ProblemError("decode_retained: " + std::to_string(kept.size()) + " positions, room for " +
                         std::to_string(capacity));
    std::copy(kept.begin(), kept.end(), positions);
    *count = static_cast<std::int32_t>(kept.size());
  });
}

attest_status AbiAdapter::page_bytes(void* user, const attest_decode_config_v2* config, std::int64_t* bytes) {
  auto* self = static_cast<AbiAdapter*>(user);
  return self->status_of(
      [&] { *bytes = static_cast<std::int64_t>(self->kernel_->page_bytes(decode_config_of(*config))); });
}

attest_status AbiAdapter::decode_paged(void* user, const attest_decode_config_v2* config, attest_paged_step* step) {
  auto* self = static_cast<AbiAdapter*>(user);
  return self->status_of([&] {
    const DecodeConfig c = decode_config_of(*config);
    const Precision precision = self->kernel_->capabilities().precision;
    const std::size_t batch = c.batch;
    std::size_t tokens = 0;
    for (std::size_t b = 0; b < batch; ++b) tokens += static_cast<std::size_t>(std::max(step->counts[b], 0));
    // The new tokens back to floats, a sequence at a time (its q8_head scales).
    std::vector<float> q, k, v;
    const auto* q_bytes = static_cast<const std::uint8_t*>(step->q);
    const auto* k_bytes = static_cast<const std::uint8_t*>(step->k);
    const auto* v_bytes = static_cast<const std::uint8_t*>(step->v);
    for (std::size_t b = 0; b < batch; ++b) {
      const int n = step->counts[b];
      if (n <= 0) continue;
      const DecodeConfig one = sequence_config(c, b);
      const std::vector<float>& k_scales = one.k_scales;
      const std::vector<float>& v_scales = one.v_scales;
      const std::vector<float> qb = kv_from_storage(q_bytes, precision.q, c.heads, n, c.head_dim);
      const std::vector<float> kb = step_rows_from_storage(k_bytes, precision.k, c.kv_heads, n, c.head_dim, k_scales);
      const std::vector<float> vb = step_rows_from_storage(v_bytes, precision.v, c.kv_heads, n, c.value_dim, v_scales);
      q.insert(q.end(), qb.begin(), qb.end()), k.insert(k.end(), kb.begin(), kb.end()),
          v.insert(v.end(), vb.begin(), vb.end());
      q_bytes += protocol::stored_size(code_of(precision.q), std::size_t(n) * c.heads, c.head_dim);
      k_bytes += protocol::stored_size(code_of(precision.k), std::size_t(n) * c.kv_heads, c.head_dim);
      v_bytes += protocol::stored_size(code_of(precision.v), std::size_t(n) * c.kv_heads, c.value_dim);
    }
    const std::size_t rows = tokens * c.heads;
    std::vector<float> o(rows * c.value_dim), ignored_lse(step->lse ? 0 : rows);
    const PagedStep call{.pool = {static_cast<std::byte*>(step->pool), static_cast<std::size_t>(step->pool_bytes)},
                         .tables = {step->tables, batch * std::size_t(std::max(step->table_width, 0))},
                         .table_width = step->table_width,
                         .lengths = {step->lengths, batch},
                         .counts = {step->counts, batch},
                         .q = q,
                         .k = k,
                         .v = v,
                         .o = o,
                         .lse = step->lse ? std::span<float>(step->lse, rows) : std::span<float>(ignored_lse)};
    self->kernel_->decode_paged(c, call);
    const std::vector<std::uint8_t> bytes = stored(o, precision.o);  // O in its storage format
    std::memcpy(step->o, bytes.data(), bytes.size());
    std::strncpy(step->path, "decode_paged", sizeof step->path - 1);
  });
}

void AbiAdapter::decode_close(void* user, void* session) {
  static_cast<AbiAdapter*>(user)->sessions_.erase(session);
  delete static_cast<DecodeSession*>(session);
}

const char* AbiAdapter::last_error(void* user) { return static_cast<AbiAdapter*>(user)->error_.c_str(); }

}  // namespace attest
