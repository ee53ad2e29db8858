#include "process_kernel.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "attest/abi_adapter.h"
#include "attest/safe_text.h"

extern char** environ;

namespace attest {
namespace {

using Clock = std::chrono::steady_clock;
using protocol::Type;

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kAddressSanitizer = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kAddressSanitizer = true;
#else
constexpr bool kAddressSanitizer = false;
#endif
#else
constexpr bool kAddressSanitizer = false;
#endif

enum class ReadResult { kOk, kEof, kTimeout, kDied };

int open_pidfd(pid_t pid) {
#ifdef SYS_pidfd_open
  return static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
#else
  (void)pid;
  return -1;
#endif
}

bool has_exited(pid_t pid) {
  siginfo_t info{};
  return ::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info.si_pid == pid;
}

// Reads n bytes before the deadline. When the child exits, whatever it wrote is still read, then
// the wait ends: a descendant holding the pipe open must not turn a crash into a hang.
ReadResult read_with_deadline(int fd, int pidfd, pid_t pid, char* buf, std::size_t n, Clock::time_point deadline) {
  bool died = false;
  while (n > 0) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return ReadResult::kTimeout;
    pollfd fds[2] = {{fd, POLLIN, 0}, {pidfd, POLLIN, 0}};
    const int wait = died ? 0 : static_cast<int>(std::min<long long>(left, pidfd >= 0 ? 1000 : 20));
    const int ready = ::poll(fds, pidfd >= 0 ? 2 : 1, wait);
    if (ready < 0 && errno != EINTR) return ReadResult::kEof;
    if (ready > 0 && (fds[0].revents & (POLLIN | POLLHUP | POLLERR))) {
      const ssize_t r = ::read(fd, buf, n);
      if (r == 0) return ReadResult::kEof;
      if (r < 0) {
        if (errno == EINTR || errno == EAGAIN) continue;
        return ReadResult::kEof;
      }
      buf += r;
      n -= static_cast<std::size_t>(r);
      continue;
    }
    if (died) return ReadResult::kDied;
    died = pidfd >= 0 ? (ready > 0 && (fds[1].revents & POLLIN)) : has_exited(pid);
  }
  return ReadResult::kOk;
}

// Writes n bytes before the deadline, on a non-blocking descriptor: a kernel that stops reading
// its requests (a full pipe) is a hang of the call, never a harness blocked in write().
ReadResult write_with_deadline(int fd, const char* buf, std::size_t n, Clock::time_point deadline) {
  while (n > 0) {
    const ssize_t w = ::write(fd, buf, n);
    if (w > 0) {
      buf += w;
      n -= static_cast<std::size_t>(w);
      continue;
    }
    if (w < 0 && errno != EINTR && errno != EAGAIN) return ReadResult::kEof;  // the child closed its end
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return ReadResult::kTimeout;
    pollfd out{fd, POLLOUT, 0};
    if (::poll(&out, 1, static_cast<int>(std::min<long long>(left, 1000))) < 0 && errno != EINTR)
      return ReadResult::kEof;
  }
  return ReadResult::kOk;
}

std::string describe_exit(int status) {
  if (WIFSIGNALED(status))
    return fmt::format("crashed with signal {} ({})", WTERMSIG(status), strsignal(WTERMSIG(status)));
  if (WIFEXITED(status)) return fmt::format("exited with code {}", WEXITSTATUS(status));
  return "stopped";
}

// Live children's process groups, so that attest killed by SIGINT, SIGTERM or SIGHUP takes
// them along (after kill -9, PR_SET_PDEATHSIG takes the child; its group's other members are
// killed whenever attest can still act).
constexpr int kMaxChildren = 64;
volatile sig_atomic_t child_groups[kMaxChildren];

void remember_group(pid_t pid, bool live) {
  for (int i = 0; i < kMaxChildren; ++i)
    if (live ? child_groups[i] == 0 : child_groups[i] == pid) {
      child_groups[i] = live ? pid : 0;
      return;
    }
}

void kill_groups_and_die(int sig) {
  for (int i = 0; i < kMaxChildren; ++i)
    if (child_groups[i] > 0) ::kill(-child_groups[i], SIGKILL);
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

void install_exit_handlers() {
  static bool installed = false;
  if (installed) return;
  installed = true;
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT}) ::signal(sig, kill_groups_and_die);
}

// Waits up to polls x 2 ms for the child to exit; then kills its whole process group (a kernel's
// descendants die with it) and returns the child's wait status.
int reap(pid_t pid, int polls) {
  int status = 0;
  bool done = false;
  for (int i = 0; i < polls && !done; ++i) {
    done = ::waitpid(pid, &status, WNOHANG) == pid;
    if (!done) ::usleep(2000);
  }
  ::kill(-pid, SIGKILL);
  if (!done) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, &status, 0);
  }
  remember_group(pid, false);
  return status;
}

