#include "contract_2_7_subjects.h"

#include <algorithm>
#include <cstddef>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "attest/kernels/builtin_kernels.h"
#include "attest/model/problem.h"

namespace attest {
namespace {

constexpr int kValueTile = 32;

// A forward kernel: backward and merge are another declaration's concern (and a ctest's time).
Capabilities forward_only(Capabilities c) {
  c.features.erase(Feature::kBackward);
  c.deterministic_backward = false;
  c.merge = false;
  return c;
}

class ValueWidths final : public Kernel {
 public:
  ValueWidths(bool declared, bool one_tile, std::string name)
      : inner_(make_tiled_kernel({128, 64})), declared_(declared), one_tile_(one_tile), name_(std::move(name)) {}
  std::string name() const override { return name_; }
  Capabilities capabilities() const override {
    Capabilities c = forward_only(inner_->capabilities());
    if (declared_) c.contract.value_dims = {kValueTile, 2 * kValueTile};
    return c;
  }
  void forward(const Problem& p, std::span<float> o, std::span<float> lse) const override {
    const int dv = p.shape.value_dim;
    refuse_other_widths(dv);
    inner_->forward(p, o, lse);
    if (!one_tile_) return;
    // The bug: one V tile of 32 columns per row; the second tile is never accumulated.
    for (std::size_t row = 0; row < o.size() / std::size_t(dv); ++row)
      std::fill(o.begin() + std::ptrdiff_t(row * dv + kValueTile), o.begin() + std::ptrdiff_t((row + 1) * dv), 0.0f);
  }
  std::string last_path() const override { return inner_->last_path(); }

 private:
  static void refuse_other_widths(int dv) {
    if (dv != kValueTile && dv != 2 * kValueTile) throw ProblemError("Dv must be 32 or 64 (whole V blocks of 32)");
  }

  std::unique_ptr<Kernel> inner_;
  bool declared_, one_tile_;
  std::string name_;
};

class AlibiOrBias final : public Kernel {
 public:
  AlibiOrBias(bool declared, bool head_0_slope, std::string name)
      : inner_(make_tiled_kernel({128, 64})),
        declared_(declared),
        head_0_slope_(head_0_slope),
        name_(std::move(name)) {}
  std::string name() const override { return name_; }
  Capabilities capabilities() const override {
    Capabilities c = forward_only(inner_->capabilities());
    c.contract.alibi_excludes_bias = declared_;
    return c;
  }
  void forward(const Problem& p, std::span<float> o, std::span<float> lse) const override {
    const ScoreModifiers& m = p.modifiers;
    if (!m.alibi_slopes.empty() && !m.bias.empty()) throw ProblemError("ALiBi or a bias: one mask input");
    if (!head_0_slope_ || m.alibi_slopes.empty()) return inner_->forward(p, o, lse);
    // The bug: ALiBi alone goes into the one mask input, [Tq][Tk] for every head: head 0's slope.
    Problem shared = p;
    std::fill(shared.modifiers.alibi_slopes.begin(), shared.modifiers.alibi_slopes.end(), m.alibi_slopes[0]);
    inner_->forward(shared, o, lse);
  }
  std::string last_path() const override { return inner_->last_path(); }

 private:
  std::unique_ptr<Kernel> inner_;
  bool declared_, head_0_slope_;
  std::string name_;
};

}  // namespace

std::unique_ptr<Kernel> make_value_widths_kernel(bool declared) {
  return std::make_unique<ValueWidths>(declared, false, declared ? "value-widths-only" : "value-widths-undeclared");
}

std::unique_ptr<Kernel> make_alibi_or_bias_kernel(bool declared) {
  return std::make_unique<AlibiOrBias>(declared, false, declared ? "alibi-or-bias-only" : "alibi-or-bias-undeclared");
}

std::unique_ptr<Kernel> make_value_tile_of_32_mutant(const std::string& name) {
  return std::make_unique<ValueWidths>(true, true, name);
}

std::unique_ptr<Kernel> make_alibi_mask_input_head_0_mutant(const std::string& name) {
  return std::make_unique<AlibiOrBias>(true, true, name);
}

}  // namespace attest
