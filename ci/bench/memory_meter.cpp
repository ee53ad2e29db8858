#include "memory_meter.h"

#include <atomic>
#include <cstdlib>
#include <new>

namespace {

std::atomic<std::size_t> live{0}, peak{0}, base{0};
constexpr std::size_t kHeader = 16;  // keeps the size in front of the block, alignment intact

void* allocate(std::size_t n) {
  auto* p = static_cast<unsigned char*>(std::malloc(n + kHeader));
  if (!p) throw std::bad_alloc();
  *reinterpret_cast<std::size_t*>(p) = n;
  const std::size_t now = live += n;
  std::size_t old = peak.load();
  while (now > old && !peak.compare_exchange_weak(old, now)) {
  }
  return p + kHeader;
}

void release(void* q) noexcept {
  if (!q) return;
  auto* p = static_cast<unsigned char*>(q) - kHeader;
  live -= *reinterpret_cast<std::size_t*>(p);
  std::free(p);
}

}  // namespace

// Every form that pairs with the plain delete is replaced, the nothrow ones too: a sanitizer's
// runtime (or another library) would otherwise allocate std::stable_sort's buffer without the
// header that release() reads.
void* operator new(std::size_t n) { return allocate(n); }
void* operator new[](std::size_t n) { return allocate(n); }
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
  try {
    return allocate(n);
  } catch (const std::bad_alloc&) {
    return nullptr;
  }
}
void* operator new[](std::size_t n, const std::nothrow_t& tag) noexcept { return operator new(n, tag); }
void operator delete(void* p) noexcept { release(p); }
void operator delete[](void* p) noexcept { release(p); }
void operator delete(void* p, std::size_t) noexcept { release(p); }
void operator delete[](void* p, std::size_t) noexcept { release(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { release(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { release(p); }

namespace attest::memory_meter {

void start() {
  base = live.load();
  peak = base.load();
}

std::size_t peak_extra() { return peak - base; }

}  // namespace attest::memory_meter
