// Serves any C-ABI kernel (attest_abi.h) over the process protocol (header-only, Linux).
// A host program for a CUDA, Triton or any other kernel fills an attest_kernel descriptor and
// calls attest::protocol::serve(&descriptor). Every input and output the kernel sees lies
// between guard pages (guarded_memory.hpp), inputs read-only, outputs pre-filled with NaN;
// a stray read or write faults and is reported to attest as a FAULT naming the buffer.
#pragma once

#include <signal.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "attest/guarded_memory.hpp"
#include "attest/process_protocol.hpp"

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
    std::memcpy(frame + 20, message, length);
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
  float* f = static_cast<float*>(b->data());
  for (std::size_t i = 0; i < n; ++i) f[i] = std::numeric_limits<float>::quiet_NaN();
  return b;
}

inline std::vector<float> contents(guarded::Buffer& b) {
  std::vector<float> out(b.bytes() / sizeof(float));
  if (!out.empty()) std::memcpy(out.data(), b.data(), b.bytes());
  return out;
}

inline std::string error_of(const attest_kernel* k) {
  const char* e = k->last_error ? k->last_error(k->user) : nullptr;
  std::string s = e ? std::string(e, ::strnlen(e, kMaxErrorBytes)) : "";
  return s;
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

// Serves until BYE or end of input. Returns the process exit code.
inline int serve(const attest_kernel* kernel, int in_fd, int out_fd) {
  using guarded::Placement;
  struct Session {
    void* handle;
    attest_decode_config config;
  };
  std::map<std::uint64_t, Session> sessions;
  std::uint64_t next_session = 1;
  std::uint64_t calls = 0;  // alternates the buffers' placement: one call flush at the end, the next at the start
  detail::install_fault_handler(out_fd);
  try {
    Type type;
    std::string payload;
    while (read_frame(in_fd, type, payload)) {
      Reader r(payload);
      Writer w;
      const Placement placement = calls++ % 2 ? Placement::kStart : Placement::kEnd;
      switch (type) {
        case Type::kHello: {
          const std::uint32_t version = r.u32();
          if (version != kVersion) {
            write_frame(out_fd, Type::kError, Writer().str("protocol version " + std::to_string(version) +
                                                           " not supported (this kernel speaks " +
                                                           std::to_string(kVersion) + ")").bytes());
            return 2;
          }
          w.u32(kernel->abi_version).str(kernel->name ? kernel->name : "").u32(kernel->capabilities);
          w.i32(kernel->empty_rows).i32(kernel->precision).i32(kernel->key_tile);
          write_frame(out_fd, Type::kDescriptor, w.bytes());
          break;
        }
        case Type::kForward: {
          const WireProblem problem = read_problem(r);
          r.expect_end();
          const attest_problem& h = problem.header;
          const std::size_t rows = std::size_t(h.batch) * h.heads * h.q_len;
          const bool want_lse = kernel->capabilities & ATTEST_CAP_LSE;
          auto q = detail::guarded_input("Q", problem.q, placement), k = detail::guarded_input("K", problem.k, placement),
               v = detail::guarded_input("V", problem.v, placement);
          auto kv_valid = detail::guarded_input("kv_valid", problem.kv_valid, placement);
          auto q_valid = detail::guarded_input("q_valid", problem.q_valid, placement);
          auto q_segment = detail::guarded_input("q_segment", problem.q_segment, placement);
          auto k_segment = detail::guarded_input("k_segment", problem.k_segment, placement);
          auto mask = detail::guarded_input("explicit_mask", problem.explicit_mask, placement);
          auto o = detail::guarded_output("O", rows * h.value_dim, placement);
          auto lse = detail::guarded_output("LSE", want_lse ? rows : 0, placement);
          attest_problem view = h;
          view.q = static_cast<const float*>(q->data());
          view.k = static_cast<const float*>(k->data());
          view.v = static_cast<const float*>(v->data());
          view.kv_valid = static_cast<const std::int32_t*>(kv_valid->data());
          view.q_valid = static_cast<const std::int32_t*>(q_valid->data());
          view.q_segment = static_cast<const std::int32_t*>(q_segment->data());
          view.k_segment = static_cast<const std::int32_t*>(k_segment->data());
          view.explicit_mask = static_cast<const std::uint8_t*>(mask->data());
          attest_outputs out{};
          out.o = static_cast<float*>(o->data());
          out.lse = want_lse ? static_cast<float*>(lse->data()) : nullptr;
          const attest_status status = kernel->forward(kernel->user, &view, &out);
          out.path[sizeof out.path - 1] = '\0';
          const std::string fault = detail::damage_of({o.get(), lse.get()});
          w.i32(status).str(status == ATTEST_OK ? "" : detail::error_of(kernel)).str(out.path).str(fault);
          w.array(detail::contents(*o));
          if (want_lse) w.array(detail::contents(*lse));
          else w.u64(0);
          write_frame(out_fd, Type::kForwardResult, w.bytes());
          break;
        }
        case Type::kDecodeOpen: {
          const attest_decode_config config = read_decode_config(r);
          void* session = nullptr;
          attest_status status = ATTEST_UNSUPPORTED;
          if ((kernel->capabilities & ATTEST_CAP_DECODE) && kernel->decode_open)
            status = kernel->decode_open(kernel->user, &config, &session);
          std::uint64_t id = 0;
          if (status == ATTEST_OK) sessions[id = next_session++] = {session, config};
          w.i32(status).str(status == ATTEST_OK ? "" : detail::error_of(kernel)).u64(id);
          write_frame(out_fd, Type::kDecodeOpened, w.bytes());
          break;
        }
        case Type::kDecodeStep: {
          const std::uint64_t id = r.u64();
          const std::int32_t n = r.i32();
          const std::vector<float> q = r.array<float>(), k = r.array<float>(), v = r.array<float>();
          r.expect_end();
          if (!sessions.count(id)) throw ProtocolError("decode step for an unknown session");
          const Session& s = sessions[id];
          const attest_decode_config& c = s.config;
          const std::size_t rows = std::size_t(c.batch) * c.heads * (n > 0 ? n : 0);
          if (n < 1 || q.size() != rows * c.head_dim || k.size() != std::size_t(c.batch) * c.kv_heads * n * c.head_dim ||
              v.size() != std::size_t(c.batch) * c.kv_heads * n * c.value_dim)
            throw ProtocolError("decode step arrays do not match n and the session's configuration");
          auto gq = detail::guarded_input("Q", q, placement), gk = detail::guarded_input("K", k, placement),
               gv = detail::guarded_input("V", v, placement);
          auto o = detail::guarded_output("O", rows * c.value_dim, placement);
          auto lse = detail::guarded_output("LSE", rows, placement);
          const attest_status status = kernel->decode_step(
              kernel->user, s.handle, n, static_cast<const float*>(gq->data()), static_cast<const float*>(gk->data()),
              static_cast<const float*>(gv->data()), static_cast<float*>(o->data()), static_cast<float*>(lse->data()));
          if (const std::string fault = detail::damage_of({o.get(), lse.get()}); !fault.empty()) {
            write_frame(out_fd, Type::kFault, Writer().str(fault).bytes());
            return 1;
          }
          w.i32(status).str(status == ATTEST_OK ? "" : detail::error_of(kernel));
          w.array(detail::contents(*o)).array(detail::contents(*lse));
          write_frame(out_fd, Type::kDecodeResult, w.bytes());
          break;
        }
        case Type::kDecodeClose: {
          const std::uint64_t id = r.u64();
          if (sessions.count(id)) {
            if (kernel->decode_close) kernel->decode_close(kernel->user, sessions[id].handle);
            sessions.erase(id);
          }
          write_frame(out_fd, Type::kClosed, "");
          break;
        }
        case Type::kBye:
          return 0;
        default:
          throw ProtocolError("unexpected message type " + std::to_string(static_cast<std::uint32_t>(type)));
      }
    }
  } catch (const std::exception& e) {
    write_frame(out_fd, Type::kError, Writer().str(e.what()).bytes());
    return 2;
  }
  return 0;
}

// Serves on the channel attest named in ATTEST_PROTOCOL_FDS (stdin/stdout when run by hand).
inline int serve(const attest_kernel* kernel) {
  const auto [in, out] = detail::protocol_fds();
  return serve(kernel, in, out);
}

}  // namespace attest::protocol
