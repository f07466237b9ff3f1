// page_store_test.cc: the PageStore's contract, one behaviour per test.
#include "ztier/page_store.h"

#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <future>
#include <random>
#include <thread>
#include <utility>
#include <vector>

#include "page_store_test_peer.h"
#include "testing/test_util.h"

namespace ztier {
namespace {

using Page = std::array<std::byte, kPageSize>;

// A page that lz4 compresses to a few hundred bytes: text-like runs.
Page TextPage(std::uint32_t seed) {
  Page p;
  std::mt19937 rng(seed);
  const char* words[] = {"alpha ", "beta ", "gamma ", "delta ", "page ",
                         "store ", "zram ", "\n"};
  std::size_t i = 0;
  while (i < kPageSize) {
    const char* w = words[rng() % 8];
    for (const char* c = w; *c != '\0' && i < kPageSize; ++c) {
      p[i++] = static_cast<std::byte>(*c);
    }
  }
  return p;
}

Page RandomPage(std::uint32_t seed) {
  Page p;
  std::mt19937_64 rng(seed);
  for (std::size_t i = 0; i < kPageSize; i += 8) {
    std::uint64_t v = rng();
    std::memcpy(&p[i], &v, 8);
  }
  return p;
}

Page FilledPage(std::uint64_t word) {
  Page p;
  for (std::size_t i = 0; i < kPageSize; i += 8) std::memcpy(&p[i], &word, 8);
  return p;
}

// `n` pages one after another, page i being page(i): a batch to store.
template <typename PageOf>
std::vector<std::byte> Pages(std::size_t n, PageOf page) {
  std::vector<std::byte> out(n * kPageSize);
  for (std::size_t i = 0; i < n; ++i) {
    const Page p = page(i);
    std::memcpy(&out[i * kPageSize], p.data(), kPageSize);
  }
  return out;
}

std::unique_ptr<PageStore> MakeStore(PageStoreOptions o) {
  auto s = PageStore::Create(o);
  EXPECT_TRUE(s.has_value()) << s.error().ToString();
  return std::move(*s);
}

std::unique_ptr<PageStore> MakeStore(std::size_t pages) {
  PageStoreOptions o;
  o.num_pages = pages;
  return MakeStore(o);
}

TEST(PageStoreTest, CreateRejectsBadOptions) {
  PageStoreOptions o;
  EXPECT_EQ(PageStore::Create(o).error().code(), StatusCode::kInvalidArgument);
  o.num_pages = 4;
  o.codec = "nosuch";
  EXPECT_FALSE(PageStore::Create(o).has_value());
  o.codec = "lz4";
  o.batch_size = 9;
  EXPECT_EQ(PageStore::Create(o).error().code(), StatusCode::kInvalidArgument);
}

// A slot table too large to address (num_pages * 16 bytes past SIZE_MAX)
// is an error, not a store of however many slots the wrapped size holds.
TEST(PageStoreTest, CreateRejectsASlotTableWhoseSizeOverflows) {
  const std::size_t pages = SIZE_MAX / 16 + 2;  // * 16 wraps to 16 bytes
  auto made = PageStore::Create({.num_pages = pages});
  if (made.has_value()) {
    EXPECT_EQ((*made)->num_pages(), pages)
        << "Create made a store of another size than asked";
  }
}

TEST(PageStoreTest, RoundTripsEveryKindOfPage) {
  auto store = MakeStore(8);
  const Page pages[] = {TextPage(1), RandomPage(2), FilledPage(0),
                        FilledPage(0x0102030405060708)};
  for (std::size_t i = 0; i < 4; ++i) ASSERT_OK(store->Store(i, pages[i]));
  for (std::size_t i = 0; i < 4; ++i) {
    Page out;
    ASSERT_OK(store->Load(i, out));
    EXPECT_EQ(out, pages[i]) << "slot " << i;
  }
  EXPECT_FALSE(store->Inspect(0).huge);
  EXPECT_TRUE(store->Inspect(1).huge);
  EXPECT_EQ(store->Inspect(1).size, kPageSize);
  EXPECT_TRUE(store->Inspect(2).same);
  EXPECT_TRUE(store->Inspect(3).same);
  EXPECT_EQ(store->Inspect(3).fill, 0x0102030405060708u);
}

TEST(PageStoreTest, NeverWrittenSlotReadsAsZeros) {
  auto store = MakeStore(2);
  Page out = RandomPage(5);
  ASSERT_OK(store->Load(1, out));
  EXPECT_EQ(out, FilledPage(0));
}

TEST(PageStoreTest, OutOfRangeIndexIsAnError) {
  auto store = MakeStore(2);
  Page p = TextPage(1);
  EXPECT_EQ(store->Store(2, p).code(), StatusCode::kOutOfRange);
  EXPECT_EQ(store->Load(2, p).code(), StatusCode::kOutOfRange);
  EXPECT_EQ(store->Discard(7).code(), StatusCode::kOutOfRange);
  std::vector<std::byte> two(2 * kPageSize);
  EXPECT_EQ(store->StoreBatch(1, two).code(), StatusCode::kOutOfRange);
  EXPECT_EQ(store->LoadBatch(1, two).code(), StatusCode::kOutOfRange);
}

TEST(PageStoreTest, SameFilledAndZeroPagesUseNoPoolMemory) {
  auto store = MakeStore(64);
  const std::uint64_t before = store->Stats().mem_used_total;
  for (std::size_t i = 0; i < 64; ++i) {
    ASSERT_OK(store->Store(i, FilledPage(i % 2 == 0 ? 0 : 0xabababababababab)));
  }
  const PageStoreStats s = store->Stats();
  EXPECT_EQ(s.mem_used_total, before);
  EXPECT_EQ(s.compr_data_size, 0u);
  EXPECT_EQ(s.same_pages, 64u);
  EXPECT_EQ(s.orig_data_size, 64 * kPageSize);
}

// A known sequence of operations and the mm_stat columns the kernel would
// show after each step (zram_drv.c: orig counts SAME, compr excludes it,
// HUGE counts as a page, huge_pages_since is cumulative).
TEST(PageStoreTest, MmStatColumnsFollowTheKernel) {
  auto store = MakeStore(16);
  const Page text = TextPage(7);
  ASSERT_OK(store->Store(0, text));
  const std::size_t text_size = store->Inspect(0).size;
  ASSERT_GT(text_size, 0u);
  ASSERT_LT(text_size, kPageSize / 2);
  ASSERT_OK(store->Store(1, RandomPage(8)));         // HUGE
  ASSERT_OK(store->Store(2, FilledPage(0)));         // SAME
  ASSERT_OK(store->Store(3, FilledPage(0x11)));      // SAME

  PageStoreStats s = store->Stats();
  EXPECT_EQ(s.orig_data_size, 4 * kPageSize);
  EXPECT_EQ(s.compr_data_size, text_size + kPageSize);
  EXPECT_EQ(s.same_pages, 2u);
  EXPECT_EQ(s.huge_pages, 1u);
  EXPECT_EQ(s.huge_pages_since, 1u);
  EXPECT_GT(s.mem_used_total, text_size + kPageSize - 1);
  EXPECT_GE(s.mem_used_max, s.mem_used_total);
  EXPECT_EQ(s.mem_limit, 0u);

  // Overwrite the huge page with text: huge_pages drops, _since stays.
  ASSERT_OK(store->Store(1, text));
  s = store->Stats();
  EXPECT_EQ(s.huge_pages, 0u);
  EXPECT_EQ(s.huge_pages_since, 1u);
  EXPECT_EQ(s.compr_data_size, 2 * text_size);

  // Discards: each counts in notify_free (io_stat column 4).
  ASSERT_OK(store->Discard(2));
  ASSERT_OK(store->Discard(9));  // empty slot: counted, nothing freed
  s = store->Stats();
  EXPECT_EQ(s.orig_data_size, 3 * kPageSize);
  EXPECT_EQ(s.same_pages, 1u);
  EXPECT_EQ(s.notify_free, 2u);

  char expect[256];
  std::snprintf(expect, sizeof(expect),
                "%8llu %8llu %8llu %8lu %8ld %8llu %8lu %8llu %8llu\n",
                3ull * kPageSize, 2ull * text_size,
                static_cast<unsigned long long>(s.mem_used_total), 0ul,
                static_cast<long>(s.mem_used_max), 1ull,
                static_cast<unsigned long>(s.pages_compacted), 0ull, 1ull);
  EXPECT_EQ(store->FormatMmStat(), expect);
  EXPECT_EQ(store->FormatIoStat(), "       0        0 0        2\n");
  EXPECT_EQ(store->FormatDebugStat(), "version: 1\n       0        0\n");
}

TEST(PageStoreTest, MemLimitRefusesTheStoreAndKeepsTheOldContent) {
  auto store = MakeStore(4096);
  const Page old = TextPage(3);
  ASSERT_OK(store->Store(0, old));
  store->SetMemLimit(store->Stats().mem_used_total);
  // Random pages are stored raw: the next one cannot fit under the limit.
  Status st = store->Store(0, RandomPage(4));
  EXPECT_EQ(st.code(), StatusCode::kResourceExhausted);
  Page out;
  ASSERT_OK(store->Load(0, out));
  EXPECT_EQ(out, old);
  PageStoreStats s = store->Stats();
  EXPECT_EQ(s.failed_writes, 1u);
  EXPECT_EQ(s.pool_limit_hit, 1u);
  EXPECT_LE(s.mem_used_total, s.mem_limit);
  // Same-filled pages need no memory: still accepted over the limit.
  EXPECT_OK(store->Store(1, FilledPage(5)));
  store->SetMemLimit(0);
  EXPECT_OK(store->Store(2, RandomPage(4)));
}

// zram's zram_can_store_page() records the pool's size in max_used_pages
// before it compares it with the limit: a write refused for mem_limit
// still leaves its peak in mem_used_max (which then exceeds mem_limit).
TEST(PageStoreTest, MemUsedMaxRecordsThePeakOfARefusedStore) {
  auto store = MakeStore(4096);
  ASSERT_OK(store->Store(0, TextPage(3)));
  store->SetMemLimit(store->Stats().mem_used_total);
  ASSERT_EQ(store->Store(1, RandomPage(4)).code(),
            StatusCode::kResourceExhausted);
  const PageStoreStats s = store->Stats();
  ASSERT_EQ(s.pool_limit_hit, 1u);
  EXPECT_GT(s.mem_used_max, s.mem_limit)
      << "the refused allocation's peak is not in mem_used_max";
}

// Both backends: each lane installs the pages it compressed, so a failed
// batch must also take back what the lanes already installed.
class BatchAllOrNothingTest : public ::testing::TestWithParam<BatchBackend> {};

INSTANTIATE_TEST_SUITE_P(Backends, BatchAllOrNothingTest,
                         ::testing::Values(BatchBackend::kSerial,
                                           BatchBackend::kParallel));

// A page that compresses to about half a page: 2048 random bytes, then
// zeros.
Page HalfRandomPage(std::uint32_t seed) {
  Page p = RandomPage(seed);
  std::memset(&p[kPageSize / 2], 0, kPageSize / 2);
  return p;
}

// A batch refused for an incompressible page (zswap mode) after its other
// pages were allocated, on either backend: their allocation is a peak of
// mem_used_total that mem_used_max records, as it records a refused
// store's (zram_can_store_page()).
TEST_P(BatchAllOrNothingTest, MemUsedMaxRecordsThePeakOfARefusedBatch) {
  PageStoreOptions o;
  o.num_pages = 64;
  o.batch_backend = GetParam();
  o.store_incompressible = false;
  auto store = MakeStore(o);
  ASSERT_OK(store->Store(0, TextPage(1)));
  const PageStoreStats before = store->Stats();
  // Seven objects of about 2 KiB take pages the pool did not hold; the
  // last page is refused.
  const std::vector<std::byte> pages = Pages(kMaxBatchSize, [](std::size_t i) {
    return i + 1 < kMaxBatchSize ? HalfRandomPage(500 + i) : RandomPage(600);
  });
  ASSERT_EQ(store->StoreBatch(8, pages).code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(store->Stats().reject_compress_poor, 1u);
  EXPECT_GE(store->Stats().mem_used_max,
            before.mem_used_total + (kMaxBatchSize - 2) * (kPageSize / 2))
      << "the batch's objects are not in mem_used_max";
}

TEST_P(BatchAllOrNothingTest, BatchStoreRoundTripsAndIsAllOrNothing) {
  PageStoreOptions o;
  o.num_pages = 64;
  o.batch_backend = GetParam();
  auto store = MakeStore(o);
  const std::vector<std::byte> pages = Pages(16, [](std::size_t i) {
    return i % 5 == 0   ? FilledPage(i)
           : i % 3 == 0 ? RandomPage(i)
                        : TextPage(i);
  });
  ASSERT_OK(store->StoreBatch(8, pages));
  std::vector<std::byte> out(16 * kPageSize);
  std::vector<Status> statuses(16);
  ASSERT_OK(store->LoadBatch(8, out, statuses));
  EXPECT_EQ(out, pages);
  for (auto& st : statuses) EXPECT_OK(st);

  // Now make the batch fail part-way: the limit lets only a few pages in.
  // Afterwards no slot of the range holds anything, old or new.
  store->SetMemLimit(store->Stats().mem_used_total + 2 * kPageSize);
  const std::vector<std::byte> random =
      Pages(16, [](std::size_t i) { return RandomPage(100 + i); });
  const PageStoreStats before = store->Stats();
  EXPECT_EQ(store->StoreBatch(8, random).code(), StatusCode::kResourceExhausted);
  for (std::size_t i = 8; i < 24; ++i) {
    EXPECT_FALSE(store->Inspect(i).allocated) << "slot " << i;
  }
  PageStoreStats s = store->Stats();
  EXPECT_EQ(s.orig_data_size, 0u);
  EXPECT_EQ(s.compr_data_size, 0u);
  EXPECT_EQ(s.failed_writes, before.failed_writes + 1);
  // The HUGE pages installed before the failure were not stored after all.
  EXPECT_EQ(s.huge_pages, 0u);
  EXPECT_EQ(s.huge_pages_since, before.huge_pages_since);
}

// kKeepPrefix: refused for memory, the batch is stored page by page until
// the limit stops one; one failed write is counted, and huge_pages_since
// counts the HUGE pages stored, not those of the refused batch as well.
TEST_P(BatchAllOrNothingTest, KeepPrefixStoresThePagesBeforeTheLimit) {
  for (const std::size_t unit_pages : {0, 16}) {
    SCOPED_TRACE(unit_pages);
    PageStoreOptions o;
    o.num_pages = 64;
    o.batch_backend = GetParam();
    o.unit_pages = unit_pages;
    auto store = MakeStore(o);
    ASSERT_OK(store->Store(0, TextPage(1)));
    const Page random0 = RandomPage(200);
    ASSERT_OK(store->Store(40, random0));  // HUGE, kept
    store->SetMemLimit(store->Stats().mem_used_total + 5 * kPageSize);
    const std::vector<std::byte> pages =
        Pages(16, [](std::size_t i) { return RandomPage(300 + i); });
    const PageStoreStats before = store->Stats();
    EXPECT_EQ(store->StoreBatch(16, pages, BatchRefusal::kKeepPrefix).code(),
              StatusCode::kResourceExhausted);
    const PageStoreStats s = store->Stats();
    std::size_t stored = 0;
    while (stored < 16 && store->Inspect(16 + stored).allocated) ++stored;
    EXPECT_GE(stored, 3u);
    EXPECT_LT(stored, 16u);
    for (std::size_t i = 16 + stored; i < 32; ++i) {
      EXPECT_FALSE(store->Inspect(i).allocated) << "slot " << i;
    }
    Page out;
    for (std::size_t i = 0; i < stored; ++i) {
      ASSERT_OK(store->Load(16 + i, out));
      EXPECT_EQ(0, std::memcmp(out.data(), &pages[i * kPageSize], kPageSize));
    }
    ASSERT_OK(store->Load(40, out));
    EXPECT_EQ(out, random0);
    EXPECT_EQ(s.failed_writes, before.failed_writes + 1);
    EXPECT_EQ(s.huge_pages, 1 + stored);
    EXPECT_EQ(s.huge_pages_since, 1 + stored);
    // Without it, the range is left empty.
    EXPECT_EQ(store->StoreBatch(16, pages).code(),
              StatusCode::kResourceExhausted);
    for (std::size_t i = 16; i < 32; ++i) {
      EXPECT_FALSE(store->Inspect(i).allocated) << "slot " << i;
    }
    EXPECT_EQ(store->Stats().failed_writes, before.failed_writes + 2);
    EXPECT_EQ(store->Stats().huge_pages_since, 1 + stored);
  }
}

TEST(PageStoreTest, ParallelBackendMatchesSerial) {
  PageStoreOptions o;
  o.num_pages = 64;
  o.batch_backend = BatchBackend::kParallel;
  auto store = MakeStore(o);
  EXPECT_EQ(store->batch_backend(), BatchBackend::kParallel);
  EXPECT_EQ(store->batch_size(), kMaxBatchSize);
  const std::vector<std::byte> pages = Pages(64, [](std::size_t i) {
    return i % 7 == 0 ? RandomPage(i) : TextPage(i);
  });
  ASSERT_OK(store->StoreBatch(0, pages));
  std::vector<std::byte> out(64 * kPageSize);
  ASSERT_OK(store->LoadBatch(0, out));
  EXPECT_EQ(out, pages);
  for (std::size_t i = 0; i < 64; ++i) {
    Page one;
    ASSERT_OK(store->Load(i, one));
    EXPECT_EQ(0, std::memcmp(one.data(), &pages[i * kPageSize], kPageSize));
  }
}

TEST(PageStoreTest, RejectsIncompressiblePagesInZswapMode) {
  PageStoreOptions o;
  o.num_pages = 4;
  o.store_incompressible = false;
  auto store = MakeStore(o);
  EXPECT_EQ(store->Store(0, RandomPage(1)).code(),
            StatusCode::kResourceExhausted);
  PageStoreStats s = store->Stats();
  EXPECT_EQ(s.reject_compress_poor, 1u);
  EXPECT_EQ(s.failed_writes, 0u);
  EXPECT_FALSE(store->Inspect(0).allocated);
  EXPECT_OK(store->Store(0, TextPage(1)));
}

// kKeepPrefix retries a batch refused for memory only: one refused for an
// incompressible page (zswap semantics) is left empty, counted once.
TEST(PageStoreTest, KeepPrefixDoesNotRetryAnIncompressiblePage) {
  PageStoreOptions o;
  o.num_pages = 8;
  o.store_incompressible = false;
  auto store = MakeStore(o);
  const std::vector<std::byte> pages = Pages(
      4, [](std::size_t i) { return i == 2 ? RandomPage(i) : TextPage(i); });
  EXPECT_EQ(store->StoreBatch(0, pages, BatchRefusal::kKeepPrefix).code(),
            StatusCode::kResourceExhausted);
  for (std::size_t i = 0; i < 4; ++i) {
    EXPECT_FALSE(store->Inspect(i).allocated) << "slot " << i;
  }
  const PageStoreStats s = store->Stats();
  EXPECT_EQ(s.reject_compress_poor, 1u);
  EXPECT_EQ(s.failed_writes, 0u);
}

TEST(PageStoreTest, IdleMarkingByAllAndByAge) {
  std::uint32_t now = 1000;
  PageStoreOptions o;
  o.num_pages = 8;
  o.clock = [&now] { return now; };
  auto store = MakeStore(o);
  ASSERT_OK(store->Store(0, TextPage(1)));  // t=1000
  ASSERT_OK(store->Store(1, FilledPage(3)));  // SAME: never idle
  now = 1100;
  ASSERT_OK(store->Store(2, TextPage(2)));  // t=1100

  store->MarkIdleAll();
  EXPECT_TRUE(store->Inspect(0).idle);
  EXPECT_FALSE(store->Inspect(1).idle);
  EXPECT_TRUE(store->Inspect(2).idle);
  EXPECT_FALSE(store->Inspect(3).idle);  // empty

  Page out;
  ASSERT_OK(store->Load(2, out));  // access clears IDLE
  EXPECT_FALSE(store->Inspect(2).idle);

  now = 1150;
  store->MarkIdleOlderThan(60);  // slot 0 is 150 s old, slot 2 is 0 s old
  EXPECT_TRUE(store->Inspect(0).idle);
  EXPECT_FALSE(store->Inspect(2).idle);
  store->MarkIdleAll();
  store->MarkIdleOlderThan(1000);  // clears where not old enough
  EXPECT_FALSE(store->Inspect(0).idle);
}

// A load that fails is no access, on either backend: the slot keeps its
// access time and IDLE, and `loads` does not count it (zram_bio_read() in
// drivers/block/zram/zram_drv.c calls zram_accessed() only after
// zram_bvec_read() succeeded).
class FailedLoadTest : public ::testing::TestWithParam<BatchBackend> {};

INSTANTIATE_TEST_SUITE_P(Backends, FailedLoadTest,
                         ::testing::Values(BatchBackend::kSerial,
                                           BatchBackend::kParallel));

TEST_P(FailedLoadTest, ADamagedObjectIsNoAccess) {
  std::uint32_t now = 1000;
  PageStoreOptions o;
  o.num_pages = 8;
  o.batch_backend = GetParam();
  o.clock = [&now] { return now; };
  auto store = MakeStore(o);
  for (std::uint32_t i = 0; i < 8; ++i) ASSERT_OK(store->Store(i, TextPage(i)));
  store->MarkIdleAll();
  ASSERT_TRUE(PageStoreTestPeer::CorruptSlot(*store, 3));
  now = 2000;
  std::vector<std::byte> all(8 * kPageSize);
  std::vector<Status> st(8);
  EXPECT_EQ(store->LoadBatch(0, all, st).code(), StatusCode::kCorruption);
  for (std::uint64_t i = 0; i < 8; ++i) {
    const SlotInfo info = store->Inspect(i);
    if (i == 3) {
      EXPECT_EQ(st[i].code(), StatusCode::kCorruption);
      EXPECT_TRUE(info.idle);
      EXPECT_EQ(info.ac_time, 1000u);
    } else {
      EXPECT_OK(st[i]);
      EXPECT_FALSE(info.idle) << i;
      EXPECT_EQ(info.ac_time, 2000u) << i;
    }
  }
  EXPECT_EQ(store->Stats().loads, 7u);
  EXPECT_EQ(store->Stats().failed_reads, 1u);
}

// A parallel LoadBatch copies a chunk's objects out, decompresses them
// with no lock held, then marks each page that decompressed. A page stored
// over the slot meanwhile is not the one the batch read: the mark is not
// its (it stays as idle marking left it). The test's clock runs the store
// and the idle marking when the batch loads slot 1, never written, under
// its lock, after slot 0's object was copied out (MarkIdleAll skips a
// never-written slot without its lock).
TEST(PageStoreTest, ParallelLoadBatchMarksOnlyThePageItRead) {
  std::uint32_t now = 1000;
  std::function<void()> during_load;
  PageStoreOptions o;
  o.num_pages = 4;
  o.batch_backend = BatchBackend::kParallel;
  o.clock = [&] {
    if (during_load) std::exchange(during_load, nullptr)();
    return now;
  };
  auto store = MakeStore(o);
  ASSERT_OK(store->Store(0, TextPage(0)));
  during_load = [&] {
    now = 2000;
    ASSERT_OK(store->Store(0, TextPage(7)));
    store->MarkIdleAll();
    now = 3000;
  };
  std::vector<std::byte> two(2 * kPageSize);
  ASSERT_OK(store->LoadBatch(0, two));
  ASSERT_EQ(during_load, nullptr);  // it ran
  const Page old = TextPage(0);
  EXPECT_EQ(std::memcmp(two.data(), old.data(), kPageSize), 0);
  const SlotInfo info = store->Inspect(0);
  EXPECT_TRUE(info.idle);
  EXPECT_EQ(info.ac_time, 2000u);
  EXPECT_EQ(store->Stats().loads, 2u);  // both pages were read
  Page out;
  ASSERT_OK(store->Load(0, MutablePage(out)));
  EXPECT_EQ(out, TextPage(7));
}

TEST(PageStoreTest, TryDiscardCountsMissFreeWhenLocked) {
  auto store = MakeStore(4);
  ASSERT_OK(store->Store(0, TextPage(1)));
  ASSERT_OK(store->TryDiscard(0));
  EXPECT_FALSE(store->Inspect(0).allocated);
  EXPECT_EQ(store->Stats().notify_free, 1u);
  EXPECT_EQ(store->Stats().miss_free, 0u);
}

TEST(PageStoreTest, CompactionKeepsDataAndReturnsPages) {
  auto store = MakeStore(2048);
  for (std::size_t i = 0; i < 2048; ++i) ASSERT_OK(store->Store(i, TextPage(i)));
  for (std::size_t i = 0; i < 2048; i += 2) ASSERT_OK(store->Discard(i));
  const std::uint64_t before = store->Stats().mem_used_total;
  store->Compact();
  const PageStoreStats s = store->Stats();
  EXPECT_LT(s.mem_used_total, before);
  EXPECT_GT(s.pages_compacted, 0u);
  for (std::size_t i = 1; i < 2048; i += 2) {
    Page out;
    ASSERT_OK(store->Load(i, out));
    ASSERT_EQ(out, TextPage(i)) << "slot " << i;
  }
}

TEST(PageStoreTest, PartialWritesPatchThePage) {
  auto store = MakeStore(4);
  const std::byte abc[] = {std::byte{'a'}, std::byte{'b'}, std::byte{'c'}};
  ASSERT_OK(store->StorePartial(0, 4094, std::span(abc).first(2)));
  Page out;
  ASSERT_OK(store->Load(0, out));
  Page expect = FilledPage(0);
  expect[4094] = std::byte{'a'};
  expect[4095] = std::byte{'b'};
  EXPECT_EQ(out, expect);
  EXPECT_EQ(store->StorePartial(0, 4095, abc).code(), StatusCode::kOutOfRange);

  const Page text = TextPage(9);
  ASSERT_OK(store->Store(1, text));
  const PageStoreStats before = store->Stats();
  ASSERT_OK(store->StorePartial(1, 100, abc));
  // Its read of the old page is part of the write, not a load.
  EXPECT_EQ(store->Stats().loads, before.loads);
  EXPECT_EQ(store->Stats().stores, before.stores + 1);
  ASSERT_OK(store->Load(1, out));
  expect = text;
  std::memcpy(&expect[100], abc, 3);
  EXPECT_EQ(out, expect);
}

// Two threads each write their own bytes of one page, one byte at a time:
// read-modify-write under the slot lock loses none of them.
TEST(PageStoreTest, ConcurrentPartialWritesToOnePageLoseNothing) {
  auto store = MakeStore(1);
  auto writer = [&](std::size_t start) {
    for (std::size_t i = start; i < 600; i += 2) {
      const std::byte b{static_cast<unsigned char>(i % 251 + 1)};
      ASSERT_OK(store->StorePartial(0, i, std::span(&b, 1)));
    }
  };
  std::thread a(writer, 0), b(writer, 1);
  a.join();
  b.join();
  Page out;
  ASSERT_OK(store->Load(0, out));
  for (std::size_t i = 0; i < 600; ++i) {
    ASSERT_EQ(out[i], std::byte{static_cast<unsigned char>(i % 251 + 1)}) << i;
  }
}

// Takes every stream of `streams` (regular and reserve) but `leave`.
std::vector<internal::StreamPool::Lease> HoldStreams(
    internal::StreamPool& streams, std::size_t leave) {
  std::vector<internal::StreamPool::Lease> held;
  const std::size_t all = streams.count() + streams.reserve_count();
  while (held.size() + leave < all) held.push_back(streams.Acquire());
  return held;
}

// A store of `num_pages` slots with one regular stream (and so two
// reserve ones).
std::unique_ptr<PageStore> MakeOneStreamStore(std::size_t num_pages) {
  PageStoreOptions o;
  o.num_pages = num_pages;
  o.streams = 1;
  return MakeStore(o);
}

// The point of the zswap load contention series (docs/references.md): a
// load never waits for a compression stream. Hold every stream (regular and
// reserve) on this thread; a load on another thread still completes. (The
// shared baseline, where it would wait, is the latency benchmark's:
// tools/ztier/shared_stream_test.cc.)
TEST(PageStoreTest, LoadCompletesWhileAnotherThreadHoldsEveryStream) {
  auto store = MakeOneStreamStore(4);
  const Page text = TextPage(11);
  ASSERT_OK(store->Store(0, text));
  internal::StreamPool& streams = PageStoreTestPeer::Streams(*store);
  auto held = HoldStreams(streams, 0);
  ASSERT_EQ(held.size(), 3u);  // the regular stream and both reserve ones
  auto load = std::async(std::launch::async, [&] {
    Page out;
    Status st = store->Load(0, out);
    return st.ok() && out == text;
  });
  const std::future_status status = load.wait_for(std::chrono::seconds(10));
  held.clear();  // after a timeout, lets the load end: a failure, not a hang
  ASSERT_EQ(status, std::future_status::ready);
  EXPECT_TRUE(load.get());
}

// A store finds another stream rather than sleeping on a held one.
TEST(PageStoreTest, StoreTakesAnotherStreamWhenOneIsHeld) {
  auto store = MakeOneStreamStore(4);
  internal::StreamPool& streams = PageStoreTestPeer::Streams(*store);
  auto held = streams.Acquire();  // the regular stream
  auto done = std::async(std::launch::async,
                         [&] { return store->Store(1, TextPage(3)).ok(); });
  ASSERT_EQ(done.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  EXPECT_TRUE(done.get());
}

TEST(PageStoreTest, ResetMemUsedMax) {
  auto store = MakeStore(64);
  for (std::size_t i = 0; i < 64; ++i) ASSERT_OK(store->Store(i, RandomPage(i)));
  for (std::size_t i = 0; i < 64; ++i) ASSERT_OK(store->Discard(i));
  EXPECT_GT(store->Stats().mem_used_max, store->Stats().mem_used_total);
  store->ResetMemUsedMax();
  EXPECT_EQ(store->Stats().mem_used_max, store->Stats().mem_used_total);
}

// Lock order (docs/architecture.md): a stream is never taken under a slot
// lock. An unaligned write (StorePartial) used to lock its slot and then
// wait for a stream, while a batch held a stream and waited for that slot:
// with every stream held, both waited forever. Here every stream is held
// first by this thread, until all six writers sleep waiting for one: then
// no writer may hold a slot lock, so loading every page completes. Then
// the writers share the one stream this thread gives back (every stream
// stays held), sub-page and batched writes to the same eight pages.
TEST(PageStoreTest, PartialAndBatchedStoresOfTheSamePagesDoNotDeadlock) {
  auto store = MakeOneStreamStore(8);
  internal::StreamPool& streams = PageStoreTestPeer::Streams(*store);
  std::vector<std::byte> batch(8 * kPageSize);
  for (std::size_t i = 0; i < 8; ++i) {
    const Page p = TextPage(static_cast<std::uint32_t>(i));
    std::memcpy(batch.data() + i * kPageSize, p.data(), kPageSize);
  }
  ASSERT_OK(store->StoreBatch(0, batch));
  auto held = HoldStreams(streams, 0);
  constexpr int kWriters = 6;
  std::atomic<bool> stop{false};
  std::atomic<std::uint64_t> batches{0};
  std::atomic<std::uint64_t> partials{0};
  const std::byte word[8] = {std::byte{0x61}, std::byte{0x62}};
  std::vector<std::thread> threads;
  for (int t = 0; t < kWriters; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(static_cast<std::uint32_t>(t));
      while (!stop.load()) {
        if (t % 2 == 0) {
          ASSERT_OK(store->StoreBatch(0, batch));
          batches.fetch_add(1);
        } else {
          ASSERT_OK(store->StorePartial(rng() % 8, 8 * (rng() % 500), word));
          partials.fetch_add(1);
        }
      }
    });
  }
  // Every writer asleep waiting for a stream (a partial write after its
  // read). A writer that blocks elsewhere (on a slot lock) never announces
  // itself: that is the regression, and it fails here rather than hangs.
  const auto asleep_by =
      std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (streams.waiting() < kWriters) {
    if (std::chrono::steady_clock::now() > asleep_by) {
      ADD_FAILURE() << "only " << streams.waiting() << " of " << kWriters
                    << " writers wait for a stream";
      std::_Exit(1);  // the threads cannot be joined
    }
    std::this_thread::yield();
  }
  auto loads = std::async(std::launch::async, [&] {
    Page out;
    for (std::uint64_t i = 0; i < 8; ++i) {
      if (!store->Load(i, out).ok()) return false;
    }
    return true;
  });
  const bool loaded =
      loads.wait_for(std::chrono::seconds(60)) == std::future_status::ready;
  EXPECT_TRUE(loaded) << "a writer waits for a stream holding a slot lock";
  held.pop_back();  // one stream for the six writers
  // Until both kinds have made progress (bounded: a starved kind fails).
  const auto busy_until =
      std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while ((batches.load() <= 10 || partials.load() <= 10) &&
         std::chrono::steady_clock::now() < busy_until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  stop.store(true);
  held.clear();
  // Every thread finishes its last store within the watchdog's time.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  auto joined = std::async(std::launch::async, [&] {
    for (auto& th : threads) th.join();
  });
  if (!loaded || joined.wait_until(deadline) != std::future_status::ready) {
    ADD_FAILURE() << "stores deadlocked after " << batches.load() << " + "
                  << partials.load() << " stores";
    std::_Exit(1);  // the threads cannot be joined
  }
  EXPECT_TRUE(loads.get());
  // Both kinds made progress: a partial write that kept losing its race
  // would starve (it takes the locked path after a few tries).
  EXPECT_GT(batches.load(), 10u);
  EXPECT_GT(partials.load(), 10u);
  // Every 8-byte word of every page is the batch's or the partial writes'.
  for (std::uint64_t i = 0; i < 8; ++i) {
    Page out;
    ASSERT_OK(store->Load(i, out));
    for (std::size_t w = 0; w < kPageSize; w += 8) {
      const bool batch_word =
          std::memcmp(&out[w], batch.data() + i * kPageSize + w, 8) == 0;
      const bool partial_word = std::memcmp(&out[w], word, 8) == 0;
      ASSERT_TRUE(batch_word || partial_word) << "page " << i << " byte " << w;
    }
  }
}

// StorePartial compresses without the slot lock. A write that lands in
// between (here while the partial write waits for a stream, after its
// read) is not overwritten by the merge of the older page: the partial
// write starts again from the newest content.
TEST(PageStoreTest, StorePartialKeepsAnOverwriteMadeWhileItCompresses) {
  auto store = MakeOneStreamStore(2);
  internal::StreamPool& streams = PageStoreTestPeer::Streams(*store);
  ASSERT_OK(store->Store(0, TextPage(5)));
  auto held = HoldStreams(streams, 0);
  const std::byte patch[3] = {std::byte{1}, std::byte{2}, std::byte{3}};
  auto partial = std::async(std::launch::async,
                            [&] { return store->StorePartial(0, 100, patch); });
  while (streams.waiting() == 0) std::this_thread::yield();
  // A same-filled page needs no stream: this store completes now.
  const Page newer = FilledPage(0x7777777777777777ull);
  const Status stored = store->Store(0, newer);
  held.clear();  // before any ASSERT: `partial` waits for these streams
  ASSERT_OK(stored);
  ASSERT_EQ(partial.wait_for(std::chrono::seconds(60)),
            std::future_status::ready);
  ASSERT_OK(partial.get());
  Page expect = newer;
  std::memcpy(&expect[100], patch, sizeof(patch));
  Page out;
  ASSERT_OK(store->Load(0, out));
  EXPECT_EQ(out, expect);
}

}  // namespace
}  // namespace ztier
