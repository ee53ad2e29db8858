#include "process_kernel.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <fmt/format.h>

#include "abi_adapter.h"

namespace attest {
namespace {

using Clock = std::chrono::steady_clock;
using protocol::Type;

enum class ReadResult { kOk, kEof, kTimeout };

ReadResult read_with_deadline(int fd, char* buf, std::size_t n, Clock::time_point deadline) {
  while (n > 0) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return ReadResult::kTimeout;
    pollfd pfd{fd, POLLIN, 0};
    const int ready = ::poll(&pfd, 1, static_cast<int>(std::min<long long>(left, 1000)));
    if (ready < 0 && errno != EINTR) return ReadResult::kEof;
    if (ready <= 0) continue;
    const ssize_t r = ::read(fd, buf, n);
    if (r == 0) return ReadResult::kEof;
    if (r < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      return ReadResult::kEof;
    }
    buf += r;
    n -= static_cast<std::size_t>(r);
  }
  return ReadResult::kOk;
}

std::string describe_exit(int status) {
  if (WIFSIGNALED(status))
    return fmt::format("crashed with signal {} ({})", WTERMSIG(status), strsignal(WTERMSIG(status)));
  if (WIFEXITED(status)) return fmt::format("exited with code {}", WEXITSTATUS(status));
  return "stopped";
}

// Waits up to polls x 2 ms for the child to exit, then kills it; returns its wait status.
int reap(pid_t pid, int polls) {
  int status = 0;
  for (int i = 0; i < polls; ++i) {
    if (::waitpid(pid, &status, WNOHANG) == pid) return status;
    ::usleep(2000);
  }
  ::kill(pid, SIGKILL);
  ::waitpid(pid, &status, 0);
  return status;
}

}  // namespace

std::vector<std::string> kernel_host_argv(const std::vector<std::string>& args) {
  char self[4096];
  const ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) throw KernelLoadError("cannot find the attest executable (/proc/self/exe)");
  self[n] = '\0';
  std::vector<std::string> argv = {self, "kernel-host"};
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}

ProcessKernel::ProcessKernel(Options options) : options_(std::move(options)) {
  ::signal(SIGPIPE, SIG_IGN);  // a dead child must give EPIPE, not kill the harness
  start();
}

ProcessKernel::~ProcessKernel() { stop(); }

void ProcessKernel::start() const {
  int to[2], from[2];
  if (::pipe2(to, O_CLOEXEC) != 0 || ::pipe2(from, O_CLOEXEC) != 0)
    throw KernelLoadError("cannot create pipes: " + std::string(strerror(errno)));
  const pid_t pid = ::fork();
  if (pid < 0) throw KernelLoadError("cannot fork: " + std::string(strerror(errno)));
  if (pid == 0) {
    ::dup2(to[0], 0);
    ::dup2(from[1], 1);
    std::vector<char*> argv;
    for (const std::string& a : options_.argv) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execvp(argv[0], argv.data());
    ::dprintf(2, "attest: cannot run %s: %s\n", argv[0], strerror(errno));
    ::_exit(127);
  }
  ::close(to[0]);
  ::close(from[1]);
  pid_ = pid;
  to_child_ = to[1];
  from_child_ = from[0];
  ++generation_;

  // Handshake: HELLO, then the descriptor (or an error naming why the kernel cannot serve).
  std::string reply;
  try {
    reply = call(Type::kHello, protocol::Writer().u32(protocol::kVersion).bytes(), Type::kDescriptor);
  } catch (const KernelFailure& e) {
    stop();
    throw KernelLoadError(options_.description + ": " + e.what() + " before describing itself");
  }
  protocol::Reader r(reply);
  try {
    const std::uint32_t abi = r.u32();
    const std::string name = r.str();
    const std::uint32_t caps = r.u32();
    const std::int32_t empty = r.i32(), precision = r.i32(), key_tile = r.i32();
    r.expect_end();
    if (abi != ATTEST_ABI_VERSION)
      throw KernelLoadError(fmt::format("{}: kernel ABI version {}, this attest speaks version {}",
                                        options_.description, abi, ATTEST_ABI_VERSION));
    auto* self = const_cast<ProcessKernel*>(this);
    if (self->name_.empty()) {
      self->abi_version_ = abi;
      self->name_ = name.empty() ? options_.description : name;
      self->caps_ = capabilities_from_abi(caps, empty, precision, key_tile);
    }
  } catch (const protocol::ProtocolError& e) {
    stop();
    throw KernelLoadError(options_.description + ": malformed descriptor: " + e.what());
  } catch (const KernelLoadError&) {
    stop();
    throw;
  }
}

