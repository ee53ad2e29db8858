// The kernel interface every attention implementation under test presents to the harness.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "attest/kernels/cache_policy.h"
#include "attest/kernels/contract.h"
#include "attest/kernels/packed.h"
#include "attest/kernels/path_predicate.h"
#include "attest/model/features.h"
#include "attest/model/problem.h"

namespace attest {

// A kernel misbehaved on one call (crashed, hung, wrote outside its outputs, returned an
// error status): a failing verdict for that case, never a crash of the harness.
class KernelFailure : public std::runtime_error {
 public:
  // kProtocol: a reply that breaks the protocol mid-run (too large, malformed); kDeadline: the
  // whole run's time is up; kTooSlow: a live kernel still working, within what its measured
  // speed predicts, when the stage's time budget ran out (lost coverage, not a failure); kRefused:
  // attest's own limit refuses what the kernel declared (a page pool too large to hold): nothing can
  // be certified, yet the kernel did not misbehave, so the report must not blame it.
  enum class Kind { kCrash, kHang, kFault, kStatus, kProtocol, kDeadline, kTooSlow, kRefused };
  KernelFailure(Kind kind, const std::string& what) : std::runtime_error(what), kind_(kind) {}
  Kind kind() const { return kind_; }
  // A crash, hang or broken protocol makes further cases of the same check pointless (and slow).
  bool isolating() const { return kind_ != Kind::kFault && kind_ != Kind::kStatus; }
  // How a report introduces the failure: whose fault it is.
  const char* headline() const {
    return kind_ == Kind::kRefused ? "attest cannot check this declaration: " : "kernel failure: ";
  }

 private:
  Kind kind_;
};

// A kernel could not be loaded or spoke the protocol wrongly: a usage/load error (exit 2).
class KernelLoadError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// What a kernel declares: the features it supports (features.h), its contract, its empty-row
// policy and its arithmetic. By default: every mask term and structure feature but decode; a
// kernel adds decode and the score modifiers it implements.
// What the kernel promises about its inputs, and so how attest poisons masked keys: NaN, +-inf
// and huge values by default; only huge finite values when the kernel's users keep masked and
// bias-hidden keys finite; and for an additive-mask kernel (masked keys are scored, then get
// -inf: a float mask, PyTorch's math path, ONNX Runtime) finite keys whose every score stays
// inside the declared score format's range, and finite values.
enum class InputDomain { kMaskedMayBeNonFinite, kFinite, kMaskedScored };
const char* to_string(InputDomain d);
bool parse_input_domain(const std::string& name, InputDomain& out);
// "masked_may_be_nonfinite, finite or masked_scored": for messages.
std::string input_domain_names();

struct Capabilities {
  FeatureSet features = FeatureSet::all()
                            .minus(FeatureSet::of_kind(FeatureKind::kModifier))
                            .minus({Feature::kDecode, Feature::kBackward});
  EmptyRowPolicy empty_rows = EmptyRowPolicy::kZero;
  Precision precision;  // where it rounds: storage, scores, P, accumulator, exp (precision.h)
  // Internal paths (Kernel::last_path) that round elsewhere than `precision`; same storage.
  std::map<std::string, Precision> path_precision;
  Contract contract;  // which problems it accepts; its tiles
  InputDomain inputs = InputDomain::kMaskedMayBeNonFinite;
  // Its internal paths and the problems each takes, when it declares them (path_predicate.h);
  // empty: attest discovers the paths over the size ladder.
  std::vector<PathPredicate> paths;
  // With backward: whether its gradients are bitwise the same on every call with the same inputs.
  bool deterministic_backward = false;
  // With decode: which cached positions its sessions keep (cache_policy.h).
  CachePolicy cache;
  // Kernel::merge is implemented: partial attention states merge into one.
  bool merge = false;
  // Kernel::forward_packed is implemented: the packed varlen layout (packed.h), besides forward.
  bool packed = false;
  // With packed, at the C boundary (ABI 2.10): the kernel reads int64 cu_seqlens, not int32.
  bool packed_int64 = false;
  // With decode: tokens per page of a block-table cache that attest owns (Kernel::decode_paged);
  // 0: the kernel keeps its cache in its sessions only.
  int page_tokens = 0;

