// How the harness runs a kernel: outputs pre-filled with NaN between guard canaries, inputs
// followed by NaN so a read past a buffer poisons the result instead of passing unseen.
#pragma once

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "attest/kernels/kernel.h"

namespace attest {

// A property asked to run a kernel on a problem outside its declaration (features, contract,
// storage). attest never sends one: the property reports that case as not exercised. Only the
// harness can raise one that counts: it carries a token drawn once per process, so an in-process
// kernel throwing its own (re-declared) OutsideDeclaration fails the case instead of dodging it.
class OutsideDeclaration : public std::runtime_error {
 public:
  bool raised_by_attest() const;

 private:
  friend struct HarnessRaise;  // the harness (harness.cpp) alone constructs one
  explicit OutsideDeclaration(const std::string& why);
  std::uint64_t token_;
};

struct GuardedOutputs : Outputs {
  bool canaries_intact = true;
  std::string canary_report;  // which guard was overwritten, at which offset
  bool inputs_intact = true;  // q, k, v bitwise unchanged by the call
};

// Whether an output element still holds the NaN the outputs were filled with (never written).
bool never_written(float x);

// Runs kernel.forward on a copy of p whose input buffers carry NaN tails. A write outside the
// outputs or into the inputs throws KernelFailure (kFault).
GuardedOutputs run_guarded(const Kernel& kernel, const Problem& p);

// Runs kernel.backward as run_guarded runs forward: every input (q, k, v, O, LSE, dO) with a NaN
// tail, the gradients pre-filled with NaN between canaries. A write outside them or into an input
// throws KernelFailure (kFault).
Gradients run_backward_guarded(const Kernel& kernel, const Problem& p, const BackwardInputs& in);

// Decode sessions and block-table calls, guarded as run_guarded guards a forward: an
// OutsideDeclaration the kernel throws itself fails the call. Within an open session, a reply
// that broke the ABI (such as a negative decode_retained count, which the kernel host refuses) is
// the kernel's failure, named as such, never a load error.
std::unique_ptr<DecodeSession> open_guarded_session(const Kernel& kernel, const DecodeConfig& config);
std::size_t guarded_page_bytes(const Kernel& kernel, const DecodeConfig& config);
void run_paged_guarded(const Kernel& kernel, const DecodeConfig& config, const PagedStep& step);

// The internal path to name when a backward check of `kernel` fails: the one its last backward call
// reported, or a text saying the path is unknown (never its last forward's).
std::string backward_call_path(const Kernel& kernel);
// The path to name when a packed check of `kernel` fails: "packed", with the kernel's own name for
// it when its last packed call reported one ("packed (varlen)").
std::string packed_call_path(const Kernel& kernel);
// The internal path to name when a check of `kernel` fails: the one its last forward call through
// run_guarded reported, or, when its last call on this thread was a backward, backward_call_path.
// forget_last_call() starts a check afresh.
std::string last_call_path(const Kernel& kernel);
void forget_last_call();

// While one is alive, run_guarded on this thread records each forward call's problem (its
// address: a property passes its case itself, or a probe built from it) and the internal path
// that served it: the property driver sees a check whose probes all left the case's path.
class PathLog {
 public:
  struct Call {
    const Problem* problem;
    std::string path;
  };
  PathLog();
  ~PathLog();
  PathLog(const PathLog&) = delete;
  PathLog& operator=(const PathLog&) = delete;
  const std::vector<Call>& calls() const { return calls_; }
  static void record(const Problem& p, const std::string& path);

 private:
  std::vector<Call> calls_;
  PathLog* outer_;
};

}  // namespace attest
