// Bridges between attest's C++ kernel interface and the C ABI / wire format.
#pragma once

#include <map>
#include <memory>

#include "attest/attest_abi.h"
#include "attest/kernel.h"
#include "attest/process_protocol.hpp"

namespace attest {

// The problem as the C ABI and the protocol carry it (scale and q_offset made explicit).
protocol::WireProblem to_wire(const Problem& p);

Capabilities capabilities_from_abi(std::uint32_t bits, std::int32_t empty_rows, std::int32_t precision,
                                   std::int32_t key_tile);

// A C-ABI descriptor whose calls run a C++ kernel (so `attest kernel-host` serves built-in
// kernels and mutants the same way as plugins). The descriptor owns the kernel.
class AbiAdapter {
 public:
  explicit AbiAdapter(std::unique_ptr<Kernel> kernel);
  const attest_kernel* descriptor() const { return &descriptor_; }

 private:
  static attest_status forward(void* user, const attest_problem* problem, attest_outputs* out);
  static attest_status decode_open(void* user, const attest_decode_config* config, void** session);
  static attest_status decode_step(void* user, void* session, std::int32_t n, const float* q, const float* k,
                                   const float* v, float* o, float* lse);
  static void decode_close(void* user, void* session);
  static const char* last_error(void* user);

  std::unique_ptr<Kernel> kernel_;
  std::map<const void*, DecodeConfig> sessions_;  // each open session's configuration
  std::string name_;
  std::string error_;
  attest_kernel descriptor_{};
};

}  // namespace attest