  bool declares(Feature f) const { return features.contains(f); }
  bool lse() const { return declares(Feature::kLse); }
  bool decode() const { return declares(Feature::kDecode); }
  bool backward() const { return declares(Feature::kBackward); }
  bool forward() const { return !contract.decode_only; }
  int key_tile() const { return contract.key_tile; }  // keys per online-softmax tile; 0 = one pass
  // The key tile of the declared path that serves p (its own, else the contract's).
  int key_tile_for(const Problem& p) const;
  // Every key tile a call may use: the contract's and each declared path's, ascending, without 0.
  std::vector<int> key_tiles() const;
  // The precision of the path that served a call (the kernel's own for an undeclared path).
  Precision precision_for(const std::string& path) const;
  // The coarsest rounding of any path at each place: for comparing two runs that may have taken
  // different paths.
  Precision loosest_precision() const;
  // Whether a problem uses only declared features and lies inside the contract.
  bool supports(const Problem& p) const;
  // Why not (the first undeclared feature or the contract's objection), or empty.
  std::string unsupported_because(const Problem& p) const;
  bool operator==(const Capabilities&) const = default;
};

// Whether a kernel's declared storage lets it take a packed call (float32 Q, K, V and O).
inline bool packed_storage(const Capabilities& c) {
  const Precision& p = c.precision;
  return p.q == Scalar::kF32 && p.k == Scalar::kF32 && p.v == Scalar::kF32 && p.o == Scalar::kF32;
}

// Tokens appended to a decode session share one configuration.
struct DecodeConfig {
  int batch = 1;
  int heads = 1;
  int kv_heads = 1;
  int head_dim = 1;
  int value_dim = 1;
  double scale = 1.0;
  MaskSpec mask;  // decode is always causal; of the mask only the integer terms apply (integer_mask_terms())
  std::optional<double> softcap;    // score modifiers (a bias is a prefill feature)
  std::vector<float> alibi_slopes;  // empty or [H]
  std::vector<float> sinks;         // empty or [H]
  Rope rope;
  // K and V stored q8_head (quantized.h): each sequence's kv heads' static scales, [B][Hkv], fixed
  // before the first token (a value is scale * code, code in [-127, 127]); empty otherwise.
  std::vector<float> k_scales, v_scales;
  void validate() const;  // throws ProblemError naming the field
};

// An incremental decoder over a KV cache. Each step appends n >= 1 tokens (their K and V)
// and attends their queries, at positions length() .. length() + n - 1, causally.
class DecodeSession {
 public:
  virtual ~DecodeSession() = default;
  // q [B][H][n][Dk], k [B][Hkv][n][Dk], v [B][Hkv][n][Dv] -> o [B][H][n][Dv], lse [B][H][n].
  virtual void step(int n, std::span<const float> q, std::span<const float> k, std::span<const float> v,
                    std::span<float> o, std::span<float> lse) = 0;
  virtual long long length() const = 0;
  virtual std::size_t cache_bytes() const = 0;
  // A kernel declaring CachePolicy::kExplicit: the positions query t of the last step attended
  // in sequence b (each query head of the sequence the same), ascending.
  virtual std::vector<long long> retained_positions(int b, int t) const {
    (void)b, (void)t;
    return {};
  }
};

// One call of a block-table decoder (docs/design.md#serving-caches). attest owns the pages and the tables: it
// allocates pages, shares a prompt's pages between sequences and copies a shared page before a
// sequence appends to it. Sequence b holds lengths[b] tokens and appends counts[b] >= 0: token
// position t lives in slot t % page_tokens of page tables[b][t / page_tokens], in the kernel's own
// layout of page_bytes(config) bytes. The call writes the new tokens' slots and nothing else of
// the pool, then attends each new query causally over its sequence.
struct PagedStep {
  std::span<std::byte> pool;             // the physical pages, one after another, 64-byte aligned
  std::span<const std::int32_t> tables;  // [B][table_width]: logical page -> physical page
  int table_width = 0;
  std::span<const std::int64_t> lengths;  // [B]
  std::span<const std::int32_t> counts;   // [B]
  // The sequences' new tokens one after another: sequence b's q [H][n_b][Dk], k and v [Hkv][n_b][D],
  // o [H][n_b][Dv], lse [H][n_b] (lse may be empty: not asked for).
  std::span<const float> q, k, v;
  std::span<float> o, lse;
};
// Throws ProblemError naming what is wrong: spans that do not match the counts and configuration,
// a table entry outside the pool, or a table too narrow for a sequence.
void check_paged_step(const DecodeConfig& c, int page_tokens, std::size_t page_bytes, const PagedStep& step);

// The backward (docs/design.md#backward) of a problem's forward: what it is given and what it writes, in
// float32. o [B][H][Tq][Dv] and lse [B][H][Tq] are the forward's (-inf: an empty row), d_o is
// [B][H][Tq][Dv]; dq, dk and dv have the shapes of q, k and v (dk and dv summed over each GQA
// group), dsinks [H] is written only when the problem has sinks (empty otherwise). `threads` is
// how many workers the call may use (0: the kernel's choice); a deterministic backward gives the
// same bits for every value.
struct BackwardInputs {
  std::span<const float> o, lse, d_o;
  int threads = 0;
};
struct GradientSpans {
  std::span<float> dq, dk, dv, dsinks;
};

// Partial attention states over disjoint sets of keys, to be merged into the state over their union
// (split-KV decoding, cascade and ring attention). Part i holds o [rows][Dv] and lse [rows]; a row
// whose part saw no key has lse = -inf and an o that must not be read (attest sends NaN). o holds
// values of `storage` (f32 or bf16, held in floats); lse is f32.
struct MergeInputs {
  int parts = 0;
  int rows = 0;
  int value_dim = 0;
  Scalar storage = Scalar::kF32;
  std::span<const float> o;    // [parts][rows][value_dim]
  std::span<const float> lse;  // [parts][rows]
};
// Throws ProblemError naming what is wrong: counts out of range, spans of other sizes, a storage
// other than f32 or bf16.
void check_merge_inputs(const MergeInputs& in, std::span<const float> o, std::span<const float> lse);

class Kernel {
 public:
  virtual ~Kernel() = default;
  virtual std::string name() const = 0;
  virtual Capabilities capabilities() const = 0;
  // Writes o [B][H][Tq][Dv] and, when lse is non-empty, lse [B][H][Tq]. The problem is valid.
  virtual void forward(const Problem& p, std::span<float> o, std::span<float> lse) const = 0;
  // Only for kernels whose capabilities declare backward. The problem is valid and its storage float32.
  virtual void backward(const Problem& p, const BackwardInputs& in, const GradientSpans& out) const;
  // Only for kernels whose capabilities declare merge: o [rows][Dv] = sum_i w_i o_i / sum_i w_i with
  // w_i = exp(lse_i), and lse [rows] = log(sum_i w_i); a row no part saw a key of: o = 0, lse = -inf.
  // The inputs are valid (check_merge_inputs).
  virtual void merge(const MergeInputs& in, std::span<float> o, std::span<float> lse) const;
  // Only for kernels whose capabilities declare packed: o [total_q][H][Dv] and, when lse is
  // non-empty, lse [H][total_q] of a packed call (packed.h). The call is valid (check_packed_call).
  virtual void forward_packed(const PackedCall& call, std::span<float> o, std::span<float> lse) const;
  // Only for kernels whose capabilities declare decode.
  virtual std::unique_ptr<DecodeSession> open_decode(const DecodeConfig& config) const;
  // With Capabilities::page_tokens: the bytes of one page for `config`, and one block-table call.
  virtual std::size_t page_bytes(const DecodeConfig& config) const;
  virtual void decode_paged(const DecodeConfig& config, const PagedStep& step) const;
  // The internal path that served the last forward call (for per-path certificates).
  virtual std::string last_path() const { return "default"; }
  // The internal path the last backward call reported, named by its failures; "": it reported none.
  virtual std::string last_backward_path() const { return {}; }
  // The kernel's own name for the path that served its last packed call (a C kernel's
  // attest_packed_outputs.path, e.g. "varlen"), named by packed failures; "": it reported none.
  virtual std::string last_packed_path() const { return {}; }
  // Calls still running at `cutoff` may be abandoned (KernelFailure kTooSlow when the kernel's
  // measured speed explains the wait, kHang when it does not); none when empty. Kernels that
  // run in attest's own process cannot be interrupted and ignore it.
  virtual void set_cutoff(std::optional<std::chrono::steady_clock::time_point> cutoff) const { (void)cutoff; }
};

struct KernelEntry {
  std::string name;
  std::string description;
  std::function<std::unique_ptr<Kernel>()> make;
};

// The one table of built-in kernels. Tests, properties, fuzz targets and certify iterate it.
const std::vector<KernelEntry>& kernel_registry();
// Finds a built-in kernel by name; throws std::invalid_argument listing the known names.
std::unique_ptr<Kernel> make_kernel(const std::string& name);

// Runs a kernel and returns fresh outputs (o, lse); convenience for tests and drivers.
struct Outputs {
  std::vector<float> o;
  std::vector<float> lse;
  std::string path = "default";  // the internal path that served the call (Kernel::last_path)
};
Outputs run_forward(const Kernel& kernel, const Problem& p);

// The path every backward call is counted on (coverage and probes): apart from the forward's.
inline constexpr const char* kBackwardPath = "backward";
inline constexpr const char* kMergePath = "merge";    // the path of a Kernel::merge call
inline constexpr const char* kPackedPath = "packed";  // the path of a Kernel::forward_packed call

// A backward call's fresh outputs.
struct Gradients {
  std::vector<float> dq, dk, dv, dsinks;
  std::string path = kBackwardPath;
};
Gradients run_backward(const Kernel& kernel, const Problem& p, const BackwardInputs& in);

// Dense KV-cache size: 2 (K and V) x layers x tokens x kv heads x width x element bytes.
std::size_t dense_kv_cache_bytes(std::size_t layers, std::size_t tokens, std::size_t kv_heads, std::size_t head_dim,
                                 std::size_t element_bytes);

}  // namespace attest
