// The page size a block-table kernel gave for each decode configuration. attest builds a pool
// from the first answer; pages cannot change size under it, so a different later answer is the
// kernel's fault, reported naming both values.
#pragma once

#include <fmt/format.h>

#include <cstddef>
#include <map>
#include <string>

#include "attest/kernels/kernel.h"

namespace attest {

class PageSizeRecord {
 public:
  // `bytes`, the kernel's answer for the configuration whose protocol bytes are `config`; throws
  // KernelFailure when an earlier answer for it differs.
  std::size_t checked(const std::string& config, std::size_t bytes) {
    const auto [at, first] = first_.emplace(config, bytes);
    if (!first && at->second != bytes)
      throw KernelFailure(KernelFailure::Kind::kProtocol,
                          fmt::format("the kernel's page_bytes changed between calls: {} then {} for the same "
                                      "decode configuration (its pages must keep one size)",
                                      at->second, bytes));
    return bytes;
  }

 private:
  std::map<std::string, std::size_t> first_;
};

}  // namespace attest
