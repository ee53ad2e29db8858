#include "containment.h"

#include <unistd.h>

#include <algorithm>

namespace attest {

std::size_t default_memory_limit() {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  const std::size_t total = pages > 0 && page > 0 ? std::size_t(pages) * std::size_t(page) : std::size_t{2} << 30;
  return std::max<std::size_t>(total / 2, std::size_t{1} << 30);
}

}  // namespace attest