// What the child does between clone and exec, all prepared by the parent.
struct ChildSetup {
  int to_read = -1, from_write = -1;
  bool limit_data = false;
  rlimit data_limit{};
  pid_t parent = 0;
  char** argv = nullptr;
  char** envp = nullptr;
  sigset_t signal_mask{};  // attest's own, restored in the child just before exec
};

// Runs in the child, which shares attest's memory until it execs (CLONE_VM | CLONE_VFORK): only
// system calls on its own stack, no sanitizer instrumentation, nothing written but its locals.
// The child's containment, before it runs the kernel: attest's signal handlers gone, its own process
// group, death with attest, the protocol on descriptors 3 and 4, stdin empty, stdout to stderr.
__attribute__((no_sanitize("address", "undefined"))) void enter_containment(const ChildSetup& c) {
  // The child has its own copy of the signal handlers: none of attest's may run in it.
  for (int sig = 1; sig < NSIG; ++sig) {
    struct sigaction action {};
    if (::sigaction(sig, nullptr, &action) == 0 && action.sa_handler != SIG_DFL && action.sa_handler != SIG_IGN)
      ::signal(sig, SIG_DFL);
  }
  ::signal(SIGPIPE, SIG_DFL);
  ::setpgid(0, 0);                      // one group: killed together, descendants included
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);   // dies with attest, even after kill -9
  // Attest died before the prctl? (In a new namespace the parent is invisible, getppid() is 0:
  // there the kernel finds its protocol closed and exits, taking the namespace along.)
  if (::getpid() != 1 && ::getppid() != c.parent) ::_exit(127);
  const int in = ::fcntl(c.to_read, F_DUPFD, 10), out = ::fcntl(c.from_write, F_DUPFD, 10);
  ::dup2(in, 3);
  ::dup2(out, 4);
  ::close(in);
  ::close(out);
  const int null = ::open("/dev/null", O_RDONLY);
  ::dup2(null, 0);
  ::dup2(2, 1);  // a printf in the kernel lands on stderr, never in the protocol
  if (c.limit_data) ::setrlimit(RLIMIT_DATA, &c.data_limit);
  ::pthread_sigmask(SIG_SETMASK, &c.signal_mask, nullptr);
}

__attribute__((no_sanitize("address", "undefined"))) int exec_kernel_process(void* arg) {
  const ChildSetup& c = *static_cast<const ChildSetup*>(arg);
  enter_containment(c);
  ::execvpe(c.argv[0], c.argv, c.envp);
  ::dprintf(2, "attest: cannot run %s: %s\n", c.argv[0], strerror(errno));
  ::_exit(127);
}

// Starts the kernel's process, as the first of a new PID namespace where the machine allows it
// (root, or CAP_SYS_ADMIN in a container): when it exits or is killed, Linux kills every process
// left in the namespace, a setsid() grandchild that cleared its death signal included. Elsewhere
// a plain child (docs/trust-model.md names what may escape then). Like posix_spawn, the child shares attest's
// memory until it execs: a fork would copy the page tables of attest's whole heap for every
// restart (under ASan most of a crashing kernel's certify went there).
pid_t spawn_contained(ChildSetup& setup) {
  std::vector<char> stack(256 * 1024);
  char* top = stack.data() + stack.size();
  sigset_t all;
  ::sigfillset(&all);
  ::pthread_sigmask(SIG_SETMASK, &all, &setup.signal_mask);  // no handler of attest's runs in the child
  const int flags = CLONE_VM | CLONE_VFORK | SIGCHLD;
  pid_t pid = ::clone(exec_kernel_process, top, flags | CLONE_NEWPID, &setup);
  if (pid < 0 && (errno == EPERM || errno == EINVAL || errno == EUSERS || errno == ENOSPC))
    pid = ::clone(exec_kernel_process, top, flags, &setup);
  const int error = errno;
  ::pthread_sigmask(SIG_SETMASK, &setup.signal_mask, nullptr);
  errno = error;
  return pid;
}

// An in-process kernel's child: a fork of this process that serves its copy of the kernel over the
// protocol, contained like any kernel process (a restart forks a fresh copy of the kernel as attest
// holds it). It never returns into the caller's code: its end is _exit, so no atexit handler or
// static destructor of the caller runs twice.
pid_t fork_contained(ChildSetup& setup, const std::function<int(int, int)>& serve, int attest_write, int attest_read) {
  sigset_t all;
  ::sigfillset(&all);
  ::pthread_sigmask(SIG_SETMASK, &all, &setup.signal_mask);
  std::fflush(nullptr);  // what the caller has buffered is printed once, not again by the child
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(attest_write);  // else the child holds its own request pipe open and never sees attest leave
    ::close(attest_read);
    enter_containment(setup);
    ::close_range(5, ~0U, 0);  // the caller's files and the pipes' spare ends: no exec closes them here
    ::_exit(serve(3, 4));
  }
  const int error = errno;
  ::pthread_sigmask(SIG_SETMASK, &setup.signal_mask, nullptr);
  errno = error;
  return pid;
}

