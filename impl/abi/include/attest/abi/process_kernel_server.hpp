// Serves any C-ABI kernel (attest_abi.h) over the process protocol (header-only, Linux).
// A host program for a CUDA, Triton or any other kernel fills an attest_kernel descriptor and
// calls attest::protocol::serve(&descriptor). Every input and output the kernel sees lies
// between guard pages (guarded_memory.hpp), inputs read-only, outputs pre-filled with NaN;
// a stray read or write faults and is reported to attest as a FAULT naming the buffer.
#pragma once

#include <signal.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "attest/abi/guarded_memory.hpp"
#include "attest/abi/process_protocol.hpp"

namespace attest::protocol {

namespace detail {

inline constexpr std::size_t kMaxErrorBytes = 4096;  // a kernel's error message, as sent

inline int fault_fd = -1;  // where the fault handler reports

// SIGSEGV/SIGBUS inside a guard: send FAULT naming the buffer, then die of the signal as usual.
inline void on_fault(int sig, siginfo_t* info, void* context) {
  char message[256];
  if (fault_fd >= 0 && guarded::describe_fault(reinterpret_cast<std::uintptr_t>(info->si_addr), context, message)) {
    const std::uint32_t length = static_cast<std::uint32_t>(std::strlen(message));
    char frame[16 + 4 + sizeof message];
    const std::uint32_t magic = kMagic, type = static_cast<std::uint32_t>(Type::kFault);
    const std::uint64_t size = 4 + length;
    std::memcpy(frame, &magic, 4);
    std::memcpy(frame + 4, &type, 4);
    std::memcpy(frame + 8, &size, 8);
    std::memcpy(frame + 16, &length, 4);
    // The frame carries the length, not the NUL: the message is not a C string there.
    std::memcpy(frame + 20, message, length);  // NOLINT(bugprone-not-null-terminated-result)
    write_exact(fault_fd, frame, 20 + length);
  }
  ::signal(sig, SIG_DFL);  // returning re-executes the access, which now kills the process
}

inline void install_fault_handler(int out_fd) {
  fault_fd = out_fd;
  static char alternate_stack[1 << 16];  // a kernel that overflows its stack still gets reported
  stack_t ss{};
  ss.ss_sp = alternate_stack;
  ss.ss_size = sizeof alternate_stack;
  ::sigaltstack(&ss, nullptr);
  struct sigaction sa {};
  sa.sa_sigaction = on_fault;
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
  ::sigaction(SIGSEGV, &sa, nullptr);
  ::sigaction(SIGBUS, &sa, nullptr);
}

// A copy of `values` in a sealed guarded buffer (nullptr data when empty).
template <typename T>
std::unique_ptr<guarded::Buffer> guarded_input(const char* name, const std::vector<T>& values,
                                               guarded::Placement placement) {
  auto b = std::make_unique<guarded::Buffer>(name, values.size() * sizeof(T), placement);
  if (!values.empty()) std::memcpy(b->data(), values.data(), values.size() * sizeof(T));
  b->seal();
  return b;
}

// n floats of NaN in a guarded buffer.
inline std::unique_ptr<guarded::Buffer> guarded_output(const char* name, std::size_t n, guarded::Placement placement) {
  auto b = std::make_unique<guarded::Buffer>(name, n * sizeof(float), placement);
  auto* bytes = static_cast<unsigned char*>(b->data());
  const std::uint32_t unwritten = ATTEST_UNWRITTEN_F32;
  for (std::size_t i = 0; i < n; ++i) std::memcpy(bytes + 4 * i, &unwritten, 4);
  return b;
}

inline std::vector<float> contents(guarded::Buffer& b) {
  std::vector<float> out(b.bytes() / sizeof(float));
  if (!out.empty()) std::memcpy(out.data(), b.data(), b.bytes());
  return out;
}

// The first damaged slack among the outputs, or empty.
inline std::string damage_of(std::initializer_list<const guarded::Buffer*> outputs) {
  for (const guarded::Buffer* b : outputs)
    if (std::string d = b->damage(); !d.empty()) return d;
  return {};
}

// ATTEST_PROTOCOL_FDS="IN,OUT" when attest started this program; stdin/stdout otherwise.
inline std::pair<int, int> protocol_fds() {
  const char* fds = std::getenv("ATTEST_PROTOCOL_FDS");
  int in = 0, out = 1;
  if (fds && std::sscanf(fds, "%d,%d", &in, &out) == 2 && in >= 0 && out >= 0) return {in, out};
  return {0, 1};
}

}  // namespace detail

// A kernel of either ABI version, presented as version 2: a version-1 descriptor means float32
// storage and arithmetic in its declared precision, an open contract and its key tile.
class ServedKernel {
 public:
  explicit ServedKernel(const void* descriptor) {
    const std::uint32_t version = *static_cast<const std::uint32_t*>(descriptor);
    if (version == ATTEST_ABI_VERSION_2)
      v2_ = static_cast<const attest_kernel_v2*>(descriptor);
    else
      v1_ = static_cast<const attest_kernel*>(descriptor);
  }

