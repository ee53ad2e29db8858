// The tiled kernel's extra memory must not grow with Tq x Tk: count heap bytes per call.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <new>

#include "attest/kernels/builtin_kernels.h"

namespace {
std::atomic<bool> counting{false};
std::atomic<std::size_t> allocated{0};
}  // namespace

// GCC at -O1 inlines this pair into gtest's `new TestClass` and warns that free() meets `new`:
// both are the replacements here, malloc and free underneath.
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
void* operator new(std::size_t n) {
  if (counting) allocated += n;
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }

namespace attest {
namespace {

std::size_t heap_bytes_of_forward(const Kernel& kernel, int t) {
  Problem p;
  p.shape = {.batch = 1, .heads = 2, .kv_heads = 1, .q_len = t, .k_len = t, .head_dim = 16, .value_dim = 16};
  p.mask.causal = true;
  p.rope.enabled = true;
  p.resize_buffers();
  std::vector<float> o(p.o_size()), lse(p.lse_size());
  allocated = 0;
  counting = true;
  kernel.forward(p, o, lse);
  counting = false;
  return allocated;
}

TEST(Workspace, TiledDoesNotGrowWithSequenceLength) {
  const auto tiled = make_tiled_kernel({32, 32});
  const std::size_t small = heap_bytes_of_forward(*tiled, 64);
  const std::size_t large = heap_bytes_of_forward(*tiled, 1024);  // Tq x Tk 256x larger
  EXPECT_GT(small, 0u);
  EXPECT_EQ(small, large);
}

TEST(Workspace, TiledBf16DoesNotGrowWithSequenceLength) {
  for (Bf16Path path : {Bf16Path::kAuto, Bf16Path::kPortable}) {
    const auto tiled = make_tiled_bf16_kernel({32, 32}, path);
    const std::size_t small = heap_bytes_of_forward(*tiled, 64);
    EXPECT_GT(small, 0u);
    EXPECT_EQ(small, heap_bytes_of_forward(*tiled, 1024));
  }
}

TEST(Workspace, BlockedGrowsWithKeysOnly) {
  // The counter itself can fail: the blocked kernel materializes a Br x Tk score block.
  const auto blocked = make_blocked_kernel(32);
  EXPECT_GT(heap_bytes_of_forward(*blocked, 1024), 8 * heap_bytes_of_forward(*blocked, 64));
}

}  // namespace
}  // namespace attest
