// File: pool/failure_test.cc
//
// The pool when things fail around it: a heap that has nothing left for
// the message of an error (testing/failing_new.h), an address space that
// has no room for an arena, a Read callback that throws. Every call either
// fails as its contract says or lets the exception through, and leaves the
// pool usable: no class lock held, no zspage left pinned.
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <cstring>
#include <new>
#include <stdexcept>
#include <vector>

#include "testing/failing_new.h"
#include "testing/test_util.h"
#include "ztier/pool.h"

namespace ztier {
namespace {

// Every allocation of a Malloc whose arena cannot be mapped (more address
// space than x86-64 or arm64 user space has) fails in turn; the mmap
// error's message is one of them. Malloc returns kInvalidHandle every time,
// never throws, and leaves its class unlocked: the next Malloc returns too.
TEST(PoolFailureTest, MallocWhoseArenaCannotBeMappedReturnsInvalid) {
  PoolOptions options;
  options.arena_bytes = std::size_t{1} << 47;
  auto created = Pool::Create(options);
  ASSERT_TRUE(created.has_value());
  Pool& pool = **created;
  // With the heap: fails, having made the class's handle cache and the
  // arena's bookkeeping (so that the tries below reach the mmap).
  ASSERT_EQ(pool.Malloc(100), kInvalidHandle);
  long failed = 0;
  for (long n = 1;; ++n) {
    SCOPED_TRACE("allocation " + std::to_string(n) + " of Malloc failing");
    testing::FailNthAllocation(n);
    Handle h = kInvalidHandle;
    bool threw = false;
    try {
      h = pool.Malloc(100);
    } catch (const std::bad_alloc&) {
      threw = true;
    }
    const bool fired = testing::AllocationFailed();
    testing::FailNthAllocation(0);
    // A throw left the class locked: another Malloc of it would hang.
    ASSERT_FALSE(threw) << "Malloc threw std::bad_alloc";
    EXPECT_EQ(h, kInvalidHandle);
    failed += fired;
    if (!fired) break;
    ASSERT_LT(n, 100) << "a Malloc that never ends allocating";
  }
  EXPECT_GT(failed, 0);
  EXPECT_EQ(pool.Malloc(100), kInvalidHandle);
  EXPECT_EQ(pool.Stats().objects, 0u);
}

// Each allocation of a first Malloc (the arena's bookkeeping, a zspage
// descriptor, the handle table) fails in turn: the Malloc either succeeds
// or returns kInvalidHandle leaving no object and no page held, and the
// pool goes on working.
TEST(PoolFailureTest, MallocOutOfHeapLeavesNothingTaken) {
  long failed = 0;
  for (long n = 1;; ++n) {
    SCOPED_TRACE("allocation " + std::to_string(n) + " of Malloc failing");
    PoolOptions options;
    options.max_pages_per_zspage = 16;  // 2048 objects: a heap bitmap
    auto created = Pool::Create(options);
    ASSERT_TRUE(created.has_value());
    Pool& pool = **created;
    testing::FailNthAllocation(n);
    Handle h = kInvalidHandle;
    EXPECT_NO_THROW(h = pool.Malloc(32));
    const bool fired = testing::AllocationFailed();
    testing::FailNthAllocation(0);
    failed += fired;
    if (h == kInvalidHandle) {
      EXPECT_TRUE(fired);
      EXPECT_EQ(pool.Stats().objects, 0u);
      EXPECT_EQ(pool.Stats().pages_used, 0u);
    }
    const Handle again = pool.Malloc(32);
    ASSERT_NE(again, kInvalidHandle);
    pool.Write(again, std::vector<std::byte>(32, std::byte{7}));
    std::vector<std::byte> got(32);
    EXPECT_EQ(pool.ReadInto(again, got), 32u);
    EXPECT_EQ(got, std::vector<std::byte>(32, std::byte{7}));
    pool.Free(again);
    if (h != kInvalidHandle) pool.Free(h);
    pool.Compact();
    EXPECT_EQ(pool.Stats().objects, 0u);
    EXPECT_EQ(pool.Stats().pages_used, 0u);
    if (!fired) break;
    ASSERT_LT(n, 100) << "a Malloc that never ends allocating";
  }
  EXPECT_GT(failed, 2);
}

// Objects in sparse zspages of one class, each read by a callback that
// throws, then compacted (moved out of those zspages) and read back. Ends
// the process: 0 when all went as it should.
[[noreturn]] void ReadThrowingThenCompact() {
  alarm(10);  // a zspage left pinned keeps Compact waiting: SIGALRM
  auto created = Pool::Create({});
  if (!created.has_value()) std::_Exit(2);
  Pool& pool = **created;
  std::vector<Handle> all;
  for (int i = 0; i < 2000; ++i) {
    all.push_back(pool.Malloc(200));
    if (all.back() == kInvalidHandle) std::_Exit(3);
    pool.Write(all.back(), std::vector<std::byte>(200, std::byte(i)));
  }
  std::vector<Handle> kept;  // a third of each zspage
  for (std::size_t i = 0; i < all.size(); ++i) {
    if (i % 3 == 0) {
      kept.push_back(all[i]);
    } else {
      pool.Free(all[i]);
    }
  }
  for (Handle h : kept) {
    try {
      pool.Read(h, [](std::span<const std::byte>) {
        throw std::runtime_error("decoder failed");
      });
      std::_Exit(4);  // the exception did not come through
    } catch (const std::runtime_error&) {
    }
  }
  if (pool.Compact() == 0) std::_Exit(5);
  std::vector<std::byte> got(200);
  for (std::size_t k = 0; k < kept.size(); ++k) {
    if (pool.ReadInto(kept[k], got) != 200 ||
        got != std::vector<std::byte>(200, std::byte(3 * k))) {
      std::_Exit(6);
    }
  }
  std::_Exit(0);
}

// A Read whose callback throws lets the exception through and unpins the
// object's zspage: a compaction that then moves the object out of it
// finishes (a zspage left pinned would keep it waiting forever, holding the
// class lock). Run in a child that an alarm ends if it hangs.
TEST(PoolFailureTest, ReadWhoseCallbackThrowsUnpins) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(ReadThrowingThenCompact(), ::testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace ztier
