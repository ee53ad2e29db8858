// A C++ kernel behind the C ABI (attest kernel-host serves built-in kernels and mutants so). Its
// includers get the codecs and the wire conversion it is built on too.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "attest/abi/storage_codecs.h"
#include "attest/abi/wire_conversion.h"
#include "attest/attest_abi.h"
#include "attest/kernels/kernel.h"

namespace attest {

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
  static attest_status merge(void* user, const attest_merge_inputs* in, attest_merge_outputs* out);
  static attest_status forward_packed(void* user, const attest_packed_problem* problem, attest_packed_outputs* out);
  static const char* last_error(void* user);
  template <typename Call>
  attest_status status_of(Call&& call);

  std::unique_ptr<Kernel> kernel_;
  std::map<const void*, DecodeConfig> sessions_;  // each open session's configuration
  std::string name_;
  std::string error_;
  std::vector<std::int32_t> head_dims_;
  std::vector<std::int32_t> value_dims_;
  std::vector<std::string> path_names_;
  std::vector<attest_path_precision> paths_;
  std::vector<std::string> declared_names_;
  std::vector<attest_path_predicate> declared_paths_;
  attest_kernel_v2 descriptor_{};
};

}  // namespace attest
