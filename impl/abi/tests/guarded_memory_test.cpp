// Guarded buffers (guarded_memory.hpp): empty ones are not mapped; a released mapping is reused
// writable, with fresh canaries, and with its guards and a bounded slack.
#include "attest/abi/guarded_memory.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <vector>

namespace attest::guarded {
namespace {

std::size_t page() { return static_cast<std::size_t>(::sysconf(_SC_PAGESIZE)); }

void touch(void* p) { *static_cast<volatile char*>(p) = 1; }

TEST(GuardedMemory, EmptyBufferIsNull) {
  Buffer b("E", 0, Placement::kEnd);
  EXPECT_EQ(b.data(), nullptr);
  b.seal();
  EXPECT_EQ(b.damage(), "");
}

TEST(GuardedMemory, ReusedSealedRegionIsWritableWithFreshCanaries) {
  const std::size_t bytes = 100 * sizeof(float);
  {
    Buffer input("Q", bytes, Placement::kEnd);
    std::memset(input.data(), 0, bytes);
    input.seal();  // read-only when released
  }
  for (Placement placement : {Placement::kStart, Placement::kEnd}) {
    Buffer output("O", bytes, placement);
    std::memset(output.data(), 0x11, bytes);  // faults if the region were still sealed
    EXPECT_EQ(output.damage(), "");
    char* outside = placement == Placement::kEnd ? static_cast<char*>(output.data()) - 4
                                                 : static_cast<char*>(output.data()) + bytes;
    std::memset(outside, 0, 4);  // into the slack: reported, and not seen by the next buffer
    EXPECT_NE(output.damage().find("write outside O at byte offset"), std::string::npos) << output.damage();
  }
  Buffer next("O", bytes, Placement::kEnd);
  EXPECT_EQ(next.damage(), "");
}

TEST(GuardedMemory, GuardsFaultAfterReuse) {
  const std::size_t bytes = 3 * page() + 20;
  for (int i = 0; i < 4; ++i) Buffer("K", bytes, i % 2 ? Placement::kStart : Placement::kEnd).seal();
  Buffer at_end("K", bytes, Placement::kEnd);
  EXPECT_DEATH(touch(static_cast<char*>(at_end.data()) + bytes), "");
  Buffer at_start("V", bytes, Placement::kStart);
  EXPECT_DEATH(touch(static_cast<char*>(at_start.data()) - 1), "");
}

TEST(GuardedMemory, ReuseKeepsTheSlackAtMostTheBuffersSize) {
  // Sizes no other test uses: the large region is the only one the small buffer could take.
  { Buffer big("K", 16 * page(), Placement::kEnd); }
  Buffer small("Q", 5 * page(), Placement::kStart);
  EXPECT_DEATH(touch(static_cast<char*>(small.data()) + 10 * page()), "");
}

}  // namespace
}  // namespace attest::guarded
