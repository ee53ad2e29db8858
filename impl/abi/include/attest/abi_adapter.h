// Bridges between attest's C++ kernel interface and the C ABI / wire format (both directions),
// so that a capability, a contract field or a problem field is mapped in one place.
#pragma once

#include <map>
#include <memory>
#include <stdexcept>
#include <vector>

#include "attest/attest_abi.h"
#include "attest/kernel.h"
#include "attest/process_protocol.hpp"

namespace attest {

// The problem as the C ABI and the protocol carry it: scale and q_offset made explicit, q/k/v as
// the bytes of the kernel's storage formats (the values must be representable there).
protocol::WireProblem to_wire(const Problem& p, const Precision& precision);
protocol::WireDecodeConfig to_wire(const DecodeConfig& c);
protocol::WireBackward to_wire(const Problem& p, const BackwardInputs& in, const Precision& precision);
// Gradients as they come back (dq, dk, dv as bytes in the storage types of q, k and v) into the
// caller's spans. Returns false, writing nothing, when a size does not match the problem.
bool gradients_from_storage(const std::vector<std::uint8_t>& dq, const std::vector<std::uint8_t>& dk,
                            const std::vector<std::uint8_t>& dv, const std::vector<float>& dsinks,
                            const Precision& precision, const GradientSpans& out);
// Back from the C view; validates nothing (Problem::validate does).
Problem from_wire(const attest_problem_v2& h, const Precision& precision);
// Values from a buffer in storage format `s`, and values (representable in `s`) into one.
// A format's attest_precision code.
std::int32_t abi_code(Scalar s);
// Float formats only (f32, bf16, f16).
std::vector<float> floats_from_storage(const std::uint8_t* data, std::size_t n, Scalar s);
std::vector<std::uint8_t> stored(const std::vector<float>& values, Scalar s);
// K or V of a problem, [outer][tokens][width], in any storage format (quantized ones as rows in
// attest_precision's layout; q8_head one group per kv head of a sequence), and back.
std::vector<std::uint8_t> stored_kv(const std::vector<float>& values, Scalar s, int tokens, int width);
std::vector<float> kv_from_storage(const std::uint8_t* data, Scalar s, std::size_t outer, int tokens, int width);
// A decode step's q, k and v in their storage formats (q8_head K and V as codes of the session's
// static scales).
struct StoredStep {
  std::vector<std::uint8_t> q, k, v;
};
StoredStep stored_step(const DecodeConfig& c, const Precision& precision, int n, std::span<const float> q,
                       std::span<const float> k, std::span<const float> v);
// A block-table call's new tokens (PagedStep's packing, sequence after sequence) in their storage formats.
StoredStep stored_paged(const DecodeConfig& c, const Precision& precision, std::span<const std::int32_t> counts,
                        std::span<const float> q, std::span<const float> k, std::span<const float> v);
// A decode configuration as attest's model has it (q8_head scales from reserved[0] and [1]).
DecodeConfig decode_config_of(const attest_decode_config_v2& c);

// A descriptor as attest understands it. Throws std::invalid_argument naming the field when it
// declares what this attest cannot certify yet, or is inconsistent (min > max, a zero tile...).
Capabilities capabilities_from_descriptor(const protocol::Descriptor& d);
protocol::Descriptor descriptor_from_capabilities(const Capabilities& c, const std::string& name);

// A version-2 C descriptor whose calls run a C++ kernel (so `attest kernel-host` serves built-in
// kernels and mutants the same way as plugins). The adapter owns the kernel.
class AbiAdapter {
 public:
  explicit AbiAdapter(std::unique_ptr<Kernel> kernel);
  const attest_kernel_v2* descriptor() const { return &descriptor_; }

 private:
  static attest_status forward(void* user, const attest_problem_v2* problem, attest_outputs_v2* out);
  static attest_status decode_open(void* user, const attest_decode_config_v2* config, void** session);
  static attest_status decode_step(void* user, void* session, std::int32_t n, const void* q, const void* k,
                                   const void* v, void* o, float* lse, char path[32]);
  static void decode_close(void* user, void* session);
  static attest_status page_bytes(void* user, const attest_decode_config_v2* config, std::int64_t* bytes);
  static attest_status decode_paged(void* user, const attest_decode_config_v2* config, attest_paged_step* step);
  static attest_status decode_retained(void* user, void* session, std::int32_t b, std::int32_t t,
                                       std::int64_t* positions, std::int32_t capacity, std::int32_t* count);
  static attest_status backward(void* user, const attest_problem_v2* problem, const attest_backward_inputs* in,
                                attest_gradients* out);
  static const char* last_error(void* user);
  template <typename Call>
  attest_status status_of(Call&& call);

  std::unique_ptr<Kernel> kernel_;
  std::map<const void*, DecodeConfig> sessions_;  // each open session's configuration
  std::string name_;
  std::string error_;
  std::vector<std::int32_t> head_dims_;
  std::vector<std::string> path_names_;
  std::vector<attest_path_precision> paths_;
  std::vector<std::string> declared_names_;
  std::vector<attest_path_predicate> declared_paths_;
  attest_kernel_v2 descriptor_{};
};

}  // namespace attest