// A fork shares its parent's data segment: the limit counts what the kernel adds to it.
std::size_t data_in_use() {
  std::FILE* status = std::fopen("/proc/self/status", "r");
  if (!status) return 0;
  std::size_t kib = 0;
  char line[256];
  while (std::fgets(line, sizeof line, status))
    if (std::sscanf(line, "VmData: %zu kB", &kib) == 1) break;
  std::fclose(status);
  return kib * 1024;
}

std::string seconds_text(double s) { return fmt::format("{:g} s", s); }

// The least a kernel process gets to start and describe itself, whatever --timeout says.
constexpr double kStartSeconds = 30.0;


// The child's environment: ours, plus the protocol's descriptors, plus ASan's options when this is
// an AddressSanitizer build (its children cannot run under RLIMIT_DATA). attest's own kernel host
// gets one OpenBLAS thread: the library starts its pool when loaded, and an idle pool thread spins
// on sched_yield for the short life of a host that a crashing kernel takes down.
std::vector<std::string> child_environment(std::size_t memory_limit, bool own_host) {
  std::vector<std::string> env;
  std::string asan_options;
  if (own_host && !::getenv("OPENBLAS_NUM_THREADS")) env.push_back("OPENBLAS_NUM_THREADS=1");
  for (char** e = environ; *e; ++e) {
    const std::string entry = *e;
    if (entry.starts_with("ATTEST_PROTOCOL_FDS=")) continue;
    if (entry.starts_with("ASAN_OPTIONS=")) asan_options = entry.substr(13);
    else env.push_back(entry);
  }
  env.push_back("ATTEST_PROTOCOL_FDS=3,4");
  if (kAddressSanitizer) {
    // An ASan build's children are often ASan builds too (the host is this executable): they
    // cannot run under RLIMIT_DATA, so ASan enforces the limit; guard faults stay with the
    // kernel server's handler, and a crash report costs no symbolization.
    asan_options += std::string(asan_options.empty() ? "" : ":") + "handle_segv=0:handle_sigbus=0:symbolize=0:detect_leaks=0";
    if (memory_limit) {
      const std::size_t mb = std::max<std::size_t>(memory_limit >> 20, 1);
      asan_options += fmt::format(":hard_rss_limit_mb={}:malloc_limit_mb={}:allocator_may_return_null=1", mb, mb);
    }
  }
  if (!asan_options.empty()) env.push_back("ASAN_OPTIONS=" + asan_options);
  return env;
}

std::vector<char*> pointers(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (std::string& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

// Bytes a reply may need: its strings (each capped) and its float arrays.
std::uint64_t reply_bound(std::size_t strings, std::uint64_t floats) {
  return 64 + strings * (4 + kMaxKernelString) + 4 * floats;
}

}  // namespace

namespace {
std::string& kernel_host_executable() {
  static std::string path;  // empty: this executable
  return path;
}
}  // namespace

void set_kernel_host_executable(const std::string& path) { kernel_host_executable() = path; }

std::vector<std::string> kernel_host_argv(const std::vector<std::string>& args) {
  std::string host = kernel_host_executable();
  if (host.empty()) {
    char self[4096];
    const ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) throw KernelLoadError("cannot find the attest executable (/proc/self/exe)");
    self[n] = '\0';
    host = self;
  }
  std::vector<std::string> argv = {host, "kernel-host"};
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}

ProcessKernel::ProcessKernel(Options options) : options_(std::move(options)) {
  ::signal(SIGPIPE, SIG_IGN);  // a dead child must give EPIPE, not kill the harness
  start();
}

ProcessKernel::~ProcessKernel() { stop(); }

