#include "declared_model.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "attest/builtin_kernels.h"
#include "model_decode.h"

namespace attest {
namespace {

class DeclaredModel final : public Kernel {
 public:
  DeclaredModel(const Capabilities& declaration, std::string name)
      : declaration_(declaration),
        name_(std::move(name)),
        model_(make_model_kernel(declaration.precision)),
        exact_(make_loop_kernel()) {}
  std::string name() const override { return name_; }
  Capabilities capabilities() const override { return declaration_; }

  void forward(const Problem& p, std::span<float> o, std::span<float> lse) const override {
    // The row's LSE says whether it saw a key (-inf: none, and no sink): the NaN policy's rows.
    std::vector<float> own_lse(p.lse_size());
    model_->forward(p, o, own_lse);
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

  // Decode sessions attend through this forward: the same roundings, the same empty-row policy.
  std::unique_ptr<DecodeSession> open_decode(const DecodeConfig& config) const override {
    const Precision& p = declaration_.precision;
    return open_model_decode(*this, config, {p.q, p.k, p.v, p.bias});
  }

  // A backward is declared only in float32 (the gradient's bound is a float32 backward's): the
  // loop kernel's, exact in float32.
  void backward(const Problem& p, const BackwardInputs& in, const GradientSpans& out) const override {
    exact_->backward(p, in, out);
  }

 private:
  const Capabilities declaration_;
  const std::string name_;
  std::unique_ptr<Kernel> model_, exact_;
};

}  // namespace

std::unique_ptr<Kernel> make_declared_model(const Capabilities& declaration, std::string name) {
  return std::make_unique<DeclaredModel>(declaration, std::move(name));
}

}  // namespace attest
