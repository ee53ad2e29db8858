#include "kernel_host_command.h"

#include <pthread.h>
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "attest/abi/abi_adapter.h"
#include "attest/abi/process_kernel_server.hpp"
#include "kernel_resolver.h"
#include "plugin_library.h"

namespace attest {
namespace {

// Reports why the kernel cannot be served; attest prints it as a one-line load error.
int refuse(const std::string& why) {
  protocol::write_frame(protocol::detail::protocol_fds().second, protocol::Type::kError,
                        protocol::Writer().str(why).bytes());
  return 2;
}

// What the kernel forks dies with this host, and so with attest even after a kill -9 (which
// reaches the host through PR_SET_PDEATHSIG, set by attest before exec): every child made by fork()
// gets the same death signal, generation after generation. A raw clone() escapes it; a cgroup
// would not.
pid_t forking_parent = 0;

void die_with_forking_parent() {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != forking_parent) ::raise(SIGKILL);  // the parent died before the prctl
}

}  // namespace

int serve_plugin(const std::string& path) {
  ::pthread_atfork([] { forking_parent = ::getpid(); }, nullptr, die_with_forking_parent);
  const void* descriptor = nullptr;
  try {
    descriptor = open_plugin(path);
  } catch (const KernelLoadError& e) {
    return refuse(e.what());
  }
  const auto [in, out] = protocol::detail::protocol_fds();
  return protocol::serve_descriptor(descriptor, in, out);
}

int serve_builtin(const std::string& name) {
  std::unique_ptr<AbiAdapter> adapter;
  try {
    adapter = std::make_unique<AbiAdapter>(resolve_kernel(name));
  } catch (const std::exception& e) {
    return refuse(e.what());
  }
  return protocol::serve(adapter->descriptor());
}

}  // namespace attest