  Descriptor descriptor() const {
    Descriptor d;
    if (v2_) {
      d.abi_version = v2_->abi_version;
      d.name = v2_->name ? v2_->name : "";
      d.capabilities = v2_->capabilities;
      d.empty_rows = v2_->empty_rows;
      d.precision = v2_->precision;
      d.contract = v2_->contract;
      if (v2_->contract.head_dims && v2_->contract.head_dim_count > 0)
        d.head_dims.assign(v2_->contract.head_dims,
                           v2_->contract.head_dims + std::min(v2_->contract.head_dim_count, 4096));
      d.contract.head_dims = nullptr;
      d.contract.head_dim_count = 0;
      // 2.1's paths follow the 2.0 struct: read them only when the descriptor is that long.
      if (v2_->struct_size >= ATTEST_KERNEL_V2_1_SIZE && v2_->paths)
        for (std::int32_t i = 0; i < std::min(v2_->path_count, 4096); ++i) {
          const attest_path_precision& p = v2_->paths[i];
          d.paths.push_back({p.path ? std::string(p.path, ::strnlen(p.path, 31)) : "", p.precision});
        }
      // 2.2's declared paths follow 2.1's (a name past 31 characters keeps its 32nd, to be refused).
      if (v2_->struct_size >= ATTEST_KERNEL_V2_2_SIZE && v2_->path_predicates)
        for (std::int32_t i = 0; i < std::min(v2_->path_predicate_count, 4096); ++i) {
          attest_path_predicate p = v2_->path_predicates[i];
          const std::string name = p.path ? std::string(p.path, ::strnlen(p.path, 32)) : "";
          p.path = nullptr;
          d.declared_paths.push_back({name, p});
          d.declared_key_tiles.push_back(p.key_tile);  // 2.7 (reserved and zero before)
        }
      // 2.4's cache policy follows 2.2's declared paths.
      if (v2_->struct_size >= ATTEST_KERNEL_V2_4_SIZE) {
        d.cache_policy = v2_->cache_policy, d.cache_sinks = v2_->cache_sinks, d.cache_recent = v2_->cache_recent;
        d.reports_retained = v2_->decode_retained != nullptr;
        d.page_tokens = v2_->page_tokens;
      }
      // 2.7's value widths and ALiBi-or-bias follow 2.4's block tables.
      if (v2_->struct_size >= ATTEST_KERNEL_V2_7_SIZE) {
        d.value_dim = v2_->value_dim;
        if (v2_->value_dims && v2_->value_dim_count > 0)
          d.value_dims.assign(v2_->value_dims, v2_->value_dims + std::min(v2_->value_dim_count, 4096));
        d.alibi_excludes_bias = v2_->alibi_excludes_bias;
      }
      if (!packs())  // a 2.7 descriptor has no forward_packed to call
        d.capabilities &= ~(ATTEST_CAP_PACKED | ATTEST_CAP_PACKED_INT64);
      return d;
    }
    d.abi_version = v1_->abi_version;
    d.name = v1_->name ? v1_->name : "";
    d.capabilities = v1_->capabilities;
    d.empty_rows = v1_->empty_rows;
    d.precision = {ATTEST_F32, ATTEST_F32, ATTEST_F32, ATTEST_F32, v1_->precision, ATTEST_F32, v1_->precision, 0.0};
    d.contract.key_tile = v1_->key_tile;
    return d;
  }
  std::uint32_t capabilities() const { return v2_ ? v2_->capabilities : v1_->capabilities; }
  // The path lists as declared (descriptor() reads at most 4096 of each), for messages.
  std::string path_counts() const {
    const bool precisions = v2_ && v2_->struct_size >= ATTEST_KERNEL_V2_1_SIZE && v2_->paths;
    const bool predicates = v2_ && v2_->struct_size >= ATTEST_KERNEL_V2_2_SIZE && v2_->path_predicates;
    return "path_predicate_count is " + std::to_string(predicates ? v2_->path_predicate_count : 0) +
           ", path_count is " + std::to_string(precisions ? v2_->path_count : 0);
  }
  std::int32_t storage(char buffer) const {
    if (!v2_) return ATTEST_F32;
    const attest_precision_spec& p = v2_->precision;
    return buffer == 'q' ? p.q : buffer == 'k' ? p.k : buffer == 'v' ? p.v : buffer == 'b' ? p.bias : p.o;
  }
  bool decodes() const {
    return (capabilities() & ATTEST_CAP_DECODE) &&
           (v2_ ? v2_->decode_open && v2_->decode_step : v1_->decode_open && v1_->decode_step);
  }

