#include "kernel_host_command.h"

#include <dlfcn.h>

#include <filesystem>
#include <fmt/format.h>

#include "attest/abi_adapter.h"
#include "attest/process_kernel_server.hpp"
#include "kernel_resolver.h"

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
  auto entry = reinterpret_cast<attest_kernel_entry_any_fn>(::dlsym(library, ATTEST_ENTRY_SYMBOL));
  if (!entry) return refuse(fmt::format("{} does not export {}", path, ATTEST_ENTRY_SYMBOL));
  const void* descriptor = entry();
  if (!descriptor) return refuse(fmt::format("{}: {}() returned NULL", path, ATTEST_ENTRY_SYMBOL));
  const std::uint32_t version = *static_cast<const std::uint32_t*>(descriptor);
  if (version == ATTEST_ABI_VERSION_1) {
    if (!static_cast<const attest_kernel*>(descriptor)->forward)
      return refuse(fmt::format("{}: descriptor has no forward function", path));
  } else if (version == ATTEST_ABI_VERSION_2) {
    const auto* v2 = static_cast<const attest_kernel_v2*>(descriptor);
    if (v2->struct_size < sizeof(attest_kernel_v2))
      return refuse(fmt::format("{}: descriptor struct_size {} is smaller than attest_kernel_v2 ({})", path,
                                v2->struct_size, sizeof(attest_kernel_v2)));
    if (!v2->forward && !v2->contract.decode_only)
      return refuse(fmt::format("{}: descriptor has no forward function (and its contract is not decode_only)", path));
  } else {
    return refuse(fmt::format("{}: kernel ABI version {}, this attest speaks versions 1 and 2", path, version));
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
