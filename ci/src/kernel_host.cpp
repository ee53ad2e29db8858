#include "kernel_host.h"

#include <dlfcn.h>

#include <filesystem>
#include <fmt/format.h>

#include "abi_adapter.h"
#include "attest/process_kernel_server.hpp"
#include "kernel_lookup.h"

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
  if (!std::filesystem::exists(path)) return refuse("no such file: " + path);
  void* library = ::dlopen(std::filesystem::absolute(path).c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!library) return refuse(fmt::format("cannot load {}: {}", path, ::dlerror()));
  auto entry = reinterpret_cast<attest_kernel_entry_fn>(::dlsym(library, ATTEST_ENTRY_SYMBOL));
  if (!entry) return refuse(fmt::format("{} does not export {}", path, ATTEST_ENTRY_SYMBOL));
  const attest_kernel* kernel = entry();
  if (!kernel) return refuse(fmt::format("{}: {}() returned NULL", path, ATTEST_ENTRY_SYMBOL));
  if (kernel->abi_version != ATTEST_ABI_VERSION)
    return refuse(fmt::format("{}: kernel ABI version {}, this attest speaks version {}", path, kernel->abi_version,
                              ATTEST_ABI_VERSION));
  if (!kernel->forward) return refuse(fmt::format("{}: descriptor has no forward function", path));
  return protocol::serve(kernel);
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