  attest_status forward(const attest_problem_v2& p, attest_outputs_v2& out) const {
    if (v2_) {
      if (!v2_->forward) return ATTEST_UNSUPPORTED;
      return v2_->forward(v2_->user, &p, &out);
    }
    if (!v1_->forward) return ATTEST_UNSUPPORTED;
    attest_problem v1{p.batch,
                      p.heads,
                      p.kv_heads,
                      p.q_len,
                      p.k_len,
                      p.head_dim,
                      p.value_dim,
                      p.scale,
                      p.q_offset,
                      p.causal,
                      p.window,
                      p.kv_valid,
                      p.q_valid,
                      p.q_segment,
                      p.k_segment,
                      p.explicit_mask,
                      p.rope,
                      p.rope_base,
                      static_cast<const float*>(p.q),
                      static_cast<const float*>(p.k),
                      static_cast<const float*>(p.v)};
    attest_outputs o1{static_cast<float*>(out.o), out.lse, {}};
    const attest_status status = v1_->forward(v1_->user, &v1, &o1);
    std::memcpy(out.path, o1.path, sizeof out.path);
    return status;
  }
  attest_status decode_open(const attest_decode_config_v2& c, void** session) const {
    if (v2_) return v2_->decode_open(v2_->user, &c, session);
    const attest_decode_config v1{c.batch, c.heads,  c.kv_heads, c.head_dim, c.value_dim,
                                  c.scale, c.window, c.rope,     c.rope_base};
    return v1_->decode_open(v1_->user, &v1, session);
  }
  attest_status decode_step(void* session, std::int32_t n, const void* q, const void* k, const void* v, void* o,
                            float* lse, char (&path)[32]) const {
    if (v2_) return v2_->decode_step(v2_->user, session, n, q, k, v, o, lse, path);
    return v1_->decode_step(v1_->user, session, n, static_cast<const float*>(q), static_cast<const float*>(k),
                            static_cast<const float*>(v), static_cast<float*>(o), lse);
  }
  // 2.4: the positions an explicit cache's query attended.
  bool reports_retained() const { return v2_ && v2_->struct_size >= ATTEST_KERNEL_V2_4_SIZE && v2_->decode_retained; }
  attest_status retained(void* session, std::int32_t b, std::int32_t t, std::int64_t* positions, std::int32_t capacity,
                         std::int32_t* count) const {
    if (!reports_retained()) return ATTEST_UNSUPPORTED;
    return v2_->decode_retained(v2_->user, session, b, t, positions, capacity, count);
  }
  // 2.4: block tables.
  std::int32_t page_tokens() const {
    return v2_ && v2_->struct_size >= ATTEST_KERNEL_V2_4_SIZE && v2_->page_bytes && v2_->decode_paged ? v2_->page_tokens
                                                                                                      : 0;
  }
  attest_status page_bytes(const attest_decode_config_v2& c, std::int64_t* bytes) const {
    if (page_tokens() < 1) return ATTEST_UNSUPPORTED;
    return v2_->page_bytes(v2_->user, &c, bytes);
  }
  attest_status decode_paged(const attest_decode_config_v2& c, attest_paged_step& step) const {
    if (page_tokens() < 1) return ATTEST_UNSUPPORTED;
    return v2_->decode_paged(v2_->user, &c, &step);
  }
  bool backs() const { return (capabilities() & ATTEST_CAP_BACKWARD) && v2_ && v2_->backward; }
  attest_status backward(const attest_problem_v2& p, const attest_backward_inputs& in, attest_gradients& out) const {
    if (!backs()) return ATTEST_UNSUPPORTED;
    return v2_->backward(v2_->user, &p, &in, &out);
  }
  // 2.6: merging partial states.
  bool merges() const { return (capabilities() & ATTEST_CAP_MERGE) && v2_ && v2_->merge; }
  attest_status merge(const attest_merge_inputs& in, attest_merge_outputs& out) const {
    if (!merges()) return ATTEST_UNSUPPORTED;
    return v2_->merge(v2_->user, &in, &out);
  }
  // 2.8: the packed varlen layout (its pointer only when struct_size reaches it).
  bool packs() const {
    return (capabilities() & ATTEST_CAP_PACKED) && v2_ && v2_->struct_size >= ATTEST_KERNEL_V2_8_SIZE &&
           v2_->forward_packed;
  }
  attest_status forward_packed(const attest_packed_problem& p, attest_packed_outputs& out) const {
    if (!packs()) return ATTEST_UNSUPPORTED;
    return v2_->forward_packed(v2_->user, &p, &out);
  }
  void decode_close(void* session) const {
    if (v2_ && v2_->decode_close) v2_->decode_close(v2_->user, session);
    if (v1_ && v1_->decode_close) v1_->decode_close(v1_->user, session);
  }
  std::string last_error() const {
    const char* (*f)(void*) = v2_ ? v2_->last_error : v1_->last_error;
    const char* e = f ? f(v2_ ? v2_->user : v1_->user) : nullptr;
    return e ? std::string(e, ::strnlen(e, detail::kMaxErrorBytes)) : "";
  }

