#include "attest/kernels/cache_policy.h"

#include <fmt/format.h>

#include <stdexcept>

namespace attest {

bool CachePolicy::retains(long long j, long long p) const {
  switch (kind) {
    case Kind::kWindow:
      return p - j < recent;
    case Kind::kSinksRecent:
      return j < sinks || p - j < recent;
    default:
      return true;
  }
}

long long CachePolicy::exact_up_to() const {
  switch (kind) {
    case Kind::kWindow:
      return recent;
    case Kind::kSinksRecent:
      return static_cast<long long>(sinks) + recent;
    case Kind::kExplicit:
      return 0;
    default:
      return -1;
  }
}

std::string CachePolicy::summary() const {
  switch (kind) {
    case Kind::kWindow:
      return fmt::format("window {}", recent);
    case Kind::kSinksRecent:
      return fmt::format("sinks {} + recent {}", sinks, recent);
    case Kind::kExplicit:
      return "explicit";
    default:
      return "full";
  }
}

void CachePolicy::validate() const {
  if (kind == Kind::kWindow && (recent < 1 || sinks != 0))
    throw std::invalid_argument("cache policy window: recent must be >= 1 and sinks 0");
  if (kind == Kind::kSinksRecent && (recent < 1 || sinks < 1))
    throw std::invalid_argument("cache policy sinks_recent: sinks and recent must be >= 1");
  if ((kind == Kind::kFull || kind == Kind::kExplicit) && (sinks != 0 || recent != 0))
    throw std::invalid_argument(fmt::format("cache policy {}: sinks and recent must be 0", to_string(kind)));
}

const char* to_string(CachePolicy::Kind kind) {
  switch (kind) {
    case CachePolicy::Kind::kWindow:
      return "window";
    case CachePolicy::Kind::kSinksRecent:
      return "sinks_recent";
    case CachePolicy::Kind::kExplicit:
      return "explicit";
    default:
      return "full";
  }
}

}  // namespace attest
