#include "declared_model.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include "attest/kernels/builtin_kernels.h"
#include "attest/kernels/contract.h"
#include "attest/kernels/packed.h"
#include "attest/kernels/path_predicate.h"
#include "attest/model/problem.h"
#include "model_decode.h"

namespace attest {
namespace {

// Rows [b * n, (b + 1) * n) of a buffer of B equal blocks.
template <typename T>
std::vector<T> block(const std::vector<T>& all, int batch, int b) {
  if (all.empty()) return {};
  const std::size_t n = all.size() / std::size_t(batch);
  return {all.begin() + std::ptrdiff_t(b * n), all.begin() + std::ptrdiff_t((b + 1) * n)};
}

// Batch entry b of p, as a problem of its own (every per-batch input sliced, the rest shared).
Problem batch_entry(const Problem& p, int b) {
  const int batch = p.shape.batch;
  Problem out = p;
  out.shape.batch = 1;
  out.q = block(p.q, batch, b), out.k = block(p.k, batch, b), out.v = block(p.v, batch, b);
  MaskSpec& m = out.mask;
  m.kv_valid = block(p.mask.kv_valid, batch, b), m.q_valid = block(p.mask.q_valid, batch, b);
  m.q_segment = block(p.mask.q_segment, batch, b), m.k_segment = block(p.mask.k_segment, batch, b);
  m.explicit_mask = block(p.mask.explicit_mask, batch, b);
  if (p.modifiers.bias_per_batch) out.modifiers.bias = block(p.modifiers.bias, batch, b);
  return out;
}

class DeclaredModel final : public Kernel {
 public:
  DeclaredModel(const Capabilities& declaration, std::string name)
      : declaration_(declaration), name_(std::move(name)), exact_(make_loop_kernel()) {}
  std::string name() const override { return name_; }
  Capabilities capabilities() const override { return declaration_; }
  std::string last_path() const override { return path_; }

  // A declared path is served under its name: "per-batch" ones a batch entry at a time, the others
  // (and problems no predicate takes, "default") whole. Each row is the same exact computation.
  void forward(const Problem& p, std::span<float> o, std::span<float> lse) const override {
    refuse_undeclared(p);
    const PathPredicate* path = declared_path_for(declaration_.paths, p);
    path_ = path ? path->path : "default";
    // Summed in the call's declared key tiles, as the bound counts them (seed 7 #185: a bf16 sum
    // over 800 keys in one pass stagnated past the bound of a 64-key tile).
    const auto model = make_model_kernel(declaration_.precision, declaration_.key_tile_for(p));
    // The row's LSE says whether it saw a key (-inf: none, and no sink): the NaN policy's rows.
    std::vector<float> own_lse(p.lse_size());
    if (path_.starts_with("per-batch")) {
      const std::size_t o_rows = p.o_size() / std::size_t(p.shape.batch),
                        lse_rows = p.lse_size() / std::size_t(p.shape.batch);
      for (int b = 0; b < p.shape.batch; ++b)
        model->forward(batch_entry(p, b), o.subspan(b * o_rows, o_rows),
                       std::span(own_lse).subspan(b * lse_rows, lse_rows));
    } else {
      model->forward(p, o, own_lse);
    }
    if (declaration_.empty_rows == EmptyRowPolicy::kNan) {
      const float nan = std::numeric_limits<float>::quiet_NaN();
      const int dv = p.shape.value_dim;
      for (std::size_t row = 0; row < own_lse.size(); ++row)
        if (own_lse[row] == -std::numeric_limits<float>::infinity()) {
          own_lse[row] = nan;
          std::fill(o.begin() + static_cast<std::ptrdiff_t>(row * dv),
                    o.begin() + static_cast<std::ptrdiff_t>((row + 1) * dv), nan);
        }
    }
    if (!lse.empty()) std::copy(own_lse.begin(), own_lse.end(), lse.begin());
  }