 private:
  const attest_kernel* v1_ = nullptr;
  const attest_kernel_v2* v2_ = nullptr;
};

namespace detail {

// NaN in a storage type, as the bytes outputs start from (a value never written stays NaN).
inline void fill_nan(void* data, std::size_t bytes, std::int32_t precision) {
  auto* b = static_cast<unsigned char*>(data);
  if (precision == ATTEST_F32) {
    const std::uint32_t unwritten = ATTEST_UNWRITTEN_F32;
    for (std::size_t i = 0; i + 4 <= bytes; i += 4) std::memcpy(b + i, &unwritten, 4);
    return;
  }
  const std::uint16_t nan16 = precision == ATTEST_BF16 ? ATTEST_UNWRITTEN_F32 >> 16 : 0x7E5F;
  for (std::size_t i = 0; i + 2 <= bytes; i += 2) std::memcpy(b + i, &nan16, 2);
}

inline std::unique_ptr<guarded::Buffer> guarded_typed_output(const char* name, std::size_t elements,
                                                             std::int32_t precision, guarded::Placement placement) {
  auto b = std::make_unique<guarded::Buffer>(name, elements * storage_bytes(precision), placement);
  fill_nan(b->data(), b->bytes(), precision);
  return b;
}

inline std::vector<std::uint8_t> bytes_of(guarded::Buffer& b) {
  std::vector<std::uint8_t> out(b.bytes());
  if (!out.empty()) std::memcpy(out.data(), b.data(), b.bytes());
  return out;
}

// A problem's arrays in sealed guarded buffers, and the C view of it the kernel is handed (the
// forward's and the backward's).
struct GuardedProblem {
  GuardedProblem(const WireProblem& problem, std::int32_t bias_type, guarded::Placement placement)
      : q(guarded_input("Q", problem.q, placement)),
        k(guarded_input("K", problem.k, placement)),
        v(guarded_input("V", problem.v, placement)),
        kv_valid(guarded_input("kv_valid", problem.kv_valid, placement)),
        q_valid(guarded_input("q_valid", problem.q_valid, placement)),
        q_segment(guarded_input("q_segment", problem.q_segment, placement)),
        k_segment(guarded_input("k_segment", problem.k_segment, placement)),
        mask(guarded_input("explicit_mask", problem.explicit_mask, placement)),
        alibi(guarded_input("alibi_slopes", problem.alibi_slopes, placement)),
        bias(problem.bias16.empty() ? guarded_input("bias", problem.bias, placement)
                                    : guarded_input("bias", problem.bias16, placement)),
        sinks(guarded_input("sinks", problem.sinks, placement)),
        view(problem.header) {
    view.q = q->data(), view.k = k->data(), view.v = v->data();
    view.kv_valid = static_cast<const std::int32_t*>(kv_valid->data());
    view.q_valid = static_cast<const std::int32_t*>(q_valid->data());
    view.q_segment = static_cast<const std::int32_t*>(q_segment->data());
    view.k_segment = static_cast<const std::int32_t*>(k_segment->data());
    view.explicit_mask = static_cast<const std::uint8_t*>(mask->data());
    view.alibi_slopes = static_cast<const float*>(alibi->data());
    view.bias = bias_type == ATTEST_F32 ? static_cast<const float*>(bias->data()) : nullptr;
    view.bias_stored = bias->data();
    view.sinks = static_cast<const float*>(sinks->data());
  }
  std::unique_ptr<guarded::Buffer> q, k, v, kv_valid, q_valid, q_segment, k_segment, mask, alibi, bias, sinks;
  attest_problem_v2 view;
};

// The serving loop's state and one handler per request: each returns kServing to go on, or the
// process's exit code.
struct Server {
  static constexpr int kServing = -1;
  struct Session {
    void* handle;
    attest_decode_config_v2 config;
    std::int64_t length = 0;                       // tokens appended so far
    std::int32_t last_step = 0;                    // the last step's n
    std::shared_ptr<const WireDecodeConfig> wire;  // what `config` points to, kept for a kernel that kept it
  };
  using Placement = guarded::Placement;

  Server(const void* descriptor, int out) : kernel(descriptor), out_fd(out) {}

  // HELLO: the descriptor, or why this kernel cannot serve (exit 2).
  int hello(Reader& r) {
    Writer w;
    const std::uint32_t version = r.u32();
    if (version != kVersion) {
      write_frame(out_fd, Type::kError,
                  Writer()
                      .str("protocol version " + std::to_string(version) + " not supported (this kernel speaks " +
                           std::to_string(kVersion) + ")")
                      .bytes());
      return 2;
    }
    // A negative page_tokens travels on: attest refuses it naming the value.
    if (const std::int32_t declared = kernel.descriptor().page_tokens; declared > 0 && kernel.page_tokens() < 1) {
      write_frame(out_fd, Type::kError,
                  Writer()
                      .str("the descriptor declares page_tokens " + std::to_string(declared) +
                           " but page_bytes or decode_paged is NULL")
                      .bytes());
      return 2;
    }
    if ((kernel.capabilities() & ATTEST_CAP_BACKWARD) && !kernel.backs()) {
      write_frame(out_fd, Type::kError,
                  Writer().str("the descriptor declares ATTEST_CAP_BACKWARD but its backward is NULL").bytes());
      return 2;
    }
    if ((kernel.capabilities() & ATTEST_CAP_MERGE) && !kernel.merges()) {
      write_frame(out_fd, Type::kError,
                  Writer().str("the descriptor declares ATTEST_CAP_MERGE but its merge is NULL").bytes());
      return 2;
    }
    write_descriptor(w, kernel.descriptor());
    if (w.bytes().size() > kMaxDescriptorBytes) {
      write_frame(
          out_fd, Type::kError,
          Writer()
              .str("the descriptor is over attest's cap of " + std::to_string(kMaxDescriptorBytes) + " bytes (" +
                   std::to_string(w.bytes().size()) + " written) for its path names: " + kernel.path_counts())
              .bytes());
      return 2;
    }
    write_frame(out_fd, Type::kDescriptor, w.bytes());
    return kServing;
  }

