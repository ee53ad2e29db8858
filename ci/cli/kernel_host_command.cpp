#include "kernel_host_command.h"

#include "attest/abi_adapter.h"
#include "attest/process_kernel_server.hpp"
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

}  // namespace

int serve_plugin(const std::string& path) {
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