  // A packed call (declared packed, float32 storage) a sequence at a time: each as a padded problem
  // of its own (its queries at q_offset + i, its keys from 0), through forward, so every row is the
  // same exact computation as in the padded batch.
  void forward_packed(const PackedCall& c, std::span<float> o, std::span<float> lse) const override {
    const Shape& s = c.terms.shape;
    const std::size_t dk = s.head_dim, dv = s.value_dim;
    for (int b = 0; b < c.sequences(); ++b) {
      const int q0 = c.cu_seqlens_q[b], nq = c.cu_seqlens_q[b + 1] - q0;
      const int k0 = c.cu_seqlens_k[b], nk = c.cu_seqlens_k[b + 1] - k0;
      if (nq == 0) continue;
      Problem one = c.terms;
      one.shape.batch = 1, one.shape.q_len = nq, one.shape.k_len = std::max(nk, 1);
      if (nk == 0) one.mask.kv_valid = {0};  // a sequence without keys: its rows are empty
      one.q.assign(std::size_t(s.heads) * nq * dk, 0.0f);
      one.k.assign(std::size_t(s.kv_heads) * one.shape.k_len * dk, 0.0f);
      one.v.assign(std::size_t(s.kv_heads) * one.shape.k_len * dv, 0.0f);
      for (int h = 0; h < s.heads; ++h)
        for (int i = 0; i < nq; ++i)
          std::copy_n(&c.q[(std::size_t(q0 + i) * s.heads + h) * dk], dk, &one.q[(std::size_t(h) * nq + i) * dk]);
      for (int g = 0; g < s.kv_heads; ++g)
        for (int j = 0; j < nk; ++j) {
          const std::size_t from = std::size_t(k0 + j) * s.kv_heads + g, to = std::size_t(g) * one.shape.k_len + j;
          std::copy_n(&c.k[from * dk], dk, &one.k[to * dk]);
          std::copy_n(&c.v[from * dv], dv, &one.v[to * dv]);
        }
      std::vector<float> one_o(one.o_size()), one_lse(one.lse_size());
      forward(one, one_o, one_lse);
      for (int h = 0; h < s.heads; ++h)
        for (int i = 0; i < nq; ++i) {
          const std::size_t row = std::size_t(h) * nq + i, token = std::size_t(q0) + i;
          std::copy_n(&one_o[row * dv], dv, &o[(token * s.heads + h) * dv]);
          if (!lse.empty()) lse[std::size_t(h) * c.total_q() + token] = one_lse[row];
        }
    }
    path_ = kPackedPath;
  }

  // Decode sessions and block-table calls attend through this forward: the same roundings, the
  // same empty-row policy, evicting as the declared cache policy says.
  std::unique_ptr<DecodeSession> open_decode(const DecodeConfig& config) const override {
    return open_model_decode(*this, config, storage(), declaration_.cache);
  }
  std::size_t page_bytes(const DecodeConfig& config) const override {
    if (declaration_.page_tokens < 1) return Kernel::page_bytes(config);
    return model_page_bytes(config, declaration_.page_tokens);
  }
  void decode_paged(const DecodeConfig& config, const PagedStep& step) const override {
    if (declaration_.page_tokens < 1) return Kernel::decode_paged(config, step);
    model_decode_paged(*this, config, storage(), declaration_.cache, declaration_.page_tokens, step);
  }

  // A declared merge is the exact log-sum-exp merge (in f32, the running max subtracted).
  void merge(const MergeInputs& in, std::span<float> o, std::span<float> lse) const override {
    merge_states(in, o, lse);
  }

  // A backward is declared only in float32 (the gradient's bound is a float32 backward's): the
  // loop kernel's, exact in float32.
  void backward(const Problem& p, const BackwardInputs& in, const GradientSpans& out) const override {
    exact_->backward(p, in, out);
  }

 private:
  // Like a real kernel built for its ABI 2.7 declaration (a Dv-wide quantized V, one mask input),
  // the model refuses what that declaration excludes: attest must never send it.
  void refuse_undeclared(const Problem& p) const {
    const Contract& c = declaration_.contract;
    if (!c.accepts_value_dim(p.shape.value_dim, p.shape.head_dim))
      throw ProblemError("Dv = " + std::to_string(p.shape.value_dim) + " is not a declared value width");
    if (c.alibi_excludes_bias && !p.modifiers.alibi_slopes.empty() && !p.modifiers.bias.empty())
      throw ProblemError("ALiBi and a bias together (declared one or the other)");
  }

  Problem::Storage storage() const {
    const Precision& p = declaration_.precision;
    return {p.q, p.k, p.v, p.bias};
  }

  const Capabilities declaration_;
  const std::string name_;
  mutable std::string path_ = "default";
  std::unique_ptr<Kernel> exact_;
};

}  // namespace

std::unique_ptr<Kernel> make_declared_model(const Capabilities& declaration, std::string name) {
  return std::make_unique<DeclaredModel>(declaration, std::move(name));
}

}  // namespace attest
