// The containment of a kernel's child process (docs/design.md#containment): how it starts, what it
// may not do, how attest waits on it and how it ends.
#include "containment.h"

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
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "attest/kernels/kernel.h"

extern char** environ;

namespace attest {
namespace {

using Clock = std::chrono::steady_clock;

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
  ::setpgid(0, 0);                     // one group: killed together, descendants included
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // dies with attest, even after kill -9
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

// A directory of the child's own under our TMPDIR (or /tmp); empty if none can be made, and then
// the child shares ours.
// The private TMPDIRs of children not yet ended: attest leaving through exit() with a kernel running
// (an error exit, the run's deadline) removes them too.
std::mutex live_tmp_mutex;
std::set<std::string> live_tmp;

void remove_live_tmp() {
  std::lock_guard lock(live_tmp_mutex);
  std::error_code ignored;
  for (const std::string& path : live_tmp) std::filesystem::remove_all(path, ignored);
  live_tmp.clear();
}

std::string make_private_tmp() {
  const char* parent = ::getenv("TMPDIR");
  std::string path = std::string(parent && *parent ? parent : "/tmp") + "/attest-kernel-XXXXXX";
  if (!::mkdtemp(path.data())) return {};
  static const bool registered = std::atexit(remove_live_tmp) == 0;
  (void)registered;
  std::lock_guard lock(live_tmp_mutex);
  live_tmp.insert(path);
  return path;
}

void remove_private_tmp(const std::string& path) {
  if (path.empty()) return;
  std::error_code ignored;  // a file the kernel made unremovable stays; nothing to report it to
  std::filesystem::remove_all(path, ignored);
  std::lock_guard lock(live_tmp_mutex);
  live_tmp.erase(path);
}

// The child's environment: ours (TMPDIR its own, when it has one), plus the protocol's descriptors, plus ASan's options
// when this is an AddressSanitizer build (its children cannot run under RLIMIT_DATA). attest's own kernel host gets one
// OpenBLAS thread: the library starts its pool when loaded, and an idle pool thread spins on sched_yield for the short
// life of a host that a crashing kernel takes down.
std::vector<std::string> child_environment(std::size_t memory_limit, bool own_host, const std::string& tmp) {
  std::vector<std::string> env;
  std::string asan_options;
  if (own_host && !::getenv("OPENBLAS_NUM_THREADS")) env.push_back("OPENBLAS_NUM_THREADS=1");
  if (!tmp.empty()) env.push_back("TMPDIR=" + tmp);
  for (char** e = environ; *e; ++e) {
    const std::string entry = *e;
    if (entry.starts_with("ATTEST_PROTOCOL_FDS=") || (!tmp.empty() && entry.starts_with("TMPDIR="))) continue;
    if (entry.starts_with("ASAN_OPTIONS="))
      asan_options = entry.substr(13);
    else
      env.push_back(entry);
  }
  env.push_back("ATTEST_PROTOCOL_FDS=3,4");
  if (kAddressSanitizer) {
    // An ASan build's children are often ASan builds too (the host is this executable): they
    // cannot run under RLIMIT_DATA, so ASan enforces the limit; guard faults stay with the
    // kernel server's handler, and a crash report costs no symbolization.
    asan_options +=
        std::string(asan_options.empty() ? "" : ":") + "handle_segv=0:handle_sigbus=0:symbolize=0:detect_leaks=0";
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

}  // namespace

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

ContainedChild start_contained(const std::vector<std::string>& program, const std::function<int(int, int)>& serve,
                               std::size_t memory_limit_bytes) {
  int to[2], from[2];
  if (::pipe2(to, O_CLOEXEC) != 0 || ::pipe2(from, O_CLOEXEC) != 0)
    throw KernelLoadError("cannot create pipes: " + std::string(strerror(errno)));
  ::fcntl(to[1], F_SETFL, O_NONBLOCK);  // attest's end only: requests are written against a deadline
  // Everything the child needs is built before it starts: it runs only system calls.
  const bool own_host = program.size() > 1 && program[1] == "kernel-host";
  const bool forked = static_cast<bool>(serve);
  const std::string private_tmp = forked ? std::string() : make_private_tmp();
  std::vector<std::string> argv_strings = program,
                           env_strings = child_environment(memory_limit_bytes, own_host, private_tmp);
  std::vector<char*> argv = pointers(argv_strings), envp = pointers(env_strings);
  const bool limit_data = memory_limit_bytes && !kAddressSanitizer;
  const std::size_t data_limit_bytes = memory_limit_bytes + (forked ? data_in_use() : 0);
  const rlimit data_limit{data_limit_bytes, data_limit_bytes};
  ChildSetup setup{to[0], from[1], limit_data, data_limit, ::getpid(), argv.data(), envp.data()};
  const pid_t pid = forked ? fork_contained(setup, serve, to[1], from[0]) : spawn_contained(setup);
  if (pid < 0) {
    const int error = errno;
    remove_private_tmp(private_tmp);
    throw KernelLoadError("cannot start the kernel process: " + std::string(strerror(error)));
  }
  ::setpgid(pid, pid);  // also from this side: no window in which a kill(-pid) misses
  install_exit_handlers();
  remember_group(pid, true);
  ::close(to[0]);
  ::close(from[1]);
  return {pid, open_pidfd(pid), to[1], from[0], private_tmp};
}

int end_contained(ContainedChild& child, int polls) {
  ::close(child.to_child);
  ::close(child.from_child);
  const int status = reap(child.pid, polls);
  if (child.pidfd >= 0) ::close(child.pidfd);
  remove_private_tmp(child.private_tmp);
  child = ContainedChild{};
  return status;
}

std::size_t default_memory_limit() {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  const std::size_t total = pages > 0 && page > 0 ? std::size_t(pages) * std::size_t(page) : std::size_t{2} << 30;
  return std::max<std::size_t>(total / 2, std::size_t{1} << 30);
}

}  // namespace attest