void ProcessKernel::start() const {
  const Containment& c = options_.containment;
  if (c.deadline && Clock::now() >= *c.deadline)
    throw KernelFailure(KernelFailure::Kind::kDeadline, "the whole-run deadline was reached");
  int to[2], from[2];
  if (::pipe2(to, O_CLOEXEC) != 0 || ::pipe2(from, O_CLOEXEC) != 0)
    throw KernelLoadError("cannot create pipes: " + std::string(strerror(errno)));
  ::fcntl(to[1], F_SETFL, O_NONBLOCK);  // attest's end only: requests are written against a deadline
  // Everything the child needs is built before it starts: it runs only system calls.
  const bool own_host = options_.argv.size() > 1 && options_.argv[1] == "kernel-host";
  std::vector<std::string> argv_strings = options_.argv, env_strings = child_environment(c.memory_limit_bytes, own_host);
  std::vector<char*> argv = pointers(argv_strings), envp = pointers(env_strings);
  const bool limit_data = c.memory_limit_bytes && !kAddressSanitizer;
  const bool forked = static_cast<bool>(options_.serve_in_child);
  const std::size_t data_limit_bytes = c.memory_limit_bytes + (forked ? data_in_use() : 0);
  const rlimit data_limit{data_limit_bytes, data_limit_bytes};
  ChildSetup setup{to[0], from[1], limit_data, data_limit, ::getpid(), argv.data(), envp.data()};
  const pid_t pid = forked ? fork_contained(setup, options_.serve_in_child, to[1], from[0]) : spawn_contained(setup);
  if (pid < 0) throw KernelLoadError("cannot start the kernel process: " + std::string(strerror(errno)));
  ::setpgid(pid, pid);  // also from this side: no window in which a kill(-pid) misses
  install_exit_handlers();
  remember_group(pid, true);
  ::close(to[0]);
  ::close(from[1]);
  pid_ = pid;
  pidfd_ = open_pidfd(pid);
  to_child_ = to[1];
  from_child_ = from[0];
  ++generation_;

  // Handshake: HELLO, then the descriptor (or an error naming why the kernel cannot serve).
  std::string reply;
  try {
    reply = call(Type::kHello, protocol::Writer().u32(protocol::kVersion).bytes(), Type::kDescriptor,
                 protocol::kMaxDescriptorBytes);
  } catch (const KernelFailure& e) {
    stop();
    throw KernelLoadError(options_.description + ": " + e.what() +
                          " before describing itself (protocol " + std::to_string(protocol::kVersion) +
                          ": requests and replies travel on the descriptors of ATTEST_PROTOCOL_FDS; impl/PROTOCOL.md)");
  }
  protocol::Reader r(reply);
  try {
    const protocol::Descriptor d = protocol::read_descriptor(r);
    const std::string name = safe_text(d.name, kMaxKernelName);
    if (d.abi_version != ATTEST_ABI_VERSION_1 && d.abi_version != ATTEST_ABI_VERSION_2)
      throw KernelLoadError(fmt::format("{}: kernel ABI version {}, this attest speaks versions 1 and 2",
                                        options_.description, d.abi_version));
    auto* self = const_cast<ProcessKernel*>(this);
    if (self->name_.empty()) {
      try {
        self->caps_ = capabilities_from_descriptor(d);
      } catch (const std::invalid_argument& e) {
        throw KernelLoadError(options_.description + ": " + e.what());
      }
      self->abi_version_ = d.abi_version;
      self->name_ = name.empty() ? safe_text(options_.description, kMaxKernelName) : name;
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
  if (pidfd_ >= 0) ::close(pidfd_);
  pid_ = pidfd_ = to_child_ = from_child_ = -1;
}

void ProcessKernel::kill_child() const {
  ::close(to_child_);
  ::close(from_child_);
  reap(pid_, 0);
  if (pidfd_ >= 0) ::close(pidfd_);
  pid_ = pidfd_ = to_child_ = from_child_ = -1;
}

void ProcessKernel::fail(KernelFailure::Kind kind, const std::string& why) const {
  kill_child();
  throw KernelFailure(kind, why);
}

// What one call may take, fixed when it starts: writing the request and reading the reply share
// it, so a call never lasts longer than its limit (a kernel that reads slowly then stalls once
// had its whole limit twice).
struct ProcessKernel::CallLimit {
  enum class Kind { kHang, kDeadline, kCutoff };
  Clock::time_point start, deadline;
  Kind kind = Kind::kHang;
  double hang_after = 0;           // seconds from start
  std::optional<double> measured;  // what the kernel's measured speed predicts
  double predicted = 0;            // measured, or the floor for calls too fast to time
};

ProcessKernel::CallLimit ProcessKernel::limit_of(Type reply, double work) const {
  const Containment& c = options_.containment;
  CallLimit l;
  l.start = Clock::now();
  // A hang is no answer within max(--timeout, kHangFactor x the call's predicted cost), budget or
  // not. Every call has a prediction: from the kernel's measured speed, or, before any call was
  // slow enough to time, from the floor (cost_model.h). The stage's time budget may end the wait
  // sooner only while a measured prediction still explains it (a live kernel merely slow at this
  // size): a cutoff that comes after kHangFactor x the prediction, or a call whose prediction is
  // only the floor, never cuts, and the call runs on to the hang limit.
  l.measured = work > 0 ? costs_.predict(work) : std::nullopt;
  l.predicted = costs_.predict_or_floor(work);
  // Starting a program (an interpreter, a sanitized host on a busy machine) is not the kernel's
  // computation: the handshake waits at least kStartSeconds, and no budget cuts it.
  const bool handshake = reply == Type::kDescriptor;
  const double floor = handshake ? std::max(c.timeout_seconds, kStartSeconds) : c.timeout_seconds;
  l.hang_after = std::max(floor, kHangFactor * l.predicted);
  auto after = [&](double seconds) {
    return l.start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  };
  l.deadline = after(l.hang_after);
  const bool explained = l.measured && cutoff_ && *cutoff_ < after(kHangFactor * *l.measured);
  if (cutoff_ && !handshake && explained && *cutoff_ < l.deadline)
    l.deadline = *cutoff_, l.kind = CallLimit::Kind::kCutoff;
  if (c.deadline && *c.deadline < l.deadline) l.deadline = *c.deadline, l.kind = CallLimit::Kind::kDeadline;
  return l;
}

void ProcessKernel::fail_at_limit(const CallLimit& l, std::optional<std::size_t> unsent_request) const {
  const double waited = std::chrono::duration<double>(Clock::now() - l.start).count();
  if (l.kind == CallLimit::Kind::kDeadline)
    fail(KernelFailure::Kind::kDeadline, "the whole-run deadline was reached during a call (kernel killed)");
  if (l.kind == CallLimit::Kind::kCutoff)
    fail(KernelFailure::Kind::kTooSlow,
         fmt::format("still {} after {:.3g} s when the time budget ran out; its measured speed predicts {:.3g} s "
                     "(killed)",
                     unsent_request ? "taking its request" : "computing", waited, *l.measured));
  if (unsent_request)
    fail(KernelFailure::Kind::kHang, fmt::format("kernel stopped reading: a request of {} bytes not taken within {} "
                                                 "(killed)",
                                                 *unsent_request, seconds_text(l.hang_after)));
  // A fork carries only the thread that forked: a kernel waiting on a pool it started earlier hangs.
  const std::string forked = options_.serve_in_child
                                 ? "; it ran in a fork of the calling process, which keeps only the calling thread: "
                                   "a kernel waiting on threads it started before certify hangs there (start them on "
                                   "first use, or certify with in_process = true)"
                                 : "";
  fail(KernelFailure::Kind::kHang,
       fmt::format("kernel did not answer within {}, {:.3g}x what {} predicts ({:.3g} s) (killed){}",
                   seconds_text(l.hang_after), waited / l.predicted,
                   l.measured ? "its measured speed" : "the floor for a call too fast to time", l.predicted, forked));
}

std::string ProcessKernel::read_reply(Type expected, std::uint64_t max_payload, double work,
                                      const CallLimit& limit) const {
  auto fail_read = [&](ReadResult r) {
    if (r == ReadResult::kEof || r == ReadResult::kDied) {
      ::close(to_child_);
      ::close(from_child_);
      const int status = reap(pid_, 500);  // it closed its end: give it a moment to finish dying
      if (pidfd_ >= 0) ::close(pidfd_);
      pid_ = pidfd_ = to_child_ = from_child_ = -1;
      throw KernelFailure(KernelFailure::Kind::kCrash,
                          fmt::format("kernel process {} while answering", describe_exit(status)));
    }
    fail_at_limit(limit, std::nullopt);
  };
  char header[16];
  if (ReadResult r = read_with_deadline(from_child_, pidfd_, pid_, header, sizeof header, limit.deadline);
      r != ReadResult::kOk)
    fail_read(r);
  Type type;
  std::uint64_t size;
  try {
    std::tie(type, size) = protocol::parse_header(header);
  } catch (const protocol::ProtocolError& e) {
    fail(KernelFailure::Kind::kProtocol, std::string("malformed protocol message: ") + e.what());
  }
  if (size > max_payload) {
    if (expected == Type::kDescriptor)
      fail(KernelFailure::Kind::kProtocol,
           fmt::format("protocol violation: the kernel's descriptor announces {} bytes, over attest's cap of {} bytes "
                       "for a descriptor (its path names and predicates make it long: declare fewer paths)",
                       size, max_payload));
    fail(KernelFailure::Kind::kProtocol,
         fmt::format("protocol violation: a reply announces {} bytes, more than the {} this call can need", size,
                     max_payload));
  }
  std::string payload(size, '\0');
  if (ReadResult r = read_with_deadline(from_child_, pidfd_, pid_, payload.data(), size, limit.deadline);
      r != ReadResult::kOk)
    fail_read(r);
  auto message_of = [&] {
    try {
      protocol::Reader reader(payload);
      return safe_text(reader.str(), kMaxKernelMessage);
    } catch (const protocol::ProtocolError&) {
      return std::string("(unreadable message)");
    }
  };
  if (type == Type::kFault) fail(KernelFailure::Kind::kFault, message_of());
  if (type == Type::kError) {
    const std::string message = message_of();
    stop();
    // The host names the plugin itself; other kernels get their command as a prefix.
    throw KernelLoadError(message.starts_with(options_.description) ? message : options_.description + ": " + message);
  }
  if (type != expected)
    fail(KernelFailure::Kind::kProtocol, fmt::format("malformed protocol message: expected type {}, got {}",
                                                     static_cast<int>(expected), static_cast<int>(type)));
  costs_.record(work, std::chrono::duration<double>(Clock::now() - limit.start).count());
  return payload;
}

std::string ProcessKernel::call(Type request, const std::string& payload, Type reply, std::uint64_t max_reply,
                                double work) const {
  return exchange(request, {std::string_view(payload)}, reply, max_reply, work);
}

std::string ProcessKernel::exchange(Type request, std::initializer_list<std::string_view> payload, Type reply,
                                    std::uint64_t max_reply, double work) const {
  const Containment& c = options_.containment;
  if (c.deadline && Clock::now() >= *c.deadline) {
    if (pid_ >= 0) kill_child();
    throw KernelFailure(KernelFailure::Kind::kDeadline, "the whole-run deadline was reached");
  }
  if (pid_ < 0) start();  // restart after a crash or hang
  const CallLimit limit = limit_of(reply, work);
  send_request(request, payload, limit);
  return read_reply(reply, max_reply, work, limit);
}

void ProcessKernel::send_request(Type request, std::initializer_list<std::string_view> payload,
                                 const CallLimit& limit) const {
  // The request must be taken within the call's limit; a failed write means the child is gone,
  // and the read that follows reports how it ended.
  std::size_t size = 0;
  for (std::string_view part : payload) size += part.size();
  const std::string header = protocol::frame_header(request, size);
  ReadResult r = write_with_deadline(to_child_, header.data(), header.size(), limit.deadline);
  for (std::string_view part : payload)
    if (r == ReadResult::kOk) r = write_with_deadline(to_child_, part.data(), part.size(), limit.deadline);
  if (r == ReadResult::kTimeout) fail_at_limit(limit, header.size() + size);
}

void ProcessKernel::forward(const Problem& p, std::span<float> o, std::span<float> lse) const {
  if (!caps_.forward()) throw KernelFailure(KernelFailure::Kind::kStatus, "the kernel is decode-only (no forward)");
  protocol::Writer w;
  protocol::write_problem(w, to_wire(p, caps_.precision));
  const std::string reply =
      call(Type::kForward, w.bytes(), Type::kForwardResult, reply_bound(3, p.o_size() + p.lse_size()), forward_work(p));
  protocol::ForwardResult result;
  try {
    protocol::Reader r(reply);
    result = protocol::read_forward_result(r);
  } catch (const protocol::ProtocolError& e) {
    fail(KernelFailure::Kind::kProtocol, std::string("malformed forward result: ") + e.what());
  }
  if (!result.fault.empty()) throw KernelFailure(KernelFailure::Kind::kFault, safe_text(result.fault, kMaxKernelMessage));
  if (result.status != ATTEST_OK)
    throw KernelFailure(KernelFailure::Kind::kStatus, fmt::format("kernel returned status {}: {}", result.status,
                                                                  safe_text(result.error, kMaxKernelMessage)));
  const Scalar o_format = caps_.precision.o;  // O arrives in its storage format
  if (result.o.size() != o.size() * info(o_format).bytes ||
      (caps_.lse() && !lse.empty() && result.lse.size() != lse.size()))
    fail(KernelFailure::Kind::kProtocol, "malformed forward result: output sizes do not match the problem");
  const std::vector<float> values = floats_from_storage(result.o.data(), o.size(), o_format);
  std::copy(values.begin(), values.end(), o.begin());
  if (caps_.lse() && !lse.empty()) std::copy(result.lse.begin(), result.lse.end(), lse.begin());
  last_path_ = result.path.empty() ? "default" : safe_text(result.path, kMaxKernelName);
}

void ProcessKernel::backward(const Problem& p, const BackwardInputs& in, const GradientSpans& out) const {
  if (!caps_.backward()) throw KernelFailure(KernelFailure::Kind::kStatus, "the kernel declares no backward");
  protocol::Writer w;
  protocol::write_backward(w, to_wire(p, in, caps_.precision));
  const std::uint64_t elements = p.q_size() + p.k_size() + p.v_size() + p.modifiers.sinks.size();
  const std::string reply =
      call(Type::kBackward, w.bytes(), Type::kBackwardResult, reply_bound(3, elements), backward_work(p));
  protocol::BackwardResult result;
  try {
    protocol::Reader r(reply);
    result = protocol::read_backward_result(r);
  } catch (const protocol::ProtocolError& e) {
    fail(KernelFailure::Kind::kProtocol, std::string("malformed backward result: ") + e.what());
  }
  if (!result.fault.empty()) throw KernelFailure(KernelFailure::Kind::kFault, safe_text(result.fault, kMaxKernelMessage));
  if (result.status != ATTEST_OK)
    throw KernelFailure(KernelFailure::Kind::kStatus, fmt::format("backward returned status {}: {}", result.status,
                                                                  safe_text(result.error, kMaxKernelMessage)));
  if (!gradients_from_storage(result.dq, result.dk, result.dv, result.dsinks, caps_.precision, out))
    fail(KernelFailure::Kind::kProtocol, "malformed backward result: gradient sizes do not match the problem");
}

namespace {

class ProcessDecodeSession final : public DecodeSession {
 public:
  ProcessDecodeSession(const ProcessKernel& kernel, std::uint64_t id, const DecodeConfig& config)
      : kernel_(kernel), id_(id), config_(config), generation_(kernel.generation()) {}
  ~ProcessDecodeSession() override {
    if (kernel_.generation() != generation_) return;
    try {
      kernel_.call(Type::kDecodeClose, protocol::Writer().u64(id_).bytes(), Type::kClosed, 64);
    } catch (const std::exception&) {
      // The session dies with the process; nothing else to release.
    }
  }

  void step(int n, std::span<const float> q, std::span<const float> k, std::span<const float> v, std::span<float> o,
            std::span<float> lse) override {
    if (kernel_.generation() != generation_)
      throw KernelFailure(KernelFailure::Kind::kCrash, "the kernel process was restarted; its decode session is gone");
    protocol::Writer w;
    const Precision& precision = kernel_.capabilities().precision;  // buffers travel in their storage formats
    const StoredStep bytes = stored_step(config_, precision, n, q, k, v);
    w.u64(id_).i32(n).i32(lse.empty() ? 0 : 1).array(bytes.q).array(bytes.k).array(bytes.v);
    const std::uint64_t rows = std::uint64_t(config_.batch) * config_.heads * n;
    const std::string reply =
        kernel_.call(Type::kDecodeStep, w.bytes(), Type::kDecodeResult, reply_bound(1, rows * (config_.value_dim + 1)),
                     decode_step_work(config_, length_, n));
    protocol::DecodeResult result;
    try {
      protocol::Reader r(reply);
      result = protocol::read_decode_result(r);
    } catch (const protocol::ProtocolError& e) {
      throw KernelFailure(KernelFailure::Kind::kProtocol, std::string("malformed decode result: ") + e.what());
    }
    if (result.status != ATTEST_OK)
      throw KernelFailure(KernelFailure::Kind::kStatus, fmt::format("decode step returned status {}: {}", result.status,
                                                                    safe_text(result.error, kMaxKernelMessage)));
    if (result.o.size() != o.size() * info(precision.o).bytes || result.lse.size() != lse.size())
      throw KernelFailure(KernelFailure::Kind::kProtocol, "malformed decode result: output sizes do not match the step");
    const std::vector<float> values = floats_from_storage(result.o.data(), o.size(), precision.o);
    std::copy(values.begin(), values.end(), o.begin());
    std::copy(result.lse.begin(), result.lse.end(), lse.begin());
    length_ += n;
  }
  long long length() const override { return length_; }
  std::size_t cache_bytes() const override { return 0; }  // not reported across the protocol
  std::vector<long long> retained_positions(int b, int t) const override {
    if (kernel_.capabilities().cache.kind != CachePolicy::Kind::kExplicit) return {};
    if (kernel_.generation() != generation_)
      throw KernelFailure(KernelFailure::Kind::kCrash, "the kernel process was restarted; its decode session is gone");
    const std::string reply = kernel_.call(Type::kDecodeRetained, protocol::Writer().u64(id_).i32(b).i32(t).bytes(),
                                           Type::kRetained, reply_bound(1, 2 * (length_ + 1)));
    protocol::Retained result;
    try {
      protocol::Reader r(reply);
      result = protocol::read_retained(r);
    } catch (const protocol::ProtocolError& e) {
      throw KernelFailure(KernelFailure::Kind::kProtocol, std::string("malformed retained positions: ") + e.what());
    }
    if (result.status != ATTEST_OK)
      throw KernelFailure(KernelFailure::Kind::kStatus, fmt::format("decode_retained returned status {}: {}",
                                                                    result.status,
                                                                    safe_text(result.error, kMaxKernelMessage)));
    return {result.positions.begin(), result.positions.end()};
  }

 private:
  const ProcessKernel& kernel_;
  std::uint64_t id_;
  DecodeConfig config_;
  std::uint64_t generation_;
  long long length_ = 0;
};

}  // namespace

std::unique_ptr<DecodeSession> ProcessKernel::open_decode(const DecodeConfig& config) const {
  config.validate();
  protocol::Writer w;
  protocol::write_decode_config(w, to_wire(config));
  const std::string reply = call(Type::kDecodeOpen, w.bytes(), Type::kDecodeOpened, reply_bound(1, 0));
  protocol::DecodeOpened opened;
  try {
    protocol::Reader r(reply);
    opened = protocol::read_decode_opened(r);
  } catch (const protocol::ProtocolError& e) {
    throw KernelFailure(KernelFailure::Kind::kProtocol, std::string("malformed decode open result: ") + e.what());
  }
  if (opened.status != ATTEST_OK)
    throw KernelFailure(KernelFailure::Kind::kStatus, fmt::format("decode open returned status {}: {}", opened.status,
                                                                  safe_text(opened.error, kMaxKernelMessage)));
  return std::make_unique<ProcessDecodeSession>(*this, opened.session, config);
}

}  // namespace attest

namespace attest {

std::size_t ProcessKernel::page_bytes(const DecodeConfig& config) const {
  if (caps_.page_tokens < 1) throw KernelFailure(KernelFailure::Kind::kStatus, "the kernel declares no block tables");
  protocol::Writer w;
  protocol::write_decode_config(w, to_wire(config), true);
  const std::string reply = call(Type::kPageBytes, w.bytes(), Type::kPageBytesResult, reply_bound(1, 2));
  std::int32_t status = 0;
  std::string error;
  std::int64_t bytes = 0;
  try {
    protocol::Reader r(reply);
    status = r.i32(), error = r.str(), bytes = r.i64();
    r.expect_end();
  } catch (const protocol::ProtocolError& e) {
    fail(KernelFailure::Kind::kProtocol, std::string("malformed page size: ") + e.what());
  }
  if (status != ATTEST_OK)
    throw KernelFailure(KernelFailure::Kind::kStatus, fmt::format("page_bytes returned status {}: {}", status,
                                                                  safe_text(error, kMaxKernelMessage)));
  if (bytes < 1 || bytes > (std::int64_t{1} << 30))
    fail(KernelFailure::Kind::kProtocol, fmt::format("page_bytes returned {} bytes (1 to 2^30)", bytes));
  return page_sizes_.checked(w.bytes(), static_cast<std::size_t>(bytes));
}

void ProcessKernel::decode_paged(const DecodeConfig& config, const PagedStep& step) const {
  const std::size_t bytes_per_page = page_bytes(config);
  check_paged_step(config, caps_.page_tokens, bytes_per_page, step);
  protocol::WirePagedStep wire;
  wire.page_bytes = static_cast<std::int64_t>(bytes_per_page);
  wire.pool = {reinterpret_cast<const std::uint8_t*>(step.pool.data()), step.pool.size()};
  wire.table_width = step.table_width;
  wire.tables.assign(step.tables.begin(), step.tables.end());
  wire.lengths.assign(step.lengths.begin(), step.lengths.end());
  wire.counts.assign(step.counts.begin(), step.counts.end());
  wire.want_lse = step.lse.empty() ? 0 : 1;
  StoredStep bytes = stored_paged(config, caps_.precision, step.counts, step.q, step.k, step.v);
  wire.q = std::move(bytes.q), wire.k = std::move(bytes.k), wire.v = std::move(bytes.v);
  // The pool (up to attest's pool limit) travels from the caller's pages, and comes back as a view
  // into the reply: attest holds it once more per call, not three times (page_pool.cpp's limit).
  protocol::Writer head, tail;
  protocol::write_decode_config(head, to_wire(config), true);
  protocol::write_paged_step_head(head, wire);
  protocol::write_paged_step_tail(tail, wire);
  double work = 0;
  DecodeConfig one = config;
  one.batch = 1;
  for (std::size_t b = 0; b < step.counts.size(); ++b) work += decode_step_work(one, step.lengths[b], step.counts[b]);
  const std::string_view pool(reinterpret_cast<const char*>(step.pool.data()), step.pool.size());
  const std::string reply = exchange(Type::kDecodePaged, {head.bytes(), pool, tail.bytes()}, Type::kDecodePagedResult,
                                     reply_bound(4, step.pool.size() / 4 + step.o.size() + step.lse.size()), work);
  protocol::PagedResult result;
  try {
    protocol::Reader r(reply);
    result = protocol::read_paged_result(r);
  } catch (const protocol::ProtocolError& e) {
    fail(KernelFailure::Kind::kProtocol, std::string("malformed paged decode result: ") + e.what());
  }
  if (!result.fault.empty()) throw KernelFailure(KernelFailure::Kind::kFault, safe_text(result.fault, kMaxKernelMessage));
  if (result.status != ATTEST_OK)
    throw KernelFailure(KernelFailure::Kind::kStatus, fmt::format("decode_paged returned status {}: {}", result.status,
                                                                  safe_text(result.error, kMaxKernelMessage)));
  if (result.pool.size() != step.pool.size() || result.o.size() != step.o.size() * info(caps_.precision.o).bytes ||
      result.lse.size() != step.lse.size())
    fail(KernelFailure::Kind::kProtocol, "malformed paged decode result: pool or output sizes do not match the step");
  std::memcpy(step.pool.data(), result.pool.data(), result.pool.size());
  const std::vector<float> values = floats_from_storage(result.o.data(), step.o.size(), caps_.precision.o);
  std::copy(values.begin(), values.end(), step.o.begin());
  std::copy(result.lse.begin(), result.lse.end(), step.lse.begin());
  last_path_ = result.path.empty() ? "default" : safe_text(result.path, kMaxKernelName);
}

}  // namespace attest