void ProcessKernel::stop() const {
  if (pid_ < 0) return;
  protocol::write_frame(to_child_, Type::kBye, "");
  ::close(to_child_);
  ::close(from_child_);
  reap(pid_, 50);
  pid_ = -1;
  to_child_ = from_child_ = -1;
}

void ProcessKernel::child_died(const std::string& during) const {
  ::close(to_child_);
  ::close(from_child_);
  const int status = reap(pid_, 500);  // it closed its end: give it a moment to finish dying
  pid_ = -1;
  throw KernelFailure(KernelFailure::Kind::kCrash,
                      fmt::format("kernel process {} {}", describe_exit(status), during));
}

std::string ProcessKernel::read_reply(Type expected) const {
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                           std::chrono::duration<double>(options_.timeout_seconds));
  char header[16];
  auto fail_read = [&](ReadResult r) {
    if (r == ReadResult::kEof) child_died("while answering");
    ::close(to_child_);
    ::close(from_child_);
    reap(pid_, 0);  // hung: kill it now
    pid_ = -1;
    throw KernelFailure(KernelFailure::Kind::kHang,
                        fmt::format("kernel did not answer within {:g} s (killed)", options_.timeout_seconds));
  };
  if (ReadResult r = read_with_deadline(from_child_, header, sizeof header, deadline); r != ReadResult::kOk)
    fail_read(r);
  Type type;
  std::uint64_t size;
  try {
    std::tie(type, size) = protocol::parse_header(header);
  } catch (const protocol::ProtocolError& e) {
    stop();
    throw KernelLoadError(options_.description + ": malformed protocol message: " + e.what());
  }
  std::string payload(size, '\0');
  if (ReadResult r = read_with_deadline(from_child_, payload.data(), size, deadline); r != ReadResult::kOk)
    fail_read(r);
  if (type == Type::kError) {
    std::string message;
    try {
      protocol::Reader reader(payload);
      message = reader.str();
    } catch (const protocol::ProtocolError&) {
      message = "(unreadable error message)";
    }
    stop();
    // The host names the plugin itself; other kernels get their command as a prefix.
    throw KernelLoadError(message.starts_with(options_.description) ? message : options_.description + ": " + message);
  }
  if (type != expected) {
    stop();
    throw KernelLoadError(fmt::format("{}: malformed protocol message: expected type {}, got {}",
                                      options_.description, static_cast<int>(expected), static_cast<int>(type)));
  }
  return payload;
}

std::string ProcessKernel::call(Type request, const std::string& payload, Type reply) const {
  if (pid_ < 0) start();  // restart after a crash or hang
  if (!protocol::write_frame(to_child_, request, payload)) {
    // The child may have died and left an explanation (an error frame) or just an exit status.
    return read_reply(reply);
  }
  return read_reply(reply);
}

