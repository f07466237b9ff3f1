// File: uffd/evict_oom_test.cc
//
// A Region's eviction survives running out of memory at any point: with
// each allocation of a Pageout failing in turn (the first, the second, ...,
// until one completes with none failing), every page reads back what was
// written, every page can be written again, none is left counted stored
// while still mapped, and a later Pageout works. Without a backing store
// and with one whose 64 KiB pool makes the shrinker write back (so that the
// shrinker's list and its writeback allocate too).
//
// How: testing/failing_new.h fails the chosen allocation of the test's
// thread (std::bad_alloc, or null for the nothrow forms). Pageout evicts
// on the calling thread; the region's handler thread is never failed. Skipped
// where userfaultfd is not available to this process.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>

#include "region_test_peer.h"
#include "testing/failing_new.h"
#include "testing/test_util.h"
#include "testing/watchdog.h"
#include "ztier/backing_store.h"
#include "ztier/page.h"
#include "ztier/region.h"

namespace ztier {
namespace {

constexpr std::size_t kPages = 512;  // two eviction chunks

// Page i at `version`: compressible text stamped with (i, version).
void MakePage(std::byte* out, std::uint64_t i, std::uint64_t version) {
  static const char kText[] = "the quick brown fox jumps over the lazy dog ";
  for (std::size_t at = 0; at < kPageSize; ++at) {
    out[at] = static_cast<std::byte>(kText[(at + i) % (sizeof(kText) - 1)]);
  }
  std::memcpy(out, &i, 8);
  std::memcpy(out + 8, &version, 8);
}

void Fill(Region& r, std::uint64_t version) {
  for (std::size_t i = 0; i < kPages; ++i) {
    MakePage(r.data() + i * kPageSize, i, version);
  }
}

// The first page that does not hold `version`, or kPages.
std::size_t FirstBad(const Region& r, std::uint64_t version) {
  std::byte want[kPageSize];
  for (std::size_t i = 0; i < kPages; ++i) {
    MakePage(want, i, version);
    if (std::memcmp(r.data() + i * kPageSize, want, kPageSize) != 0) return i;
  }
  return kPages;
}

TEST(EvictOomTest, NoFailedAllocationOfAPageoutLosesOrBlocksAPage) {
  {
    RegionOptions probe;
    probe.size = kPageSize;
    auto r = Region::Create(probe);
    if (!r.has_value()) GTEST_SKIP() << r.error().ToString();
  }
  for (const bool with_backing : {false, true}) {
    testing::ScopedTempDir dir;
    long failed = 0;
    long n = 1;
    for (;; ++n) {
      SCOPED_TRACE((with_backing ? "with a backing store, " : "without, ") +
                   std::string("allocation ") + std::to_string(n) +
                   " of the Pageout failing");
      RegionOptions o;
      o.size = kPages * kPageSize;
      o.batch_stores = true;
      std::shared_ptr<BackingStore> backing;
      if (with_backing) {
        BackingOptions bo;
        bo.path = dir.File("backing" + std::to_string(n));
        bo.size_bytes = kPages * kPageSize;
        auto b = BackingStore::Open(bo);
        ASSERT_TRUE(b.has_value()) << b.error().ToString();
        backing = std::move(*b);
        o.backing = backing;
        o.max_pool_bytes = 64 << 10;
      }
      auto made = Region::Create(o);
      ASSERT_TRUE(made.has_value()) << made.error().ToString();
      Region& r = **made;
      Fill(r, 0);

      testing::FailNthAllocation(n);
      Status st;
      try {
        st = r.Pageout(r.data(), r.size());
      } catch (const std::bad_alloc&) {
        // Only before the eviction began (its victim list): nothing changed.
      }
      const bool fired = testing::AllocationFailed();
      testing::FailNthAllocation(0);
      failed += fired;
      EXPECT_OK(st);

      {
        const testing::Watchdog w(
            "evict_oom_test: reading and writing every page after a failed "
            "Pageout",
            std::chrono::seconds(60));
        ASSERT_EQ(FirstBad(r, 0), kPages);
        {
          std::lock_guard lock(RegionTestPeer::HandlerMutex(r));
          const RegionStats s = r.Stats();
          // Every page was touched: none may be counted stored (a page
          // counted stored but still mapped would be write-protected, and
          // its writers would fault for ever).
          EXPECT_EQ(s.stored_pages, 0u);
          EXPECT_EQ(s.written_back_now, 0u);
          EXPECT_EQ(s.resident_pages, kPages);
        }
        Fill(r, 1);
        ASSERT_EQ(FirstBad(r, 1), kPages);
      }
      ASSERT_OK(r.Pageout(r.data(), r.size()));
      EXPECT_GT(r.Stats().zswpout, 0u);
      {
        const testing::Watchdog w(
            "evict_oom_test: reading every page after a second Pageout",
            std::chrono::seconds(60));
        ASSERT_EQ(FirstBad(r, 1), kPages);
      }
      if (!fired || ::testing::Test::HasFailure()) break;
      ASSERT_LT(n, 100000) << "a Pageout that never ends allocating";
    }
    // The Pageout allocates: the loop above made some of them fail.
    EXPECT_GT(failed, 3) << (with_backing ? "with" : "without")
                         << " a backing store";
    std::printf("%s a backing store: each of %ld allocations failed in turn\n",
                with_backing ? "with" : "without", failed);
  }
}

}  // namespace
}  // namespace ztier
