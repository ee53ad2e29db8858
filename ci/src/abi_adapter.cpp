#include "abi_adapter.h"

#include <cstring>

namespace attest {

protocol::WireProblem to_wire(const Problem& p) {
  protocol::WireProblem w;
  attest_problem& h = w.header;
  const Shape& s = p.shape;
  h.batch = s.batch, h.heads = s.heads, h.kv_heads = s.kv_heads, h.q_len = s.q_len, h.k_len = s.k_len;
  h.head_dim = s.head_dim, h.value_dim = s.value_dim;
  h.scale = p.effective_scale();
  h.q_offset = p.effective_q_offset();
  h.causal = p.mask.causal;
  h.window = p.mask.window.value_or(0);
  h.rope = p.rope.enabled;
  h.rope_base = p.rope.base;
  w.kv_valid.assign(p.mask.kv_valid.begin(), p.mask.kv_valid.end());
  w.q_valid.assign(p.mask.q_valid.begin(), p.mask.q_valid.end());
  w.q_segment.assign(p.mask.q_segment.begin(), p.mask.q_segment.end());
  w.k_segment.assign(p.mask.k_segment.begin(), p.mask.k_segment.end());
  w.explicit_mask = p.mask.explicit_mask;
  w.q = p.q, w.k = p.k, w.v = p.v;
  return w;
}

namespace {

Problem from_wire(const attest_problem& h) {
  Problem p;
  p.shape = {h.batch, h.heads, h.kv_heads, h.q_len, h.k_len, h.head_dim, h.value_dim};
  p.scale = h.scale;
  p.q_offset = h.q_offset;
  p.mask.causal = h.causal != 0;
  if (h.window) p.mask.window = h.window;
  p.rope.enabled = h.rope != 0;
  p.rope.base = h.rope_base;
  const std::size_t b = h.batch, tq = h.q_len, tk = h.k_len;
  if (h.kv_valid) p.mask.kv_valid.assign(h.kv_valid, h.kv_valid + b);
  if (h.q_valid) p.mask.q_valid.assign(h.q_valid, h.q_valid + b);
  if (h.q_segment) p.mask.q_segment.assign(h.q_segment, h.q_segment + b * tq);
  if (h.k_segment) p.mask.k_segment.assign(h.k_segment, h.k_segment + b * tk);
  if (h.explicit_mask) p.mask.explicit_mask.assign(h.explicit_mask, h.explicit_mask + b * tq * tk);
  p.q.assign(h.q, h.q + p.q_size());
  p.k.assign(h.k, h.k + p.k_size());
  p.v.assign(h.v, h.v + p.v_size());
  return p;
}

std::uint32_t capability_bits(const Capabilities& c) {
  return (c.causal ? ATTEST_CAP_CAUSAL : 0) | (c.window ? ATTEST_CAP_WINDOW : 0) |
         (c.key_padding ? ATTEST_CAP_KEY_PADDING : 0) | (c.query_padding ? ATTEST_CAP_QUERY_PADDING : 0) |
         (c.segments ? ATTEST_CAP_SEGMENTS : 0) | (c.explicit_mask ? ATTEST_CAP_EXPLICIT_MASK : 0) |
         (c.gqa ? ATTEST_CAP_GQA : 0) | (c.lse ? ATTEST_CAP_LSE : 0) | (c.rope ? ATTEST_CAP_ROPE : 0) |
         (c.decode ? ATTEST_CAP_DECODE : 0);
}

}  // namespace

Capabilities capabilities_from_abi(std::uint32_t bits, std::int32_t empty_rows, std::int32_t precision,
                                   std::int32_t key_tile) {
  Capabilities c;
  c.causal = bits & ATTEST_CAP_CAUSAL;
  c.window = bits & ATTEST_CAP_WINDOW;
  c.key_padding = bits & ATTEST_CAP_KEY_PADDING;
  c.query_padding = bits & ATTEST_CAP_QUERY_PADDING;
  c.segments = bits & ATTEST_CAP_SEGMENTS;
  c.explicit_mask = bits & ATTEST_CAP_EXPLICIT_MASK;
  c.gqa = bits & ATTEST_CAP_GQA;
  c.lse = bits & ATTEST_CAP_LSE;
  c.rope = bits & ATTEST_CAP_ROPE;
  c.decode = bits & ATTEST_CAP_DECODE;
  c.empty_rows = empty_rows == ATTEST_EMPTY_NAN ? EmptyRowPolicy::kNan : EmptyRowPolicy::kZero;
  c.precision = precision == ATTEST_BF16 ? ComputePrecision::kBF16
                : precision == ATTEST_F16 ? ComputePrecision::kF16
                                          : ComputePrecision::kF32;
  c.key_tile = key_tile;
  return c;
}

AbiAdapter::AbiAdapter(std::unique_ptr<Kernel> kernel) : kernel_(std::move(kernel)), name_(kernel_->name()) {
  const Capabilities c = kernel_->capabilities();
  descriptor_.abi_version = ATTEST_ABI_VERSION;
  descriptor_.name = name_.c_str();
  descriptor_.capabilities = capability_bits(c);
  descriptor_.empty_rows = c.empty_rows == EmptyRowPolicy::kNan ? ATTEST_EMPTY_NAN : ATTEST_EMPTY_ZERO;
  descriptor_.precision = c.precision == ComputePrecision::kBF16 ? ATTEST_BF16
                          : c.precision == ComputePrecision::kF16 ? ATTEST_F16
                                                                  : ATTEST_F32;
  descriptor_.key_tile = c.key_tile;
  descriptor_.user = this;
  descriptor_.forward = &AbiAdapter::forward;
  if (c.decode) {
    descriptor_.decode_open = &AbiAdapter::decode_open;
    descriptor_.decode_step = &AbiAdapter::decode_step;
    descriptor_.decode_close = &AbiAdapter::decode_close;
  }
  descriptor_.last_error = &AbiAdapter::last_error;
}

attest_status AbiAdapter::forward(void* user, const attest_problem* problem, attest_outputs* out) {
  auto* self = static_cast<AbiAdapter*>(user);
  try {
    const Problem p = from_wire(*problem);
    p.validate();
    self->kernel_->forward(p, std::span<float>(out->o, p.o_size()),
                           out->lse ? std::span<float>(out->lse, p.lse_size()) : std::span<float>());
    std::strncpy(out->path, self->kernel_->last_path().c_str(), sizeof out->path - 1);
    return ATTEST_OK;
  } catch (const ProblemError& e) {
    self->error_ = e.what();
    return ATTEST_INVALID_ARGUMENT;
  } catch (const std::exception& e) {
    self->error_ = e.what();
    return ATTEST_INTERNAL_ERROR;
  }
}

attest_status AbiAdapter::decode_open(void* user, const attest_decode_config* c, void** session) {
  auto* self = static_cast<AbiAdapter*>(user);
  try {
    DecodeConfig config{c->batch, c->heads, c->kv_heads, c->head_dim, c->value_dim, c->scale, {}, {}};
    if (c->window) config.window = c->window;
    config.rope = {c->rope != 0, c->rope_base};
    *session = self->kernel_->open_decode(config).release();
    self->sessions_[*session] = config;
    return ATTEST_OK;
  } catch (const std::exception& e) {
    self->error_ = e.what();
    return ATTEST_INVALID_ARGUMENT;
  }
}

attest_status AbiAdapter::decode_step(void* user, void* session, std::int32_t n, const float* q, const float* k,
                                      const float* v, float* o, float* lse) {
  auto* self = static_cast<AbiAdapter*>(user);
  auto* s = static_cast<DecodeSession*>(session);
  try {
    // Sizes follow from the session's configuration; the server checked the arrays.
    const DecodeConfig& c = self->sessions_.at(session);
    const std::size_t rows = std::size_t(c.batch) * c.heads * n;
    const std::size_t kv = std::size_t(c.batch) * c.kv_heads * n;
    s->step(n, {q, rows * c.head_dim}, {k, kv * c.head_dim}, {v, kv * c.value_dim}, {o, rows * c.value_dim},
            {lse, rows});
    return ATTEST_OK;
  } catch (const std::exception& e) {
    self->error_ = e.what();
    return ATTEST_INVALID_ARGUMENT;
  }
}

void AbiAdapter::decode_close(void* user, void* session) {
  static_cast<AbiAdapter*>(user)->sessions_.erase(session);
  delete static_cast<DecodeSession*>(session);
}

const char* AbiAdapter::last_error(void* user) { return static_cast<AbiAdapter*>(user)->error_.c_str(); }

}  // namespace attest
