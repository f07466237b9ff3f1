// mapping_test.cc: Mapping maps zeroed memory with the asked commit, moves
// ownership, and unmaps exactly once; Advise changes the pages as madvise(2)
// says, seen through mincore(2) and /proc/self/smaps.
#include "platform/mapping.h"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace ztier::platform {
namespace {

const std::size_t kPage = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));

// Whether [p, p + bytes) is mapped: msync fails with ENOMEM where not.
bool IsMapped(const std::byte* p, std::size_t bytes) {
  return ::msync(const_cast<std::byte*>(p), bytes, MS_ASYNC) == 0;
}

// How many of the pages of `m` are resident (mincore).
std::size_t ResidentPages(const Mapping& m) {
  std::vector<unsigned char> vec(m.size() / kPage);
  EXPECT_EQ(::mincore(m.data(), m.size(), vec.data()), 0) << errno;
  std::size_t n = 0;
  for (unsigned char v : vec) n += v & 1;
  return n;
}

// The VmFlags line of the /proc/self/smaps entry that holds `p`. Not the
// one that starts at p: the kernel merges a mapping with a neighbour of the
// same flags (vma_merge), so its entry may start lower; a merged entry has
// the flags of both.
std::string VmFlags(const void* p) {
  const auto at = reinterpret_cast<std::uintptr_t>(p);
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  bool in = false;
  while (std::getline(smaps, line)) {
    std::uintptr_t lo = 0, hi = 0;
    char dash = 0;
    std::istringstream range(line);
    if (range >> std::hex >> lo >> dash >> hi && dash == '-' &&
        line.find(' ') != std::string::npos) {
      in = lo <= at && at < hi;
      continue;
    }
    if (in && line.rfind("VmFlags:", 0) == 0) return line + " ";
  }
  return "";
}

TEST(MappingTest, MapsZeroedWritableMemoryAndUnmapsIt) {
  const std::size_t bytes = 16 * kPage;
  auto m = Mapping::Anonymous(bytes, Commit::kOnTouch, "mmap test");
  ASSERT_TRUE(m.has_value()) << m.error().ToString();
  ASSERT_FALSE(m->empty());
  EXPECT_EQ(m->size(), bytes);
  for (std::size_t i = 0; i < bytes; i += 512) {
    ASSERT_EQ(m->data()[i], std::byte{0});
  }
  std::memset(m->data(), 0x5a, bytes);  // every page writable
  EXPECT_EQ(m->as<std::uint32_t>()[bytes / 4 - 1], 0x5a5a5a5au);
  const std::byte* p = m->data();
  EXPECT_TRUE(IsMapped(p, bytes));
  { Mapping gone = std::move(*m); }
  EXPECT_FALSE(IsMapped(p, bytes));
}

TEST(MappingTest, MoveTransfersOwnershipOnce) {
  auto a = Mapping::Anonymous(kPage, Commit::kCharged, "mmap a");
  auto b = Mapping::Anonymous(2 * kPage, Commit::kCharged, "mmap b");
  ASSERT_TRUE(a.has_value() && b.has_value());
  std::byte* pa = a->data();
  std::byte* pb = b->data();
  pa[0] = std::byte{1};
  Mapping moved(std::move(*a));
  EXPECT_TRUE(a->empty());
  EXPECT_EQ(a->size(), 0u);
  EXPECT_EQ(moved.data(), pa);
  EXPECT_EQ(moved.data()[0], std::byte{1});
  // Assigning over a mapping unmaps what it held.
  moved = std::move(*b);
  EXPECT_FALSE(IsMapped(pa, kPage));
  EXPECT_EQ(moved.data(), pb);
  EXPECT_EQ(moved.size(), 2 * kPage);
  moved = std::move(moved);  // self-move keeps it
  EXPECT_TRUE(IsMapped(pb, 2 * kPage));
  moved = Mapping();
  EXPECT_FALSE(IsMapped(pb, 2 * kPage));
}

