// Serves any C-ABI kernel (attest_abi.h) over the process protocol on stdin/stdout.
// Header-only: a host program for a CUDA, Triton or any other kernel fills an attest_kernel
// descriptor and calls attest::protocol::serve(&descriptor). Outputs are handed to the
// kernel pre-filled with NaN between canary guards; a damaged guard is reported as a fault.
#pragma once

#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "attest/process_protocol.hpp"

namespace attest::protocol {

namespace detail {

constexpr std::size_t kGuardFloats = 64;
constexpr std::uint32_t kCanaryBits = 0x7fa5a5a5u;

// n floats of NaN between guards of canaries.
class GuardedFloats {
 public:
  explicit GuardedFloats(std::size_t n) : n_(n), data_(n + 2 * kGuardFloats) {
    for (std::size_t i = 0; i < data_.size(); ++i) std::memcpy(&data_[i], &kCanaryBits, 4);
    for (std::size_t i = 0; i < n; ++i) data_[kGuardFloats + i] = std::numeric_limits<float>::quiet_NaN();
  }
  float* data() { return data_.data() + kGuardFloats; }
  std::vector<float> contents() const {
    return std::vector<float>(data_.begin() + kGuardFloats, data_.begin() + kGuardFloats + n_);
  }
  std::string damage(const char* name) const {
    for (std::size_t i = 0; i < kGuardFloats; ++i) {
      std::uint32_t before, after;
      std::memcpy(&before, &data_[kGuardFloats - 1 - i], 4);
      std::memcpy(&after, &data_[kGuardFloats + n_ + i], 4);
      if (after != kCanaryBits) return std::string(name) + " written " + std::to_string(i + 1) + " float(s) past its end";
      if (before != kCanaryBits) return std::string(name) + " written " + std::to_string(i + 1) + " float(s) before its start";
    }
    return {};
  }

 private:
  std::size_t n_;
  std::vector<float> data_;
};

inline std::string error_of(const attest_kernel* k) {
  const char* e = k->last_error ? k->last_error(k->user) : nullptr;
  return e ? e : "";
}

}  // namespace detail

// Serves until BYE or end of input. Returns the process exit code.
inline int serve(const attest_kernel* kernel, int in_fd = 0, int out_fd = 1) {
  struct Session {
    void* handle;
    attest_decode_config config;
  };
  std::map<std::uint64_t, Session> sessions;
  std::uint64_t next_session = 1;
  try {
    Type type;
    std::string payload;
    while (read_frame(in_fd, type, payload)) {
      Reader r(payload);
      Writer w;
      switch (type) {
        case Type::kHello: {
          const std::uint32_t version = r.u32();
          if (version != kVersion) {
            write_frame(out_fd, Type::kError, Writer().str("protocol version " + std::to_string(version) +
                                                           " not supported (this kernel speaks 1)").bytes());
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
          detail::GuardedFloats o(rows * h.value_dim), lse(rows);
          attest_outputs out{};
          out.o = o.data();
          out.lse = (kernel->capabilities & ATTEST_CAP_LSE) ? lse.data() : nullptr;
          const attest_problem view = problem.view();
          const attest_status status = kernel->forward(kernel->user, &view, &out);
          out.path[sizeof out.path - 1] = '\0';
          std::string fault = o.damage("O");
          if (fault.empty()) fault = lse.damage("LSE");
          w.i32(status).str(status == ATTEST_OK ? "" : detail::error_of(kernel)).str(out.path).str(fault);
          w.array(o.contents());
          if (out.lse) w.array(lse.contents());
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
          const float nan = std::numeric_limits<float>::quiet_NaN();
          std::vector<float> o(rows * c.value_dim, nan), lse(rows, nan);
          const attest_status status =
              kernel->decode_step(kernel->user, s.handle, n, q.data(), k.data(), v.data(), o.data(), lse.data());
          w.i32(status).str(status == ATTEST_OK ? "" : detail::error_of(kernel)).array(o).array(lse);
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

}  // namespace attest::protocol
