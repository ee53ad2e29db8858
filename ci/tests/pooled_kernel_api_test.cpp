// A kernel that starts its worker thread in its constructor (a thread pool's shape) and served
// contained: a fork keeps only the calling thread, so the object given to certify has no worker in
// the child and every call would wait forever. Given as a KernelFactory it is built in each child,
// worker and all, and certified; given as an object its first call hangs, and certify throws a load
// error naming the cause and the ways out.
#include <gtest/gtest.h>

#include <condition_variable>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>

#include "attest/certify_api.h"
#include "attest/gtest.h"
#include "attest/kernels/builtin_kernels.h"
#include "quick_api_options.h"

namespace attest {
namespace {

// Hands every call to its one worker thread and waits for the answer.
class PooledKernel final : public Kernel {
 public:
  PooledKernel() : worker_([this] { work(); }) {}
  ~PooledKernel() override {
    {
      const std::lock_guard lock(mutex_);
      stop_ = true;
    }
    wake_.notify_all();
    worker_.join();
  }
  std::string name() const override { return "pooled"; }
  Capabilities capabilities() const override { return inner_->capabilities(); }
  void forward(const Problem& p, std::span<float> o, std::span<float> lse) const override {
    run([&] { inner_->forward(p, o, lse); });
  }
  void backward(const Problem& p, const BackwardInputs& in, const GradientSpans& out) const override {
    run([&] { inner_->backward(p, in, out); });
  }
  void forward_packed(const PackedCall& call, std::span<float> o, std::span<float> lse) const override {
    run([&] { inner_->forward_packed(call, o, lse); });  // the loop kernel declares the packed layout too
  }

 private:
  void run(std::function<void()> job) const {
    std::unique_lock lock(mutex_);
    job_ = std::move(job);
    done_ = false;
    wake_.notify_all();
    wake_.wait(lock, [&] { return done_; });
    if (const std::exception_ptr failure = std::exchange(failure_, nullptr)) std::rethrow_exception(failure);
  }
  void work() {
    std::unique_lock lock(mutex_);
    for (;;) {
      wake_.wait(lock, [&] { return stop_ || job_; });
      if (stop_) return;
      const std::function<void()> job = std::exchange(job_, nullptr);
      lock.unlock();
      std::exception_ptr failure;
      try {
        job();
      } catch (...) {
        failure = std::current_exception();
      }
      lock.lock();
      failure_ = failure;
      done_ = true;
      wake_.notify_all();
    }
  }

  const std::unique_ptr<Kernel> inner_ = make_loop_kernel();
  mutable std::mutex mutex_;
  mutable std::condition_variable wake_;
  mutable std::function<void()> job_;
  mutable std::exception_ptr failure_;
  mutable bool done_ = false;
  bool stop_ = false;
  std::thread worker_;  // last: started once everything it reads exists
};

api::CertifyOptions quick(const std::string& out) { return quick_api_options(out, 2); }

// Kernels the factory built in this process (a child's count is its own).
int built_here = 0;

std::unique_ptr<Kernel> make_pooled() {
  ++built_here;
  return std::make_unique<PooledKernel>();
}

TEST(PooledKernelApi, AFactoryBuildsTheKernelInTheChildWhereItsThreadsRun) {
  built_here = 0;
  const api::Certificate c = api::certify(api::KernelFactory(make_pooled), quick("factory"));
  EXPECT_TRUE(c.certified) << c.report;
  EXPECT_EQ(c.kernel, "pooled");
  EXPECT_EQ(c.verdict.find("in process"), std::string::npos) << c.verdict;
  EXPECT_EQ(built_here, 0) << "the factory ran in the caller's process, not in the child";
}

TEST(PooledKernelApi, ExpectCertifiedTakesAFactory) {
  EXPECT_CERTIFIED(api::KernelFactory(make_pooled), quick("gtest-factory"));
}

TEST(PooledKernelApi, InProcessAFactoryBuildsTheKernelOnce) {
  built_here = 0;
  api::CertifyOptions o = quick("in-process-factory");
  o.in_process = true;
  const api::Certificate c = api::certify(api::KernelFactory(make_pooled), o);
  EXPECT_TRUE(c.certified) << c.report;
  EXPECT_EQ(built_here, 1);
  EXPECT_NE(c.verdict.find("; in process, not contained"), std::string::npos) << c.verdict;
}

TEST(PooledKernelApi, AnEmptyFactoryIsRefused) {
  EXPECT_THROW(api::certify(api::KernelFactory(), quick("empty")), std::invalid_argument);
  EXPECT_THROW(api::certify(api::KernelFactory([] { return std::unique_ptr<Kernel>(); }), quick("null")),
               KernelLoadError);
}

// The object's worker was started before the fork: the child has none, its first call hangs, and
// certify stops there (not one per-call limit per check) with a load error saying why.
TEST(PooledKernelApi, AnObjectWhoseThreadsStartedBeforeTheForkIsALoadErrorNamingTheCause) {
  const PooledKernel pooled;
  try {
    const api::Certificate c = api::certify(pooled, quick("object"));
    FAIL() << "certified or judged, not refused: " << c.verdict;
  } catch (const KernelLoadError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("hung on its first call"), std::string::npos) << what;
    EXPECT_NE(what.find("threads ran here when certify forked it"), std::string::npos) << what;
    EXPECT_NE(what.find("KernelFactory"), std::string::npos) << what;
    EXPECT_NE(what.find("in_process = true"), std::string::npos) << what;
  }
}

}  // namespace
}  // namespace attest
