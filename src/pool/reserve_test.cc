// File: pool/reserve_test.cc
//
// Tests for a Pool with a reserve (PoolOptions::prealloc_bytes): its pages
// are resident from Create() on (mincore), objects are placed in it and
// nowhere else, it is never exceeded, pages freed by Free() and Compact()
// stay resident (a pool without a reserve gives them back: same test, the
// other answer), freed runs of one length serve zspages of another
// (coalescing), and the statistics are those of a pool without a reserve.
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "testing/test_util.h"
#include "ztier/pool.h"

namespace ztier {
namespace {

constexpr std::size_t kPage = 4096;
// What the reserve adds for the untouched tails of each class's newest
// zspage, with 8-page chains (pool.h).
constexpr std::size_t kTailPages = 478;

std::unique_ptr<Pool> NewPool(PoolOptions options = {}) {
  auto pool = Pool::Create(options);
  EXPECT_TRUE(pool.has_value()) << pool.error().ToString();
  return pool.has_value() ? std::move(*pool) : nullptr;
}

std::unique_ptr<Pool> ReservePool(std::size_t bytes) {
  PoolOptions o;
  o.prealloc_bytes = bytes;
  return NewPool(o);
}

const std::byte* Address(const Pool& pool, Handle h) {
  const std::byte* p = nullptr;
  pool.Read(h, [&](std::span<const std::byte> obj) { p = obj.data(); });
  return p;
}

// Whether the page holding p is resident (mincore).
bool Resident(const void* p) {
  const auto page = reinterpret_cast<std::uintptr_t>(p) & ~(kPage - 1);
  unsigned char v = 0;
  EXPECT_EQ(mincore(reinterpret_cast<void*>(page), kPage, &v), 0);
  return (v & 1) != 0;
}

// Objects of `size` bytes until Malloc fails (or `max`), each written.
std::vector<Handle> Fill(Pool& pool, std::size_t size, std::size_t max) {
  std::vector<Handle> hs;
  std::vector<std::byte> data(size, std::byte{0x5a});
  while (hs.size() < max) {
    const Handle h = pool.Malloc(size);
    if (h == kInvalidHandle) break;
    pool.Write(h, data);
    hs.push_back(h);
  }
  return hs;
}

TEST(PoolReserveTest, CreateFaultsTheReserveIn) {
  constexpr std::size_t kBytes = 8 << 20;
  auto pool = ReservePool(kBytes);
  ASSERT_NE(pool, nullptr);
  // The first object sits at the start of the reserve; every page of the
  // reserve is resident before anything is written there.
  const Handle h = pool->Malloc(4096);
  ASSERT_NE(h, kInvalidHandle);
  const std::byte* base = Address(*pool, h);
  std::vector<unsigned char> v(kBytes / kPage);
  ASSERT_EQ(mincore(const_cast<std::byte*>(base), kBytes, v.data()), 0);
  EXPECT_EQ(std::count_if(v.begin(), v.end(),
                          [](unsigned char c) { return (c & 1) != 0; }),
            static_cast<long>(v.size()));
  // Without a reserve and with small pages, nothing past the object's
  // page is touched; with huge pages (the default), the memory up to the
  // next 2 MiB boundary (one huge page) and no more.
  PoolOptions small;
  small.huge_pages = false;
  auto lazy = NewPool(small);
  const Handle l = lazy->Malloc(4096);
  const std::byte* lbase = Address(*lazy, l);
  EXPECT_FALSE(Resident(lbase + 64 * kPage));
  auto huge = NewPool();
  const Handle g = huge->Malloc(4096);
  const std::byte* gbase = Address(*huge, g);
  const auto boundary = (reinterpret_cast<std::uintptr_t>(gbase) +
                         (2 << 20)) & ~std::uintptr_t{(2 << 20) - 1};
  EXPECT_TRUE(Resident(reinterpret_cast<const std::byte*>(boundary) - kPage));
  EXPECT_FALSE(Resident(reinterpret_cast<const std::byte*>(boundary) +
                        (2 << 20)));
  pool->Free(h);
  lazy->Free(l);
  huge->Free(g);
}

TEST(PoolReserveTest, ObjectsStayInTheReserveWhichIsNeverExceeded) {
  constexpr std::size_t kBytes = 4 << 20;
  auto pool = ReservePool(kBytes);
  ASSERT_NE(pool, nullptr);
  std::mt19937_64 rng(301);
  std::vector<Handle> hs;
  std::vector<std::byte> data(4096, std::byte{1});
  std::size_t first_failure = 0;  // pages used when Malloc first failed
  for (int failures = 0; failures < 200;) {
    const std::size_t size = 32 + rng() % 4065;
    const Handle h = pool->Malloc(size);
    if (h == kInvalidHandle) {
      if (failures++ == 0) first_failure = pool->Stats().pages_used;
      continue;
    }
    pool->Write(h, std::span<const std::byte>(data).first(size));
    hs.push_back(h);
    ASSERT_LT(hs.size(), 1000000u) << "the reserve never filled";
  }
  const std::byte* lo = Address(*pool, hs[0]);
  const std::byte* hi = lo;
  for (Handle h : hs) {
    const std::byte* p = Address(*pool, h);
    lo = std::min(lo, p);
    hi = std::max(hi, p + pool->ObjectSize(h));
  }
  // One range no larger than the reserve: no other memory was mapped.
  EXPECT_LE(static_cast<std::size_t>(hi - lo), kBytes + kTailPages * kPage);
  // Full means full: the pages asked for are held by objects, or nearly
  // (the reserve's tail room goes to partly used zspages).
  const PoolStats s = pool->Stats();
  std::printf(
      "reserve of %zu pages (+%zu): first refusal at %zu pages used, "
      "full at %zu\n",
      kBytes / kPage, kTailPages, first_failure, s.pages_used);
  EXPECT_LE(s.pages_used * kPage, kBytes + kTailPages * kPage);
  EXPECT_GE(first_failure * kPage, kBytes * 95 / 100);
  // Freeing makes room again.
  for (std::size_t i = 0; i < hs.size(); i += 2) pool->Free(hs[i]);
  pool->Compact();
  const Handle again = pool->Malloc(2000);
  EXPECT_NE(again, kInvalidHandle);
  if (again != kInvalidHandle) pool->Free(again);
  for (std::size_t i = 1; i < hs.size(); i += 2) pool->Free(hs[i]);
}

TEST(PoolReserveTest, FreedAndCompactedPagesStayResident) {
  for (const bool reserve : {true, false}) {
    SCOPED_TRACE(reserve ? "reserve" : "no reserve");
    auto pool = reserve ? ReservePool(4 << 20) : NewPool();
    ASSERT_NE(pool, nullptr);
    // 1000 objects of 1600 bytes (about 2.5 a page); every other one
    // freed, so that a compaction packs them into half as many pages and
    // frees the rest; then the rest freed, which frees their zspages.
    std::vector<Handle> hs = Fill(*pool, 1600, 1000);
    ASSERT_EQ(hs.size(), 1000u);
    std::vector<const std::byte*> where;
    for (Handle h : hs) where.push_back(Address(*pool, h));
    const std::size_t used = pool->Stats().pages_used;
    for (std::size_t i = 0; i < hs.size(); i += 2) pool->Free(hs[i]);
    const std::size_t freed = pool->Compact();
    EXPECT_GT(freed, used / 3);
    auto resident = [&] {
      std::size_t n = 0;
      for (const std::byte* p : where) n += Resident(p);
      return n;
    };
    if (reserve) {
      EXPECT_EQ(resident(), where.size()) << "compaction gave pages back";
    } else {
      EXPECT_LE(resident(), where.size() * 3 / 4) << "compaction kept pages";
    }
    for (std::size_t i = 1; i < hs.size(); i += 2) pool->Free(hs[i]);
    pool->Compact();
    EXPECT_EQ(pool->Stats().pages_used, 0u);
    EXPECT_EQ(resident(), reserve ? where.size() : 0u);
  }
}

TEST(PoolReserveTest, RunsOfOneLengthServeAnother) {
  // Class 4096 takes 1-page zspages; objects of 1000 bytes go to a class
  // of several pages a zspage. Fill
  // the reserve with the first, free them all, then fill it with the
  // second: the freed 1-page runs must merge into longer ones.
  constexpr std::size_t kBytes = 2 << 20;
  constexpr std::size_t kAll = kBytes / kPage + kTailPages;
  auto pool = ReservePool(kBytes);
  ASSERT_NE(pool, nullptr);
  std::vector<Handle> huge = Fill(*pool, 4096, SIZE_MAX);
  EXPECT_EQ(huge.size(), kAll);
  for (Handle h : huge) pool->Free(h);
  std::vector<Handle> mid = Fill(*pool, 1000, SIZE_MAX);
  // All but the huge class's spare page and the tail of the last zspage.
  EXPECT_GE(mid.size() * pool->ClassSizeFor(1000), (kAll - 16) * kPage)
      << mid.size();
  for (Handle h : mid) pool->Free(h);
  // And back: 1-page zspages again, in the runs the long ones left.
  pool->Compact();
  EXPECT_EQ(Fill(*pool, 4096, SIZE_MAX).size(), kAll);
}

// A packed page needs a run as long as a packed zspage; a reserve whose
// free pages are all single (huge-class pages, which compaction never
// moves, freed every other one) has none, and MallocWholePage takes a
// huge-class page instead of failing.
TEST(PoolReserveTest, WholePagesFitAFragmentedReserve) {
  auto pool = ReservePool(2 << 20);
  ASSERT_NE(pool, nullptr);
  std::vector<Handle> huge = Fill(*pool, 4096, SIZE_MAX);
  ASSERT_GT(huge.size(), 100u);
  std::size_t freed = 0;
  for (std::size_t i = 0; i < huge.size(); i += 2, ++freed) {
    pool->Free(huge[i]);
  }
  pool->Compact();  // gives back the huge class's spare
  std::vector<std::byte> data(4096, std::byte{0x3c});
  std::vector<Handle> whole;
  for (Handle h; (h = pool->MallocWholePage()) != kInvalidHandle;) {
    pool->Write(h, data);
    whole.push_back(h);
  }
  EXPECT_GE(whole.size(), freed);
  for (Handle h : whole) {
    std::vector<std::byte> got(4096);
    ASSERT_EQ(pool->ReadInto(h, got), 4096u);
    ASSERT_EQ(got, data);
    pool->Free(h);
  }
  for (std::size_t i = 1; i < huge.size(); i += 2) pool->Free(huge[i]);
}

TEST(PoolReserveTest, StatisticsAreThoseOfAPoolWithoutAReserve) {
  auto with = ReservePool(16 << 20);
  auto without = NewPool();
  ASSERT_NE(with, nullptr);
  std::mt19937_64 rng(7);
  std::vector<std::pair<Handle, Handle>> live;
  std::vector<std::byte> data(4096, std::byte{3});
  for (int round = 0; round < 20000; ++round) {
    if (live.empty() || rng() % 100 < 60) {
      const std::size_t size = 1 + rng() % 4096;
      const Handle a = with->Malloc(size);
      const Handle b = without->Malloc(size);
      ASSERT_NE(a, kInvalidHandle);
      ASSERT_NE(b, kInvalidHandle);
      with->Write(a, std::span<const std::byte>(data).first(size));
      without->Write(b, std::span<const std::byte>(data).first(size));
      live.emplace_back(a, b);
    } else {
      const std::size_t i = rng() % live.size();
      with->Free(live[i].first);
      without->Free(live[i].second);
      live[i] = live.back();
      live.pop_back();
    }
    if (round % 5000 == 4999) {
      EXPECT_EQ(with->Compact(), without->Compact());
    }
    if (round % 1000 == 0) {
      const PoolStats a = with->Stats();
      const PoolStats b = without->Stats();
      ASSERT_EQ(a.total_bytes, b.total_bytes) << round;
      ASSERT_EQ(a.pages_used, b.pages_used);
      ASSERT_EQ(a.metadata_bytes, b.metadata_bytes);
      ASSERT_EQ(a.objects, b.objects);
      ASSERT_EQ(a.pages_compacted, b.pages_compacted);
    }
  }
  EXPECT_EQ(with->FormatClasses(), without->FormatClasses());
  for (auto& [a, b] : live) {
    with->Free(a);
    without->Free(b);
  }
}

// A Malloc the reserve refuses leaves the pool as it found it, statistics
// included: the reserve full of huge objects, every class is refused in
// turn, and none of them takes handle-table indexes, whose chunk would go
// in the metadata bill (TotalBytes(), and so the store's mem_used_max and
// mem_limit) for objects that never were.
TEST(PoolReserveTest, RefusedMallocLeavesTheStatisticsAsTheyWere) {
  auto pool = ReservePool(1 << 20);
  ASSERT_NE(pool, nullptr);
  const std::vector<Handle> full = Fill(*pool, kPage, 100000);
  ASSERT_FALSE(full.empty());
  for (std::size_t size = 32; size <= kPage; size += 16) {
    SCOPED_TRACE("size " + std::to_string(size));
    const PoolStats before = pool->Stats();
    ASSERT_EQ(pool->Malloc(size), kInvalidHandle);
    const PoolStats after = pool->Stats();
    ASSERT_EQ(after.metadata_bytes, before.metadata_bytes);
    ASSERT_EQ(after.total_bytes, before.total_bytes);
    ASSERT_EQ(after.objects, before.objects);
  }
  for (Handle h : full) pool->Free(h);
  EXPECT_EQ(pool->Stats().objects, 0u);
}

// Threads store, check and free objects of every size in a small reserve
// while another compacts: objects read back intact, and everything freed
// leaves the pool empty. (Run under TSan too.)
TEST(PoolReserveTest, ConcurrentWithCompaction) {
  auto pool = ReservePool(2 << 20);
  ASSERT_NE(pool, nullptr);
  std::atomic<bool> stop{false};
  std::atomic<int> bad{0};
  std::thread compactor([&] {
    while (!stop.load()) pool->Compact();
  });
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(t + 1);
      std::vector<std::pair<Handle, std::uint8_t>> live;
      std::vector<std::byte> buf(4096);
      for (int i = 0; i < 20000; ++i) {
        if (live.size() < 100 && rng() % 100 < 60) {
          // One in eight a page of the packed page class.
          const bool whole = rng() % 8 == 0;
          const std::size_t size = whole ? 4096 : 1 + rng() % 4096;
          const Handle h = whole ? pool->MallocWholePage() : pool->Malloc(size);
          if (h == kInvalidHandle) continue;  // the reserve is full
          const auto tag = static_cast<std::uint8_t>(rng());
          std::fill(buf.begin(), buf.begin() + size, std::byte{tag});
          pool->Write(h, std::span<const std::byte>(buf).first(size));
          live.emplace_back(h, tag);
        } else if (!live.empty()) {
          const std::size_t k = rng() % live.size();
          const auto [h, tag] = live[k];
          const std::size_t n = pool->ReadInto(h, buf);
          for (std::size_t j = 0; j < n; ++j) {
            if (buf[j] != std::byte{tag}) {
              bad.fetch_add(1);
              break;
            }
          }
          pool->Free(h);
          live[k] = live.back();
          live.pop_back();
        }
      }
      for (const auto& [h, tag] : live) pool->Free(h);
    });
  }
  for (auto& t : threads) t.join();
  stop.store(true);
  compactor.join();
  EXPECT_EQ(bad.load(), 0);
  pool->Compact();
  EXPECT_EQ(pool->Stats().pages_used, 0u);
  EXPECT_EQ(pool->Stats().objects, 0u);
}

TEST(PoolReserveTest, ImpossibleReserveIsAnError) {
  // More than RAM and swap: refused by mmap under the default heuristic
  // overcommit (and the populate would be refused under strict); with
  // "always overcommit" it would be faulted in page by page, so skip.
  FILE* f = std::fopen("/proc/sys/vm/overcommit_memory", "r");
  int mode = 0;
  if (f != nullptr) {
    if (std::fscanf(f, "%d", &mode) != 1) mode = 0;
    std::fclose(f);
  }
  if (mode == 1) GTEST_SKIP() << "vm.overcommit_memory is 1";
  PoolOptions o;
  o.prealloc_bytes = std::size_t{1} << 42;  // 4 TiB
  auto pool = Pool::Create(o);
  ASSERT_FALSE(pool.has_value());
  EXPECT_EQ(pool.error().code(), StatusCode::kResourceExhausted)
      << pool.error().ToString();
}

}  // namespace
}  // namespace ztier