  // FORWARD: the problem in guarded buffers, the kernel's O and LSE back.
  int forward(Reader& r, Placement placement) {
    Writer w;
    const WireProblem problem = read_problem(r, q_type, k_type, v_type, bias_type);
    r.expect_end();
    const attest_problem_v2& h = problem.header;
    const std::size_t rows = std::size_t(h.batch) * h.heads * h.q_len;
    const bool want_lse = kernel.capabilities() & ATTEST_CAP_LSE;
    const detail::GuardedProblem inputs(problem, bias_type, placement);
    auto o = detail::guarded_typed_output("O", rows * h.value_dim, o_type, placement);
    auto lse = detail::guarded_output("LSE", want_lse ? rows : 0, placement);
    attest_outputs_v2 out{};
    out.o = o->data();
    out.lse = want_lse ? static_cast<float*>(lse->data()) : nullptr;
    const attest_status status = kernel.forward(inputs.view, out);
    out.path[sizeof out.path - 1] = '\0';
    const std::string fault = detail::damage_of({o.get(), lse.get()});
    w.i32(status).str(status == ATTEST_OK ? "" : kernel.last_error()).str(out.path).str(fault);
    w.array(detail::bytes_of(*o));
    if (want_lse)
      w.array(detail::contents(*lse));
    else
      w.u64(0);
    write_frame(out_fd, Type::kForwardResult, w.bytes());
    return kServing;
  }

  // BACKWARD: the problem, O, LSE and dO in guarded buffers, the gradients back.
  int backward(Reader& r, Placement placement) {
    Writer w;
    const WireBackward request = read_backward(r, q_type, k_type, v_type, bias_type, storage_bytes(o_type));
    const attest_problem_v2& h = request.problem.header;
    const detail::GuardedProblem inputs(request.problem, bias_type, placement);
    auto o = detail::guarded_input("O", request.o, placement),
         lse = detail::guarded_input("LSE", request.lse, placement),
         d_o = detail::guarded_input("dO", request.d_o, placement);
    const std::size_t q_rows = std::size_t(h.batch) * h.heads * h.q_len,
                      k_rows = std::size_t(h.batch) * h.kv_heads * h.k_len;
    auto dq = detail::guarded_typed_output("dQ", q_rows * h.head_dim, q_type, placement),
         dk = detail::guarded_typed_output("dK", k_rows * h.head_dim, k_type, placement),
         dv = detail::guarded_typed_output("dV", k_rows * h.value_dim, v_type, placement),
         dsinks = detail::guarded_output("dsinks", request.problem.sinks.size(), placement);
    attest_backward_inputs in{};
    in.o = o->data(), in.lse = static_cast<const float*>(lse->data()), in.d_o = d_o->data();
    in.threads = request.threads;
    attest_gradients out{};
    out.dq = dq->data(), out.dk = dk->data(), out.dv = dv->data();
    out.dsinks = request.problem.sinks.empty() ? nullptr : static_cast<float*>(dsinks->data());
    const attest_status status = kernel.backward(inputs.view, in, out);
    out.path[sizeof out.path - 1] = '\0';
    const std::string fault = detail::damage_of({dq.get(), dk.get(), dv.get(), dsinks.get()});
    w.i32(status).str(status == ATTEST_OK ? "" : kernel.last_error()).str(out.path).str(fault);
    w.array(detail::bytes_of(*dq)).array(detail::bytes_of(*dk)).array(detail::bytes_of(*dv));
    w.array(detail::contents(*dsinks));
    write_frame(out_fd, Type::kBackwardResult, w.bytes());
    return kServing;
  }

  // MERGE: the partial states in guarded buffers, the merged O and LSE back.
  int merge(Reader& r, Placement placement) {
    Writer w;
    if (!kernel.merges()) throw ProtocolError("MERGE to a kernel without merge");
    const WireMerge request = read_merge(r);
    const std::size_t rows = std::size_t(request.rows);
    auto o_parts = detail::guarded_input("partial O", request.o, placement),
         lse_parts = detail::guarded_input("partial LSE", request.lse, placement);
    auto o = detail::guarded_output("O", rows * std::size_t(request.value_dim), placement),
         lse = detail::guarded_output("LSE", rows, placement);
    attest_merge_inputs in = request.view();
    in.o = o_parts->data(), in.lse = static_cast<const float*>(lse_parts->data());
    attest_merge_outputs out{};
    out.o = static_cast<float*>(o->data()), out.lse = static_cast<float*>(lse->data());
    const attest_status status = kernel.merge(in, out);
    out.path[sizeof out.path - 1] = '\0';
    const std::string fault = detail::damage_of({o.get(), lse.get()});
    w.i32(status).str(status == ATTEST_OK ? "" : kernel.last_error()).str(out.path).str(fault);
    w.array(detail::contents(*o)).array(detail::contents(*lse));
    write_frame(out_fd, Type::kMergeResult, w.bytes());
    return kServing;
  }