TEST(MappingTest, CommitChoosesMapNoReserve) {
  auto lazy = Mapping::Anonymous(4 * kPage, Commit::kOnTouch, "mmap lazy");
  auto charged = Mapping::Anonymous(4 * kPage, Commit::kCharged, "mmap c");
  ASSERT_TRUE(lazy.has_value() && charged.has_value());
  const std::string lazy_flags = VmFlags(lazy->data());
  const std::string charged_flags = VmFlags(charged->data());
  ASSERT_NE(lazy_flags, "");
  ASSERT_NE(charged_flags, "");
  EXPECT_NE(lazy_flags.find(" nr "), std::string::npos) << lazy_flags;
  EXPECT_EQ(charged_flags.find(" nr "), std::string::npos) << charged_flags;
}

TEST(MappingTest, PopulateMakesEveryPageResident) {
  auto m = Mapping::Anonymous(64 * kPage, Commit::kOnTouch, "mmap pop");
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(ResidentPages(*m), 0u);
  ASSERT_TRUE(m->Populate("populate test").ok());
  EXPECT_EQ(ResidentPages(*m), 64u);
}

TEST(MappingTest, ATableIsPopulatedOnlyWhenAsked) {
  auto lazy = Mapping::Table(16 * kPage, false, "lazy table");
  auto populated = Mapping::Table(16 * kPage, true, "populated table");
  ASSERT_TRUE(lazy.has_value() && populated.has_value());
  EXPECT_EQ(ResidentPages(*lazy), 0u);
  EXPECT_EQ(ResidentPages(*populated), 16u);
  EXPECT_NE(VmFlags(lazy->data()).find(" nr "), std::string::npos);
  EXPECT_EQ(VmFlags(populated->data()).find(" nr "), std::string::npos);
}

TEST(MappingTest, DiscardDropsPagesBackToZeros) {
  auto m = Mapping::Anonymous(8 * kPage, Commit::kOnTouch, "mmap discard");
  ASSERT_TRUE(m.has_value());
  std::memset(m->data(), 0xff, m->size());
  EXPECT_EQ(ResidentPages(*m), 8u);
  ASSERT_TRUE(Advise(m->data() + 2 * kPage, 4 * kPage, Advice::kDiscard).ok());
  EXPECT_EQ(ResidentPages(*m), 4u);
  EXPECT_EQ(m->data()[2 * kPage], std::byte{0});
  EXPECT_EQ(m->data()[6 * kPage - 1], std::byte{0});
  EXPECT_EQ(m->data()[6 * kPage], std::byte{0xff});
}

TEST(MappingTest, AdviceShowsInVmFlags) {
  auto m = Mapping::Anonymous(4 * kPage, Commit::kOnTouch, "mmap advice");
  ASSERT_TRUE(m.has_value());
  ASSERT_TRUE(Advise(m->data(), m->size(), Advice::kDontFork).ok());
  EXPECT_NE(VmFlags(m->data()).find(" dc "), std::string::npos);
  ASSERT_TRUE(Advise(m->data(), m->size(), Advice::kNoHugePages).ok());
  EXPECT_NE(VmFlags(m->data()).find(" nh "), std::string::npos);
}

TEST(MappingTest, ErrorsNameWhatAndCarryTheErrno) {
  // More address space than a 64-bit process has: ENOMEM.
  auto huge = Mapping::Anonymous(std::size_t{1} << 62, Commit::kOnTouch,
                                 "mmap enormous table");
  ASSERT_FALSE(huge.has_value());
  EXPECT_EQ(huge.error().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(huge.error().message().rfind("mmap enormous table: ", 0), 0u)
      << huge.error().message();
  // Advice on an unaligned address: EINVAL, named by the advice.
  auto m = Mapping::Anonymous(kPage, Commit::kOnTouch, "mmap");
  ASSERT_TRUE(m.has_value());
  const Status s = Advise(m->data() + 1, 1, Advice::kDontFork);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message().rfind("madvise(MADV_DONTFORK): ", 0), 0u)
      << s.message();
}

TEST(MappingTest, LeakKeepsTheMemoryMapped) {
  auto m = Mapping::Anonymous(kPage, Commit::kOnTouch, "mmap leak");
  ASSERT_TRUE(m.has_value());
  std::byte* p = nullptr;
  {
    Mapping held = std::move(*m);
    p = held.Leak();
    EXPECT_TRUE(held.empty());
  }
  EXPECT_TRUE(IsMapped(p, kPage));
  ASSERT_EQ(::munmap(p, kPage), 0);  // the test cleans up what it leaked
}

}  // namespace
}  // namespace ztier::platform
