// Tests of OwnMemory (platform/own_memory.h): it copies present pages, and
// stops, never waiting, at a page that has none: one unmapped, and one
// dropped inside a userfaultfd range that no thread serves (a plain read
// of it would hang this test).
#include "platform/own_memory.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "platform/userfaultfd.h"
#include "testing/test_util.h"
#include "ztier/page.h"

namespace ztier::platform {
namespace {

constexpr std::size_t kPages = 8;

// kPages pages of anonymous memory, page i filled with byte i + 1.
std::byte* Filled() {
  void* m = ::mmap(nullptr, kPages * kPageSize, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) return nullptr;
  auto* p = static_cast<std::byte*>(m);
  for (std::size_t i = 0; i < kPages; ++i) {
    std::memset(p + i * kPageSize, static_cast<int>(i + 1), kPageSize);
  }
  return p;
}

std::uintptr_t At(std::byte* p, std::size_t page) {
  return reinterpret_cast<std::uintptr_t>(p + page * kPageSize);
}

TEST(OwnMemoryTest, CopiesPresentPagesAndStopsAtAnUnmappedOne) {
  auto mem = OwnMemory::Open();
  ASSERT_TRUE(mem.has_value()) << mem.error().ToString();
  std::byte* p = Filled();
  ASSERT_NE(p, nullptr);
  std::vector<std::byte> out(kPages * kPageSize);
  EXPECT_EQ(mem->ReadPages(At(p, 0), kPages, out.data()), kPages);
  EXPECT_EQ(std::memcmp(out.data(), p, out.size()), 0);
  ASSERT_EQ(::munmap(p + 5 * kPageSize, kPageSize), 0);
  std::fill(out.begin(), out.end(), std::byte{0});
  EXPECT_EQ(mem->ReadPages(At(p, 2), kPages - 2, out.data()), 3u);
  EXPECT_EQ(std::memcmp(out.data(), p + 2 * kPageSize, 3 * kPageSize), 0);
  EXPECT_EQ(mem->ReadPages(At(p, 5), 1, out.data()), 0u);
  EXPECT_EQ(mem->ReadPages(At(p, 6), 2, out.data()), 2u);
  EXPECT_EQ(OwnMemory().ReadPages(At(p, 0), 1, out.data()), 0u);
  ::munmap(p, 5 * kPageSize);
  ::munmap(p + 6 * kPageSize, 2 * kPageSize);
}

TEST(OwnMemoryTest, APageDroppedInAUserfaultfdRangeStopsTheReadWithoutWaiting) {
  auto uffd = internal::OpenUserfaultfd();
  if (!uffd.has_value()) GTEST_SKIP() << uffd.error().ToString();
  auto mem = OwnMemory::Open();
  ASSERT_TRUE(mem.has_value()) << mem.error().ToString();
  std::byte* p = Filled();
  ASSERT_NE(p, nullptr);
  ASSERT_OK((*uffd)->Register(p, kPages * kPageSize));
  ASSERT_EQ(::madvise(p + 3 * kPageSize, kPageSize, MADV_DONTNEED), 0);
  std::vector<std::byte> out(kPages * kPageSize);
  EXPECT_EQ(mem->ReadPages(At(p, 0), kPages, out.data()), 3u);
  EXPECT_EQ(std::memcmp(out.data(), p, 3 * kPageSize), 0);
  EXPECT_EQ(mem->ReadPages(At(p, 3), 1, out.data()), 0u);
  EXPECT_EQ(mem->ReadPages(At(p, 4), kPages - 4, out.data()), kPages - 4);
  EXPECT_EQ(std::memcmp(out.data(), p + 4 * kPageSize, 4 * kPageSize), 0);
  ASSERT_OK((*uffd)->Unregister(p, kPages * kPageSize));
  ::munmap(p, kPages * kPageSize);
}

}  // namespace
}  // namespace ztier::platform