  // FORWARD_PACKED (2.8): the buffers guarded, each cu_seqlens flush against its trailing guard
  // page (reading entry batch + 1 faults), the outputs NaN-filled between guards.
  int forward_packed(Reader& r, Placement placement) {
    Writer w;
    if (!kernel.packs()) throw ProtocolError("FORWARD_PACKED to a kernel without the packed layout");
    const WirePacked request = read_packed(r);
    const attest_packed_problem& h = request.header;
    // 2.10: the offsets in the width the kernel declares (int64 with ATTEST_CAP_PACKED_INT64).
    const bool wide = (kernel.capabilities() & ATTEST_CAP_PACKED_INT64) != 0;
    const std::vector<std::int64_t> q64(wide ? request.cu_seqlens_q.begin() : request.cu_seqlens_q.end(),
                                        request.cu_seqlens_q.end()),
        k64(wide ? request.cu_seqlens_k.begin() : request.cu_seqlens_k.end(), request.cu_seqlens_k.end());
    auto cu_q = wide ? detail::guarded_input("cu_seqlens_q64", q64, Placement::kEnd)
                     : detail::guarded_input("cu_seqlens_q", request.cu_seqlens_q, Placement::kEnd),
         cu_k = wide ? detail::guarded_input("cu_seqlens_k64", k64, Placement::kEnd)
                     : detail::guarded_input("cu_seqlens_k", request.cu_seqlens_k, Placement::kEnd);
    auto q = detail::guarded_input("Q", request.q, placement), k = detail::guarded_input("K", request.k, placement),
         v = detail::guarded_input("V", request.v, placement);
    auto slopes = detail::guarded_input("ALiBi slopes", request.alibi_slopes, placement),
         sinks = detail::guarded_input("sinks", request.sinks, placement);
    const std::size_t rows = std::size_t(request.total_q()) * std::size_t(h.heads);
    auto o = detail::guarded_output("O", rows * std::size_t(h.value_dim), placement),
         lse = detail::guarded_output("LSE", request.want_lse ? rows : 0, placement);
    attest_packed_problem in = request.view();
    if (wide) {
      in.cu_seqlens_q = nullptr, in.cu_seqlens_k = nullptr;
      in.cu_seqlens_q64 = static_cast<const std::int64_t*>(cu_q->data());
      in.cu_seqlens_k64 = static_cast<const std::int64_t*>(cu_k->data());
    } else {
      in.cu_seqlens_q = static_cast<const std::int32_t*>(cu_q->data());
      in.cu_seqlens_k = static_cast<const std::int32_t*>(cu_k->data());
    }
    in.q = static_cast<const float*>(q->data()), in.k = static_cast<const float*>(k->data());
    in.v = static_cast<const float*>(v->data());
    in.alibi_slopes = static_cast<const float*>(slopes->data()), in.sinks = static_cast<const float*>(sinks->data());
    attest_packed_outputs out{};
    out.o = static_cast<float*>(o->data()), out.lse = static_cast<float*>(lse->data());
    const attest_status status = kernel.forward_packed(in, out);
    out.path[sizeof out.path - 1] = '\0';
    const std::string fault = detail::damage_of({o.get(), lse.get()});
    w.i32(status).str(status == ATTEST_OK ? "" : kernel.last_error()).str(out.path).str(fault);
    w.array(detail::contents(*o)).array(detail::contents(*lse));
    write_frame(out_fd, Type::kForwardPackedResult, w.bytes());
    return kServing;
  }

  // DECODE_OPEN: a session, kept with the configuration it points to.
  int decode_open(Reader& r) {
    Writer w;
    const auto wire = std::make_shared<const WireDecodeConfig>(read_decode_config(r));
    r.expect_end();
    void* session = nullptr;
    attest_status status = ATTEST_UNSUPPORTED;
    const attest_decode_config_v2 config = wire->view();
    if (kernel.decodes()) status = kernel.decode_open(config, &session);
    std::uint64_t id = 0;
    if (status == ATTEST_OK) sessions[id = next_session++] = {session, config, 0, 0, wire};
    w.i32(status).str(status == ATTEST_OK ? "" : kernel.last_error()).u64(id);
    write_frame(out_fd, Type::kDecodeOpened, w.bytes());
    return kServing;
  }

