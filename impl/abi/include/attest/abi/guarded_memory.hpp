// Buffers between inaccessible guard pages (header-only, Linux). The kernel host hands a kernel
// its inputs and outputs in these, so a read or write outside a buffer faults instead of
// passing unseen (docs/design.md#containment). Each buffer sits either flush against its trailing guard
// (kEnd: one float past the end faults) or at its leading guard (kStart: one float before the
// start faults); callers alternate the two. The slack on the other side (the rest of the last
// page; more when a released mapping is reused, at most the buffer's size) is filled with a NaN
// canary: a read there poisons the result, a write there is reported by damage(). An empty
// buffer is not mapped (its data() is NULL).
// A fault inside a guard is named by fault_report() from a SIGSEGV handler.
#pragma once

#include <signal.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <new>
#include <string>

namespace attest::guarded {

enum class Placement { kEnd, kStart };

inline constexpr std::size_t kGuardBytes = std::size_t{1} << 20;  // per side: far strays fault too
inline constexpr std::uint32_t kSlackCanary = 0x7fa5a5a5u;        // a NaN payload no kernel computes

// Where every live buffer sits, for the fault handler (which may not allocate or lock).
struct Registration {
  const char* name;
  std::uintptr_t begin, end;                // the buffer's bytes
  std::uintptr_t region_begin, region_end;  // the whole mapping, guards included
};
inline constexpr int kMaxRegistrations = 64;
inline Registration registry[kMaxRegistrations];

// Mappings of released buffers, kept for the next buffers of a similar size: once a call of a
// given shape has run, its buffers cost no mmap, munmap or page fault again, only the mprotect
// that seals an input. The guards stay PROT_NONE throughout and a reused region is refilled with
// canaries. Not thread-safe, like the registry (the kernel server is single-threaded).
struct CachedRegion {
  char* region;
  std::size_t size;  // the whole mapping, guards included
  bool sealed;       // its usable part is read-only
};
inline constexpr int kMaxCachedRegions = 32;
inline constexpr std::size_t kMaxCachedBytes = std::size_t{16} << 20;  // usable bytes kept, in all
inline CachedRegion region_cache[kMaxCachedRegions];
inline std::size_t cached_bytes = 0;

// Unmaps every cached region (when a new mapping fails under the memory limit).
inline bool release_cached_regions() {
  bool any = false;
  for (CachedRegion& c : region_cache)
    if (c.region) {
      ::munmap(c.region, c.size);
      c = {};
      any = true;
    }
  cached_bytes = 0;
  return any;
}

class Buffer {
 public:
  Buffer(const char* name, std::size_t bytes, Placement placement) : name_(name), bytes_(bytes) {
    if (bytes == 0) return;  // an empty array is passed as NULL: nothing to map or to guard
    const std::size_t page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
    const std::size_t data_pages = (bytes + page - 1) / page * page;
    map(data_pages);
    char* usable = region_ + kGuardBytes;
    const std::size_t usable_bytes = size_ - 2 * kGuardBytes;
    for (std::size_t i = 0; i + 4 <= usable_bytes; i += 4) std::memcpy(usable + i, &kSlackCanary, 4);
    data_ = placement == Placement::kStart ? usable : usable + usable_bytes - bytes;
    slot_ = -1;
    for (int i = 0; i < kMaxRegistrations && slot_ < 0; ++i)
      if (!registry[i].name) slot_ = i;
    if (slot_ >= 0) {
      const auto base = reinterpret_cast<std::uintptr_t>(data_);
      registry[slot_] = {name_, base, base + bytes, reinterpret_cast<std::uintptr_t>(region_),
                         reinterpret_cast<std::uintptr_t>(region_) + size_};
    }
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer() {
    if (slot_ >= 0) registry[slot_] = {};
    if (!region_) return;
    const std::size_t usable_bytes = size_ - 2 * kGuardBytes;
    if (cached_bytes + usable_bytes <= kMaxCachedBytes)
      for (CachedRegion& c : region_cache)
        if (!c.region) {
          c = {region_, size_, sealed_};
          cached_bytes += usable_bytes;
          return;
        }
    ::munmap(region_, size_);
  }

  void* data() { return bytes_ ? data_ : nullptr; }
  std::size_t bytes() const { return bytes_; }
  // Inputs: no write at all after they are filled.
  void seal() {
    if (region_) sealed_ = ::mprotect(region_ + kGuardBytes, size_ - 2 * kGuardBytes, PROT_READ) == 0;
  }

  // Empty when the slack canaries are intact; else the first write outside the buffer.
  std::string damage() const {
    if (!region_) return {};
    const char* usable = region_ + kGuardBytes;
    const char* usable_end = region_ + size_ - kGuardBytes;
    auto intact = [&](const char* p) {
      const std::size_t i = static_cast<std::size_t>(p - usable);
      return static_cast<unsigned char>(*p) == static_cast<unsigned char>(kSlackCanary >> (8 * (i % 4)));
    };
    for (const char* p = data_ - 1; p >= usable; --p)
      if (!intact(p)) return outside("write", p - data_);
    for (const char* p = data_ + bytes_; p < usable_end; ++p)
      if (!intact(p)) return outside("write", p - data_);
    return {};
  }
  std::string outside(const char* access, std::ptrdiff_t offset) const {
    return std::string(access) + " outside " + name_ + " at byte offset " + std::to_string(offset) + " (" + name_ +
           " has " + std::to_string(bytes_) + " bytes)";
  }

 private:
  // A region whose usable part holds `data_pages` (at most twice as many pages): the smallest
  // cached one, writable again, or a new mapping.
  void map(std::size_t data_pages) {
    CachedRegion* best = nullptr;
    for (CachedRegion& c : region_cache) {
      const std::size_t usable = c.region ? c.size - 2 * kGuardBytes : 0;
      if (c.region && usable >= data_pages && usable <= 2 * data_pages && (!best || c.size < best->size)) best = &c;
    }
    if (best) {
      const CachedRegion c = *best;
      *best = {};
      cached_bytes -= c.size - 2 * kGuardBytes;
      if (!c.sealed || ::mprotect(c.region + kGuardBytes, c.size - 2 * kGuardBytes, PROT_READ | PROT_WRITE) == 0) {
        region_ = c.region, size_ = c.size;
        return;
      }
      ::munmap(c.region, c.size);
    }
    size_ = kGuardBytes + data_pages + kGuardBytes;
    void* m = MAP_FAILED;
    do {
      m = ::mmap(nullptr, size_, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
      if (m != MAP_FAILED && ::mprotect(static_cast<char*>(m) + kGuardBytes, data_pages, PROT_READ | PROT_WRITE) != 0) {
        ::munmap(m, size_);
        m = MAP_FAILED;
      }
    } while (m == MAP_FAILED && release_cached_regions());
    if (m == MAP_FAILED) throw std::bad_alloc();
    region_ = static_cast<char*>(m);
  }

  const char* name_;
  std::size_t bytes_;
  std::size_t size_ = 0;
  char* region_ = nullptr;
  char* data_ = nullptr;
  int slot_ = -1;
  bool sealed_ = false;
};

namespace detail {

// Appends text or a decimal number to a fixed buffer (async-signal-safe: no allocation).
struct Text {
  char buf[256];
  std::size_t n = 0;
  Text& operator<<(const char* s) {
    while (*s && n + 1 < sizeof buf) buf[n++] = *s++;
    buf[n] = '\0';
    return *this;
  }
  Text& operator<<(std::uintptr_t x) {
    char digits[24];
    int d = 0;
    do digits[d++] = static_cast<char>('0' + x % 10);
    while ((x /= 10) && d < 24);
    while (d && n + 1 < sizeof buf) buf[n++] = digits[--d];
    buf[n] = '\0';
    return *this;
  }
};

inline bool fault_was_write(const void* context) {
#if defined(__x86_64__) && defined(REG_ERR)
  return context && (static_cast<const ucontext_t*>(context)->uc_mcontext.gregs[REG_ERR] & 2);
#else
  (void)context;
  return false;
#endif
}

}  // namespace detail

// Describes a fault address that lies in one of the live buffers' guards, into `out`
// (async-signal-safe). Returns false when the address is not in any guard.
inline bool describe_fault(std::uintptr_t address, const void* context, char (&out)[256]) {
  for (const Registration& r : registry) {
    if (!r.name || address < r.region_begin || address >= r.region_end) continue;
    if (address >= r.begin && address < r.end) continue;  // inside the buffer: a sealed input written
    detail::Text t;
    t << (detail::fault_was_write(context) ? "write" : "read") << " outside " << r.name << " at byte offset ";
    if (address < r.begin)
      t << "-" << (r.begin - address);
    else
      t << (address - r.begin);
    t << " (" << r.name << " has " << (r.end - r.begin) << " bytes)";
    std::memcpy(out, t.buf, sizeof out);
    return true;
  }
  for (const Registration& r : registry) {
    if (!r.name || address < r.begin || address >= r.end) continue;
    detail::Text t;
    t << "write into the input " << r.name << " (inputs are read-only)";
    std::memcpy(out, t.buf, sizeof out);
    return true;
  }
  return false;
}

}  // namespace attest::guarded
