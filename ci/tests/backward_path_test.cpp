// The path a backward call reports crosses the kernel process: the C ABI adapter writes the path
// the served kernel reports for its backward, and the process kernel reads it back, so that a
// backward failure names it (and never the last forward's path).
#include <gtest/gtest.h>

#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "attest/abi/abi_adapter.h"
#include "attest/abi/process_kernel_server.hpp"
#include "attest/kernels/builtin_kernels.h"
#include "process_kernel.h"

namespace attest {
namespace {

// The loop kernel, its forward reporting "loop-forward" and its backward `backward_path`.
class NamedBackward final : public Kernel {
 public:
  explicit NamedBackward(std::string backward_path) : backward_path_(std::move(backward_path)) {}
  std::string name() const override { return "named-backward"; }
  Capabilities capabilities() const override { return inner_->capabilities(); }
  void forward(const Problem& p, std::span<float> o, std::span<float> lse) const override {
    inner_->forward(p, o, lse);
  }
  void backward(const Problem& p, const BackwardInputs& in, const GradientSpans& out) const override {
    inner_->backward(p, in, out);
  }
  std::string last_path() const override { return "loop-forward"; }
  std::string last_backward_path() const override { return backward_path_; }

 private:
  std::unique_ptr<Kernel> inner_ = make_loop_kernel();
  std::string backward_path_;
};

// One forward, then one backward of a small problem through a kernel process serving NamedBackward.
std::string path_after_backward(const std::string& reported) {
  ProcessKernel::Options served;
  served.description = "named-backward";
  served.serve_in_child = [reported](int in, int out) {
    AbiAdapter adapter(std::make_unique<NamedBackward>(reported));
    return protocol::serve_descriptor(adapter.descriptor(), in, out);
  };
  const ProcessKernel kernel(std::move(served));
  Problem p;
  p.shape = {.batch = 1, .heads = 2, .kv_heads = 1, .q_len = 3, .k_len = 5, .head_dim = 4, .value_dim = 4};
  p.resize_buffers();
  for (std::size_t i = 0; i < p.q.size(); ++i) p.q[i] = 0.125f * float(i % 7) - 0.25f;
  for (std::size_t i = 0; i < p.k.size(); ++i) p.k[i] = 0.25f * float(i % 5) - 0.5f;
  for (std::size_t i = 0; i < p.v.size(); ++i) p.v[i] = 0.5f * float(i % 3) - 0.5f;
  const Outputs forward = run_forward(kernel, p);
  EXPECT_EQ(kernel.last_path(), "loop-forward");
  const std::vector<float> d_o(p.o_size(), 0.5f);
  std::vector<float> dq(p.q_size()), dk(p.k_size()), dv(p.v_size());
  kernel.backward(p, {forward.o, forward.lse, d_o, 0}, {dq, dk, dv, {}});
  EXPECT_EQ(kernel.last_path(), "loop-forward");  // the forward's path stays the forward's
  return kernel.last_backward_path();
}

TEST(BackwardPath, AReportedPathCrossesTheKernelProcess) { EXPECT_EQ(path_after_backward("tiles-128"), "tiles-128"); }

TEST(BackwardPath, NoneReportedIsNoneRead) { EXPECT_EQ(path_after_backward(""), ""); }

}  // namespace
}  // namespace attest