  // DECODE_STEP: n new tokens of a session; a write outside O or LSE is a FAULT (exit 1).
  int decode_step(Reader& r, Placement placement) {
    Writer w;
    const std::uint64_t id = r.u64();
    const std::int32_t n = r.i32(), want_lse = r.i32();
    const std::vector<std::uint8_t> q = r.array<std::uint8_t>(), k = r.array<std::uint8_t>(),
                                    v = r.array<std::uint8_t>();
    r.expect_end();
    if (!sessions.count(id)) throw ProtocolError("decode step for an unknown session");
    Session& s = sessions[id];
    const attest_decode_config_v2& c = s.config;
    const std::size_t rows = std::size_t(c.batch) * c.heads * (n > 0 ? n : 0);
    const std::size_t kv_rows = std::size_t(c.batch) * c.kv_heads * (n > 0 ? n : 0);
    if (n < 1 || q.size() != stored_size(q_type, rows, c.head_dim) ||
        k.size() != stored_size(k_type, kv_rows, c.head_dim) || v.size() != stored_size(v_type, kv_rows, c.value_dim))
      throw ProtocolError("decode step arrays do not match n and the session's configuration");
    auto gq = detail::guarded_input("Q", q, placement), gk = detail::guarded_input("K", k, placement),
         gv = detail::guarded_input("V", v, placement);
    auto o = detail::guarded_typed_output("O", rows * c.value_dim, o_type, placement);
    auto lse = detail::guarded_output("LSE", rows, placement);
    char path[32] = {};
    const attest_status status = kernel.decode_step(s.handle, n, gq->data(), gk->data(), gv->data(), o->data(),
                                                    want_lse ? static_cast<float*>(lse->data()) : nullptr, path);
    path[sizeof path - 1] = '\0';
    if (const std::string fault = detail::damage_of({o.get(), lse.get()}); !fault.empty()) {
      write_frame(out_fd, Type::kFault, Writer().str(fault).bytes());
      return 1;
    }
    if (status == ATTEST_OK) s.length += n, s.last_step = n;
    w.i32(status).str(status == ATTEST_OK ? "" : kernel.last_error()).str(path);
    w.array(detail::bytes_of(*o)).array(want_lse ? detail::contents(*lse) : std::vector<float>());
    write_frame(out_fd, Type::kDecodeResult, w.bytes());
    return kServing;
  }

  // PAGE_BYTES: the kernel's page size for a configuration.
  int page_bytes(Reader& r) {
    Writer w;
    const WireDecodeConfig wire = read_decode_config(r, true);
    r.expect_end();
    std::int64_t bytes = 0;
    const attest_status status = kernel.page_bytes(wire.view(), &bytes);
    w.i32(status).str(status == ATTEST_OK ? "" : kernel.last_error()).i64(bytes);
    write_frame(out_fd, Type::kPageBytesResult, w.bytes());
    return kServing;
  }

  // DECODE_PAGED: a block-table call on the pool attest sent; the pool comes back.
  int decode_paged(Reader& r, Placement placement, std::string& payload) {
    Writer w;
    if (kernel.page_tokens() < 1) throw ProtocolError("DECODE_PAGED to a kernel without block tables");
    const WireDecodeConfig wire = read_decode_config(r, true);
    const attest_decode_config_v2 config = wire.view();
    const WirePagedStep step = read_paged_step(r, config, kernel.page_tokens(), q_type, k_type, v_type);
    std::int64_t own_page_bytes = 0;  // the kernel's page size, not the message's, bounds its reads
    if (kernel.page_bytes(config, &own_page_bytes) != ATTEST_OK || own_page_bytes != step.page_bytes)
      throw ProtocolError("DECODE_PAGED with pages of " + std::to_string(step.page_bytes) +
                          " bytes; the kernel's are " + std::to_string(own_page_bytes));
    std::uint64_t tokens = 0;
    for (std::int32_t n : step.counts) tokens += std::uint64_t(n);
    const std::size_t rows = tokens * config.heads;
    // The pool starts a page (64-byte aligned whatever the page size) and is the kernel's to write.
    auto pool = std::make_unique<guarded::Buffer>("pool", step.pool.size(), Placement::kStart);
    if (!step.pool.empty()) std::memcpy(pool->data(), step.pool.data(), step.pool.size());
    auto tables = detail::guarded_input("tables", step.tables, placement),
         lengths = detail::guarded_input("lengths", step.lengths, placement),
         counts = detail::guarded_input("counts", step.counts, placement),
         q = detail::guarded_input("Q", step.q, placement), k = detail::guarded_input("K", step.k, placement),
         v = detail::guarded_input("V", step.v, placement);
    auto o = detail::guarded_typed_output("O", rows * config.value_dim, o_type, placement);
    auto lse = detail::guarded_output("LSE", step.want_lse ? rows : 0, placement);
    const bool want_lse = step.want_lse;
    // Every array now has its guarded copy: the request (holding the pool once more) goes
    // before the reply (holding it again) is built; step.pool, a view into it, is not read after this.
    std::string().swap(payload);
    attest_paged_step call{};
    call.pool = pool->data(), call.pool_bytes = static_cast<std::int64_t>(pool->bytes());
    call.tables = static_cast<const std::int32_t*>(tables->data()), call.table_width = step.table_width;
    call.lengths = static_cast<const std::int64_t*>(lengths->data());
    call.counts = static_cast<const std::int32_t*>(counts->data());
    call.q = q->data(), call.k = k->data(), call.v = v->data(), call.o = o->data();
    call.lse = want_lse ? static_cast<float*>(lse->data()) : nullptr;
    const attest_status status = kernel.decode_paged(config, call);
    call.path[sizeof call.path - 1] = '\0';
    const std::string fault = detail::damage_of({pool.get(), o.get(), lse.get()});
    w.i32(status).str(status == ATTEST_OK ? "" : kernel.last_error()).str(call.path).str(fault);
    w.array(static_cast<const std::uint8_t*>(pool->data()), pool->bytes());
    pool.reset();
    w.array(detail::bytes_of(*o));
    w.array(want_lse ? detail::contents(*lse) : std::vector<float>());
    write_frame(out_fd, Type::kDecodePagedResult, w.bytes());
    return kServing;
  }