void ProcessKernel::forward(const Problem& p, std::span<float> o, std::span<float> lse) const {
  protocol::Writer w;
  protocol::write_problem(w, to_wire(p));
  const std::string reply = call(Type::kForward, w.bytes(), Type::kForwardResult);
  std::int32_t status;
  std::string error, path, fault;
  std::vector<float> out_o, out_lse;
  try {
    protocol::Reader r(reply);
    status = r.i32();
    error = r.str();
    path = r.str();
    fault = r.str();
    out_o = r.array<float>();
    out_lse = r.array<float>();
    r.expect_end();
  } catch (const protocol::ProtocolError& e) {
    throw KernelLoadError(options_.description + ": malformed forward result: " + e.what());
  }
  if (!fault.empty()) throw KernelFailure(KernelFailure::Kind::kFault, fault);
  if (status != ATTEST_OK)
    throw KernelFailure(KernelFailure::Kind::kStatus, fmt::format("kernel returned status {}: {}", status, error));
  if (out_o.size() != o.size() || (caps_.lse && !lse.empty() && out_lse.size() != lse.size()))
    throw KernelLoadError(options_.description + ": malformed forward result: output sizes do not match the problem");
  std::copy(out_o.begin(), out_o.end(), o.begin());
  if (caps_.lse && !lse.empty()) std::copy(out_lse.begin(), out_lse.end(), lse.begin());
  last_path_ = path.empty() ? "default" : path;
}

namespace {

class ProcessDecodeSession final : public DecodeSession {
 public:
  ProcessDecodeSession(const ProcessKernel& kernel, std::uint64_t id)
      : kernel_(kernel), id_(id), generation_(kernel.generation()) {}
  ~ProcessDecodeSession() override {
    if (kernel_.generation() != generation_) return;
    try {
      kernel_.call(Type::kDecodeClose, protocol::Writer().u64(id_).bytes(), Type::kClosed);
    } catch (const std::exception&) {
      // The session dies with the process; nothing else to release.
    }
  }

  void step(int n, std::span<const float> q, std::span<const float> k, std::span<const float> v, std::span<float> o,
            std::span<float> lse) override {
    if (kernel_.generation() != generation_)
      throw KernelFailure(KernelFailure::Kind::kCrash, "the kernel process was restarted; its decode session is gone");
    protocol::Writer w;
    w.u64(id_).i32(n).array(q.data(), q.size()).array(k.data(), k.size()).array(v.data(), v.size());
    const std::string reply = kernel_.call(Type::kDecodeStep, w.bytes(), Type::kDecodeResult);
    protocol::Reader r(reply);
    const std::int32_t status = r.i32();
    const std::string error = r.str();
    const std::vector<float> out_o = r.array<float>(), out_lse = r.array<float>();
    if (status != ATTEST_OK)
      throw KernelFailure(KernelFailure::Kind::kStatus, fmt::format("decode step returned status {}: {}", status, error));
    if (out_o.size() != o.size() || out_lse.size() != lse.size())
      throw KernelLoadError("malformed decode result: output sizes do not match the step");
    std::copy(out_o.begin(), out_o.end(), o.begin());
    std::copy(out_lse.begin(), out_lse.end(), lse.begin());
    length_ += n;
  }
  long long length() const override { return length_; }
  std::size_t cache_bytes() const override { return 0; }  // not reported across the protocol

 private:
  const ProcessKernel& kernel_;
  std::uint64_t id_;
  std::uint64_t generation_;
  long long length_ = 0;
};

}  // namespace

std::unique_ptr<DecodeSession> ProcessKernel::open_decode(const DecodeConfig& config) const {
  config.validate();
  attest_decode_config c{config.batch, config.heads,        config.kv_heads,     config.head_dim, config.value_dim,
                         config.scale, config.window.value_or(0), config.rope.enabled, config.rope.base};
  protocol::Writer w;
  protocol::write_decode_config(w, c);
  const std::string reply = call(Type::kDecodeOpen, w.bytes(), Type::kDecodeOpened);
  protocol::Reader r(reply);
  const std::int32_t status = r.i32();
  const std::string error = r.str();
  const std::uint64_t id = r.u64();
  if (status != ATTEST_OK)
    throw KernelFailure(KernelFailure::Kind::kStatus, fmt::format("decode open returned status {}: {}", status, error));
  return std::make_unique<ProcessDecodeSession>(*this, id);
}

}  // namespace attest