  // DECODE_RETAINED: the positions a query of the last step attended.
  int decode_retained(Reader& r) {
    Writer w;
    const std::uint64_t id = r.u64();
    const std::int32_t b = r.i32(), t = r.i32();
    r.expect_end();
    if (!sessions.count(id)) throw ProtocolError("retained positions of an unknown session");
    const Session& s = sessions[id];
    if (b < 0 || b >= s.config.batch || t < 0 || t >= s.last_step)
      throw ProtocolError("retained positions of a query outside the session's last step");
    // A query at position p attends at most p + 1 positions.
    std::vector<std::int64_t> positions(static_cast<std::size_t>(s.length - s.last_step + t + 1));
    std::int32_t count = 0;
    const attest_status status =
        kernel.retained(s.handle, b, t, positions.data(), static_cast<std::int32_t>(positions.size()), &count);
    if (status == ATTEST_OK && (count < 0 || std::size_t(count) > positions.size()))
      throw ProtocolError("decode_retained reported " + std::to_string(count) + " positions (capacity " +
                          std::to_string(positions.size()) + ")");
    positions.resize(status == ATTEST_OK ? count : 0);
    w.i32(status).str(status == ATTEST_OK ? "" : kernel.last_error()).array(positions);
    write_frame(out_fd, Type::kRetained, w.bytes());
    return kServing;
  }

  // DECODE_CLOSE: the session ends (an unknown one is already closed).
  int decode_close(Reader& r) {
    const std::uint64_t id = r.u64();
    if (sessions.count(id)) {
      kernel.decode_close(sessions[id].handle);
      sessions.erase(id);
    }
    write_frame(out_fd, Type::kClosed, "");
    return kServing;
  }

  const ServedKernel kernel;
  const int out_fd;
  std::map<std::uint64_t, Session> sessions;
  std::uint64_t next_session = 1;
  const std::int32_t q_type = kernel.storage('q'), k_type = kernel.storage('k'), v_type = kernel.storage('v'),
                     o_type = kernel.storage('o'), bias_type = kernel.storage('b');
};

}  // namespace detail

// Serves a kernel (a version-1 attest_kernel or a version-2 attest_kernel_v2 descriptor) until
// BYE or end of input. Returns the process exit code.
inline int serve_descriptor(const void* descriptor, int in_fd, int out_fd) {
  using guarded::Placement;
  detail::Server server(descriptor, out_fd);
  std::uint64_t calls = 0;  // alternates the buffers' placement: one call flush at the end, the next at the start
  detail::install_fault_handler(out_fd);
  try {
    Type type;
    std::string payload;
    while (read_frame(in_fd, type, payload)) {
      Reader r(payload);
      const Placement placement = calls++ % 2 ? Placement::kStart : Placement::kEnd;
      int status = detail::Server::kServing;
      switch (type) {
        case Type::kHello:
          status = server.hello(r);
          break;
        case Type::kForward:
          status = server.forward(r, placement);
          break;
        case Type::kBackward:
          status = server.backward(r, placement);
          break;
        case Type::kMerge:
          status = server.merge(r, placement);
          break;
        case Type::kForwardPacked:
          status = server.forward_packed(r, placement);
          break;
        case Type::kDecodeOpen:
          status = server.decode_open(r);
          break;
        case Type::kDecodeStep:
          status = server.decode_step(r, placement);
          break;
        case Type::kPageBytes:
          status = server.page_bytes(r);
          break;
        case Type::kDecodePaged:
          status = server.decode_paged(r, placement, payload);
          break;
        case Type::kDecodeRetained:
          status = server.decode_retained(r);
          break;
        case Type::kDecodeClose:
          status = server.decode_close(r);
          break;
        case Type::kBye:
          return 0;
        default:
          throw ProtocolError("unexpected message type " + std::to_string(static_cast<std::uint32_t>(type)));
      }
      if (status != detail::Server::kServing) return status;
    }
  } catch (const std::exception& e) {
    write_frame(out_fd, Type::kError, Writer().str(e.what()).bytes());
    return 2;
  }
  return 0;
}

// Serves on the channel attest named in ATTEST_PROTOCOL_FDS (stdin/stdout when run by hand).
inline int serve(const attest_kernel_v2* kernel) {
  const auto [in, out] = detail::protocol_fds();
  return serve_descriptor(kernel, in, out);
}
inline int serve(const attest_kernel* kernel) {
  const auto [in, out] = detail::protocol_fds();
  return serve_descriptor(kernel, in, out);
}

}  // namespace attest::protocol
