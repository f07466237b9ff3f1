// File: store/store_oom_test.cc
//
// The PageStore survives running out of memory (std::bad_alloc) at any
// point of the operations that allocate, each allocation failing in turn
// (testing/failing_new.h):
//   - a unit's reclaim (the discard that makes a unit reclaimable, on a
//     thread whose first unit cache and buffers are still to be made): no
//     slot of the unit stays locked; its other pages load as stored; the
//     next call retries it, as a reclaim the pool refused; so too a retry
//     after a new dictionary whose stream could not take it up;
//   - a writeback pass (pages and units): the pages it did not write stay
//     in RAM, intact, and the next pass writes them (none is left marked
//     as picked, which no later pass would pick again);
//   - a recompression pass: no object it made is left behind (the pool
//     holds no object once every page is discarded), and the next pass
//     recompresses every page the first did not;
//   - a dictionary's training: no compression stream is left taken;
//   - a batch store of units and single pages: the range is emptied, as
//     on a failed call, never left part new and part old;
//   - a batched load on the parallel backend, on a thread whose buffers and
//     decompressors are still to be made: it may throw, but only once its
//     lanes are done (they use its stack), and every page loads after.
#include <gtest/gtest.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <new>
#include <random>
#include <thread>
#include <vector>

#include "page_store_test_peer.h"
#include "stream_pool.h"
#include "testing/failing_new.h"
#include "testing/faulty_file.h"
#include "testing/test_util.h"
#include "testing/watchdog.h"
#include "ztier/backing_file.h"
#include "ztier/backing_store.h"
#include "ztier/page_store.h"

namespace ztier {
namespace {

constexpr std::size_t kUnit = 4;

std::vector<std::byte> Pages(std::size_t count, std::uint64_t version) {
  std::vector<std::byte> v(count * kPageSize);
  static const char kText[] = "the quick brown fox jumps over the lazy dog ";
  for (std::size_t i = 0; i < v.size(); ++i) {
    v[i] =
        static_cast<std::byte>(kText[(i / 7 + version) % (sizeof(kText) - 1)]);
  }
  for (std::size_t k = 0; k < count; ++k) {
    std::memcpy(v.data() + k * kPageSize, &k, sizeof(k));
    std::memcpy(v.data() + k * kPageSize + 8, &version, sizeof(version));
  }
  return v;
}

// Each page of `store` reads as the same page of `pages`.
void ExpectPages(PageStore& store, const std::vector<std::byte>& pages) {
  std::vector<std::byte> out(kPageSize);
  for (std::size_t i = 0; i < pages.size() / kPageSize; ++i) {
    ASSERT_OK(store.Load(i, MutablePage(out.data(), kPageSize)));
    ASSERT_EQ(std::memcmp(out.data(), pages.data() + i * kPageSize, kPageSize),
              0)
        << "page " << i;
  }
}

// Runs fn on a new thread and waits up to 30 s for it; a slot left locked
// would block it for good, so the process ends, saying `what`.
template <typename Fn>
void OnThreadWithin30s(const char* what, Fn fn) {
  const testing::Watchdog watchdog(what, std::chrono::seconds(30));
  std::thread(fn).join();
}

TEST(StoreOomTest, NoFailedAllocationOfAReclaimLeavesTheUnitLocked) {
  const std::vector<std::byte> pages = Pages(kUnit, 1);
  long failed = 0;
  for (long n = 1;; ++n) {
    SCOPED_TRACE("allocation " + std::to_string(n) + " of the discard failing");
    PageStoreOptions o;
    o.num_pages = 64;
    o.unit_pages = kUnit;
    auto made = PageStore::Create(o);
    ASSERT_TRUE(made.has_value()) << made.error().ToString();
    PageStore& store = **made;
    ASSERT_OK(store.StoreBatch(0, pages));
    ASSERT_EQ(store.Stats().units, 1u);
    bool fired = false;
    // A fresh thread: its unit cache and buffers are made on first use.
    OnThreadWithin30s("the discards", [&] {
      ASSERT_OK(store.Discard(0));
      ASSERT_OK(store.Discard(1));
      testing::FailNthAllocation(n);
      try {
        store.Discard(2).IgnoreError();
      } catch (const std::bad_alloc&) {
      }
      fired = testing::AllocationFailed();
      testing::FailNthAllocation(0);
    });
    // The last page reads as stored, on this thread and a new one.
    OnThreadWithin30s("loading page 3", [&] {
      std::vector<std::byte> out(kPageSize);
      ASSERT_OK(store.Load(3, MutablePage(out.data(), kPageSize)));
      EXPECT_EQ(
          std::memcmp(out.data(), pages.data() + 3 * kPageSize, kPageSize), 0);
      // And the run takes a new unit.
      ASSERT_OK(store.StoreBatch(0, Pages(kUnit, 2)));
      ASSERT_OK(store.Load(2, MutablePage(out.data(), kPageSize)));
      EXPECT_EQ(std::memcmp(out.data(), Pages(kUnit, 2).data() + 2 * kPageSize,
                            kPageSize),
                0);
    });
    failed += fired;
    if (!fired || ::testing::Test::HasFailure()) break;
    ASSERT_LT(n, 10000) << "a discard that never ends allocating";
  }
  EXPECT_GT(failed, 0);
  std::printf("each of %ld allocations failed in turn\n", failed);
}

// A batch of units and single pages installs its parts one after another;
// one that throws (a thread's first unit buffers or pending list) leaves the
// range as a failed batch does (page_store.h): empty, no page new while
// another is old, and no old page left to be read later. Also without
// units, where the thread's first batch store makes its pending list.
TEST(StoreOomTest, ABatchThatThrowsLeavesNoOldPage) {
  const std::vector<std::byte> old_pages = Pages(12, 1);
  const std::vector<std::byte> new_pages = Pages(12, 2);
  struct Range {
    std::uint64_t first;
    std::size_t count;
    std::size_t unit_pages;
  };
  // Single pages, then a unit; a unit, then a single page; single pages.
  for (const Range r :
       {Range{2, 6, kUnit}, Range{0, 5, kUnit}, Range{0, 8, 0}}) {
    SCOPED_TRACE(::testing::Message()
                 << "StoreBatch(" << r.first << ", " << r.count
                 << " pages), units of " << r.unit_pages);
    int threw = 0;
    for (long n = 1;; ++n) {
      auto made =
          PageStore::Create({.num_pages = 64, .unit_pages = r.unit_pages});
      ASSERT_TRUE(made.has_value());
      PageStore& store = **made;
      ASSERT_OK(store.StoreBatch(0, old_pages));
      bool failed = false;
      bool thrown = false;
      OnThreadWithin30s("a batch store out of memory", [&] {
        testing::FailNthAllocation(n);
        try {
          store
              .StoreBatch(r.first, std::span<const std::byte>(
                                       new_pages.data() + r.first * kPageSize,
                                       r.count * kPageSize))
              .IgnoreError();
        } catch (const std::bad_alloc&) {
          thrown = true;
        }
        failed = testing::AllocationFailed();
        testing::FailNthAllocation(0);
      });
      if (!failed) break;  // every allocation of the call has failed once
      if (!thrown) continue;
      ++threw;
      std::size_t olds = 0, news = 0;
      std::vector<std::byte> out(kPageSize);
      for (std::uint64_t i = r.first; i < r.first + r.count; ++i) {
        ASSERT_OK(store.Load(i, MutablePage(out.data(), kPageSize)));
        olds += std::memcmp(out.data(), old_pages.data() + i * kPageSize,
                            kPageSize) == 0;
        news += std::memcmp(out.data(), new_pages.data() + i * kPageSize,
                            kPageSize) == 0;
      }
      EXPECT_EQ(olds, 0u) << "allocation " << n << " left " << news
                          << " new and " << olds << " old pages";
    }
    EXPECT_GT(threw, 0);
  }
}

// A training that runs out of memory while it moves the idle streams to
// the current dictionary leaves every stream free: each one it took is
// given back, and one whose compressor cannot be made keeps its old one.
TEST(StoreOomTest, ATrainingOutOfMemoryLeavesNoStreamTaken) {
  constexpr std::size_t kPages = 1024;  // enough samples to train from
  auto made =
      PageStore::Create({.num_pages = kPages, .codec = "zstd", .streams = 1});
  ASSERT_TRUE(made.has_value()) << made.error().ToString();
  PageStore& store = **made;
  const corpus::PageSet& corpus = testing::TestCorpus("anon-python");
  for (std::size_t i = 0; i < kPages; ++i) {
    ASSERT_OK(store.Store(i, corpus.page(i % corpus.size())));
  }
  internal::StreamPool& streams = PageStoreTestPeer::Streams(store);
  const auto idle = [&streams] {
    std::size_t n = 0;
    streams.VisitIdle([&n](internal::Stream&) { ++n; });
    return n;
  };
  const std::size_t all = streams.count() + streams.reserve_count();
  for (long n = 1;; ++n) {
    // Every stream one dictionary behind, so that a training refreshes it.
    ASSERT_TRUE(store.TrainDictionary({.dict_bytes = 4096}).has_value());
    ASSERT_EQ(idle(), all);
    bool failed = false;
    OnThreadWithin30s("a training out of memory", [&] {
      testing::FailNthAllocation(n);
      try {
        (void)store.TrainDictionary({.dict_bytes = 4096});
      } catch (const std::bad_alloc&) {
      }
      failed = testing::AllocationFailed();
      testing::FailNthAllocation(0);
    });
    EXPECT_EQ(idle(), all) << "allocation " << n << " left streams taken";
    // The streams' compressors are made first; the sampling and training
    // after them allocate much more, and take no stream.
    if (!failed || n == 8) break;
  }
  // Stores take a stream, and do not wait for one.
  OnThreadWithin30s("a store after the trainings",
                    [&] { EXPECT_OK(store.Store(0, corpus.page(1))); });
}

// A reclaim that runs out of memory (std::bad_alloc) is retried as one the
// pool refuses is (units.cc, ReclaimPass): the unit goes back on the queue
// and the next call that returns reclaims it, though that call frees no
// page of the unit (not left to the unit's next free, which may never
// come: the whole object would stay for its last pages). The discard that
// ran it still succeeds: it freed its page.
TEST(StoreOomTest, AUnitWhoseReclaimFailedIsReclaimedByTheNextCall) {
  constexpr std::size_t kUnit8 = 8;
  const std::vector<std::byte> pages = Pages(kUnit8, 4);
  long failed = 0, retried = 0;
  for (long n = 1;; ++n) {
    SCOPED_TRACE("allocation " + std::to_string(n) + " of the discard failing");
    PageStoreOptions o;
    o.num_pages = 64;
    o.unit_pages = kUnit8;
    auto made = PageStore::Create(o);
    ASSERT_TRUE(made.has_value()) << made.error().ToString();
    PageStore& store = **made;
    ASSERT_OK(store.StoreBatch(0, pages));
    bool fired = false;
    std::size_t units_after_failure = 0;
    OnThreadWithin30s("the discards", [&] {
      for (std::uint64_t i = 0; i < 4; ++i) ASSERT_OK(store.Discard(i));
      // The fifth leaves 3 of 8 pages: the unit is queued and reclaimed.
      testing::FailNthAllocation(n);
      Status st = Status::Ok();
      try {
        st = store.Discard(4);
      } catch (const std::bad_alloc&) {
        ADD_FAILURE() << "the discard threw for its reclaim";
      }
      fired = testing::AllocationFailed();
      testing::FailNthAllocation(0);
      EXPECT_OK(st);
      units_after_failure = store.Stats().units;
      // A call that frees nothing of the unit (an empty slot of another
      // run) reclaims it.
      ASSERT_OK(store.Discard(63));
    });
    failed += fired;
    if (units_after_failure == 1) {
      ++retried;
      EXPECT_EQ(store.Stats().units, 0u)
          << "the failed reclaim was not retried by the next call";
    }
    std::vector<std::byte> out(kPageSize);
    for (std::uint64_t i = 5; i < kUnit8; ++i) {
      ASSERT_OK(store.Load(i, MutablePage(out.data(), kPageSize)));
      ASSERT_EQ(
          std::memcmp(out.data(), pages.data() + i * kPageSize, kPageSize), 0);
    }
    if (!fired || ::testing::Test::HasFailure()) break;
    ASSERT_LT(n, 10000);
  }
  EXPECT_GT(failed, 0);
  EXPECT_GT(retried, 0) << "no reclaim failed";
  std::printf("%ld of %ld failed allocations left the unit to the next call\n",
              retried, failed);
}

// A unit given up for a page that does not compress alone is retried after
// a TrainDictionary (units.cc, RetryPoorUnits). A retry whose stream could
// not take up the new dictionary (its compressor out of memory: the stream
// keeps the old one, RefreshStream) tried the page with the old dictionary
// only: that is no verdict on the new one, and the unit must be tried again
// by a later call, as a reclaim out of memory is, not given up until the
// next training.
TEST(StoreOomTest, ARetryThatCouldNotTakeTheNewDictionaryIsTriedAgain) {
  constexpr std::size_t kUnit16 = 16, kRuns = 24;
  PageStoreOptions o;
  o.codec = "zstd";
  o.store_incompressible = false;
  o.num_pages = kRuns * kUnit16 + kUnit16;
  o.unit_pages = kUnit16;
  auto made = PageStore::Create(o);
  ASSERT_TRUE(made.has_value()) << made.error().ToString();
  PageStore& store = **made;
  std::vector<std::byte> noise(kPageSize);
  std::mt19937_64 rng(5);
  for (std::size_t i = 0; i < kPageSize; i += 8) {
    const std::uint64_t x = rng();
    std::memcpy(noise.data() + i, &x, 8);
  }
  std::vector<std::byte> run0;
  for (std::size_t r = 0; r < kRuns; ++r) {
    std::vector<std::byte> data(kUnit16 * kPageSize);
    static const char kText[] = "the quick brown fox jumps over the lazy dog ";
    for (std::size_t b = 0; b < data.size(); ++b) {
      data[b] = static_cast<std::byte>(
          kText[(b / 7 + r * 16 + b / kPageSize) % (sizeof(kText) - 1)]);
    }
    std::memcpy(data.data() + 13 * kPageSize, noise.data(), kPageSize);
    std::memcpy(data.data() + 14 * kPageSize, noise.data(), kPageSize);
    ASSERT_OK(store.StoreBatch(r * kUnit16, data));
    if (r == 0) run0 = data;
  }
  const std::uint64_t empty = kRuns * kUnit16 + kUnit16 - 1;
  OnThreadWithin30s("the calls", [&] {
    // Unit 0 below half: page 13 does not compress alone, it stays whole.
    for (std::size_t i = 0; i < 9; ++i) ASSERT_OK(store.Discard(i));
    ASSERT_EQ(store.Stats().units, kRuns);
    auto info = store.TrainDictionary({.dict_bytes = 16 * 1024});
    ASSERT_TRUE(info.has_value()) << info.error().ToString();
    // The retry, with no memory for the new dictionary's compressor.
    testing::FailEveryAllocation(true);
    Status st = Status::Ok();
    try {
      st = store.Discard(empty);
    } catch (const std::bad_alloc&) {
      ADD_FAILURE() << "the discard threw for its reclaim";
    }
    testing::FailEveryAllocation(false);
    ASSERT_OK(st);
    // Memory again: the next call tries it with the new dictionary.
    ASSERT_OK(store.Discard(empty));
  });
  EXPECT_EQ(store.Stats().units, kRuns - 1)
      << "the unit tried with the old dictionary was given up";
  std::vector<std::byte> out(kPageSize);
  for (std::size_t i = 9; i < kUnit16; ++i) {
    ASSERT_OK(store.Load(i, MutablePage(out.data(), kPageSize)));
    ASSERT_EQ(std::memcmp(out.data(), run0.data() + i * kPageSize, kPageSize),
              0);
  }
}

// Each allocation of a writeback pass (pages, then units) fails in turn,
// with a budget. Its candidates are left to the next pass, and its blocks
// and budget go back: after a second pass, the backing store holds as many
// blocks as when nothing failed (blocks of IOs in flight used to stay
// allocated until a reset, and a device that ran out of memory often
// enough found its store full), and the budget is charged that many pages.
// With every write failing (EIO) too, no block and no budget stay taken
// (an IO whose error could not be copied for its report was left out).
void WritebackOutOfMemory(bool writes_fail) {
  constexpr std::size_t kPages = 256;  // 64 pages in units of 4, then 192
  constexpr std::uint64_t kBudget = 100000;
  const std::vector<std::byte> pages = Pages(kPages, 3);
  const auto make = [&](const testing::ScopedTempDir& dir) {
    BackingOptions bo;
    bo.path = dir.File("backing");
    bo.size_bytes = 2 * kPages * kPageSize;
    if (writes_fail) {
      bo.wrap_file = testing::FaultyFile([](const FileIo& io, long result) {
        return io.kind == FileIo::Kind::kWrite ? -EIO : result;
      });
    }
    auto b = BackingStore::Open(bo);
    EXPECT_TRUE(b.has_value()) << b.error().ToString();
    PageStoreOptions o;
    o.num_pages = kPages;
    o.unit_pages = kUnit;
    o.backing = b.has_value() ? std::move(*b) : nullptr;
    auto made = PageStore::Create(o);
    EXPECT_TRUE(made.has_value()) << made.error().ToString();
    if (!made.has_value()) return std::unique_ptr<PageStore>();
    PageStore& store = **made;
    EXPECT_OK(store.StoreBatch(0, std::span(pages).first(64 * kPageSize)));
    for (std::size_t i = 64; i < kPages; ++i) {
      EXPECT_OK(
          store.Store(i, ConstPage(pages.data() + i * kPageSize, kPageSize)));
    }
    return std::move(*made);
  };
  WritebackBudget budget;
  WritebackRequest r;
  r.scans.push_back({0, 0, kPages});
  r.in_flight = 2;
  r.max_io_pages = 8;
  r.budget = &budget;
  const auto arm = [&] {
    budget.enabled = true;
    budget.pages = kBudget;
  };
  std::uint64_t blocks = 0;  // in use once every page is written back
  if (!writes_fail) {
    testing::ScopedTempDir dir;
    auto store = make(dir);
    ASSERT_NE(store, nullptr);
    arm();
    ASSERT_TRUE(store->Writeback(r).has_value());
    blocks = store->Stats().bd_count;
    ASSERT_GT(blocks, 0u);
    ASSERT_EQ(kBudget - budget.pages, blocks);
  }
  long failed = 0;
  for (long n = 1;; ++n) {
    SCOPED_TRACE("allocation " + std::to_string(n) + " of the pass failing");
    testing::ScopedTempDir dir;
    auto made = make(dir);
    ASSERT_NE(made, nullptr);
    PageStore& store = *made;
    arm();
    testing::FailNthAllocation(n);
    try {
      (void)store.Writeback(r);
    } catch (const std::bad_alloc&) {
    }
    const bool fired = testing::AllocationFailed();
    testing::FailNthAllocation(0);
    failed += fired;
    // A pass with memory writes every page the first did not (nothing
    // read them meanwhile: a read would clear a stale mark), and every
    // page reads back as stored.
    auto second = store.Writeback(r);
    ASSERT_TRUE(second.has_value()) << second.error().ToString();
    if (!writes_fail) {
      ASSERT_OK(second->status);
      EXPECT_EQ(second->failed, 0u);
    }
    std::size_t on_backing = 0;
    for (std::size_t i = 0; i < kPages; ++i) on_backing += store.Inspect(i).wb;
    EXPECT_EQ(on_backing, writes_fail ? 0 : kPages)
        << "written by the first pass or the second";
    EXPECT_EQ(store.Stats().bd_count, blocks) << "blocks left allocated";
    EXPECT_EQ(kBudget - budget.pages, blocks) << "budget left charged";
    ExpectPages(store, pages);
    if (!fired || ::testing::Test::HasFailure()) break;
    ASSERT_LT(n, 100000) << "a pass that never ends allocating";
  }
  EXPECT_GT(failed, 3);
  std::printf("writeback%s: each of %ld allocations failed in turn\n",
              writes_fail ? " (every write failing)" : "", failed);
}

TEST(StoreOomTest, AWritebackPassOutOfMemoryLeavesEveryPageToTheNext) {
  WritebackOutOfMemory(/*writes_fail=*/false);
}

TEST(StoreOomTest, AWritebackPassOutOfMemoryWhoseWritesFailKeepsNoBlock) {
  WritebackOutOfMemory(/*writes_fail=*/true);
}

// A file whose writer's first waiting Reap after an allocation failed
// returns nothing, with writes still in flight: what the io_uring writer
// does when io_uring_wait_cqe fails (EAGAIN, ENOMEM), as it may when memory
// runs out.
class StallingWriter final : public BackingFileWriter {
 public:
  explicit StallingWriter(std::unique_ptr<BackingFileWriter> base)
      : base_(std::move(base)) {}
  std::byte* buffer(std::size_t io) override { return base_->buffer(io); }
  void Queue(std::size_t io, std::uint64_t offset, std::size_t len) override {
    base_->Queue(io, offset, len);
  }
  std::size_t Reap(
      bool wait, const std::function<void(std::size_t, long)>& done) override {
    if (wait && !stalled_ && testing::AllocationFailed()) {
      stalled_ = true;
      return 0;
    }
    return base_->Reap(wait, done);
  }

 private:
  std::unique_ptr<BackingFileWriter> base_;
  bool stalled_ = false;
};

class StallingFile final : public BackingFile {
 public:
  explicit StallingFile(std::shared_ptr<BackingFile> base)
      : base_(std::move(base)) {}
  const std::string& name() const override { return base_->name(); }
  std::uint64_t size() const override { return base_->size(); }
  bool direct() const override { return base_->direct(); }
  long Read(std::uint64_t offset, std::span<std::byte> out) override {
    return base_->Read(offset, out);
  }
  Result<std::unique_ptr<BackingFileWriter>> NewWriter(
      std::size_t ios, std::size_t io_bytes) override {
    ZT_ASSIGN_OR_RETURN(std::unique_ptr<BackingFileWriter> w,
                        base_->NewWriter(ios, io_bytes));
    return std::unique_ptr<BackingFileWriter>(
        std::make_unique<StallingWriter>(std::move(w)));
  }

 private:
  std::shared_ptr<BackingFile> base_;
};

// Each allocation of a writeback pass fails in turn, and the writer's reap
// then stalls once with writes in flight. A stalled reap is no end of the
// writes: the pass reaps again, and every block goes back (those of the
// writes in flight used to stay allocated for good, up to the 16 pages of
// the two IOs); none is freed twice (the pages' pass used to reap the
// units' IOs as its own and free their blocks again, which the block
// bitmap counts below zero), and a second pass writes every page back.
TEST(StoreOomTest, AWritebackPassOutOfMemoryWhoseReapStallsFreesNoBlockTwice) {
  constexpr std::size_t kPages = 256;  // 64 pages in units of 4, then 192
  const std::vector<std::byte> pages = Pages(kPages, 5);
  long stalled = 0;
  std::uint64_t blocks = 0;  // in use after a pass with memory
  for (long n = 0;; ++n) {
    SCOPED_TRACE("allocation " + std::to_string(n) + " of the pass failing");
    testing::ScopedTempDir dir;
    BackingOptions bo;
    bo.path = dir.File("backing");
    bo.size_bytes = 4 * kPages * kPageSize;
    bo.wrap_file = [](std::shared_ptr<BackingFile> file) {
      return std::shared_ptr<BackingFile>(
          std::make_shared<StallingFile>(std::move(file)));
    };
    auto b = BackingStore::Open(bo);
    ASSERT_TRUE(b.has_value()) << b.error().ToString();
    PageStoreOptions o;
    o.num_pages = kPages;
    o.unit_pages = kUnit;
    o.backing = std::move(*b);
    auto made = PageStore::Create(o);
    ASSERT_TRUE(made.has_value()) << made.error().ToString();
    PageStore& store = **made;
    ASSERT_OK(store.StoreBatch(0, std::span(pages).first(64 * kPageSize)));
    for (std::size_t i = 64; i < kPages; ++i) {
      ASSERT_OK(
          store.Store(i, ConstPage(pages.data() + i * kPageSize, kPageSize)));
    }
    WritebackRequest r;
    r.scans.push_back({0, 0, kPages});
    r.in_flight = 2;
    r.max_io_pages = 8;
    testing::FailNthAllocation(n);  // 0: none, the pass that counts blocks
    try {
      (void)store.Writeback(r);
    } catch (const std::bad_alloc&) {
    }
    const bool fired = testing::AllocationFailed();
    testing::FailNthAllocation(0);
    stalled += fired;
    auto second = store.Writeback(r);
    ASSERT_TRUE(second.has_value()) << second.error().ToString();
    ASSERT_OK(second->status);
    std::size_t on_backing = 0;
    for (std::size_t i = 0; i < kPages; ++i) on_backing += store.Inspect(i).wb;
    EXPECT_EQ(on_backing, kPages);
    ExpectPages(store, pages);
    if (n == 0) blocks = store.Stats().bd_count;
    EXPECT_EQ(store.Stats().bd_count, blocks) << "blocks left allocated";
    if ((n > 0 && !fired) || ::testing::Test::HasFailure()) break;
    ASSERT_LT(n, 100000) << "a pass that never ends allocating";
  }
  EXPECT_GT(stalled, 3);
}

TEST(StoreOomTest, ARecompressionPassOutOfMemoryLeavesNothingBehind) {
  constexpr std::size_t kPages = 64;
  const std::vector<std::byte> pages = Pages(kPages, 5);
  const auto make = [&] {
    PageStoreOptions o;
    o.num_pages = kPages;
    o.codec = "lz4";
    o.recomp[0].codec = "zstd";
    o.recomp[1].codec = "deflate";
    auto made = PageStore::Create(o);
    EXPECT_TRUE(made.has_value()) << made.error().ToString();
    for (std::size_t i = 0; made.has_value() && i < kPages; ++i) {
      EXPECT_OK((*made)->Store(
          i, ConstPage(pages.data() + i * kPageSize, kPageSize)));
    }
    return made.has_value() ? std::move(*made) : nullptr;
  };
  // What the pool keeps with no object left (its metadata), after the
  // same work with memory.
  std::uint64_t emptied = 0;
  {
    auto store = make();
    ASSERT_NE(store, nullptr);
    ASSERT_TRUE(store->Recompress({}).has_value());
    for (std::size_t i = 0; i < kPages; ++i) ASSERT_OK(store->Discard(i));
    store->Compact();
    emptied = store->Stats().mem_used_total;
  }
  long failed = 0;
  for (long n = 1;; ++n) {
    SCOPED_TRACE("allocation " + std::to_string(n) + " of the pass failing");
    auto made = make();
    ASSERT_NE(made, nullptr);
    PageStore& store = *made;
    testing::FailNthAllocation(n);
    try {
      (void)store.Recompress({});
    } catch (const std::bad_alloc&) {
    }
    const bool fired = testing::AllocationFailed();
    testing::FailNthAllocation(0);
    failed += fired;
    // Nothing read the pages: a pass with memory finds every page the
    // first did not recompress (at priority 1 or 2 now, or not).
    auto second = store.Recompress({});
    ASSERT_TRUE(second.has_value()) << second.error().ToString();
    const PageStoreStats st = store.Stats();
    EXPECT_EQ(
        st.priority_pages[1] + st.priority_pages[2] + st.incompressible_pages,
        kPages)
        << "recompressed by the first pass or the second";
    ExpectPages(store, pages);
    for (std::size_t i = 0; i < kPages; ++i) ASSERT_OK(store.Discard(i));
    store.Compact();
    EXPECT_LE(store.Stats().mem_used_total, emptied)
        << "objects left in the pool";
    if (!fired || ::testing::Test::HasFailure()) break;
    ASSERT_LT(n, 100000) << "a pass that never ends allocating";
  }
  EXPECT_GT(failed, 3);
  std::printf("recompress: each of %ld allocations failed in turn\n", failed);
}

TEST(StoreOomTest, ABatchedLoadOutOfMemoryOnTheParallelBackend) {
  constexpr std::size_t kPages = 64;
  const std::vector<std::byte> pages = Pages(kPages, 7);
  PageStoreOptions o;
  o.num_pages = kPages;
  o.batch_backend = BatchBackend::kParallel;
  o.parallel_workers = 3;
  auto made = PageStore::Create(o);
  ASSERT_TRUE(made.has_value()) << made.error().ToString();
  PageStore& store = **made;
  ASSERT_OK(store.StoreBatch(0, pages));
  long failed = 0;
  for (long n = 1;; ++n) {
    SCOPED_TRACE("allocation " + std::to_string(n) + " of the load failing");
    bool fired = false;
    OnThreadWithin30s("a batched load", [&] {
      std::vector<std::byte> out(pages.size());
      testing::FailNthAllocation(n);
      try {
        (void)store.LoadBatch(0, out, {});
      } catch (const std::bad_alloc&) {
      }
      fired = testing::AllocationFailed();
      testing::FailNthAllocation(0);
    });
    failed += fired;
    ExpectPages(store, pages);
    if (!fired || ::testing::Test::HasFailure()) break;
    ASSERT_LT(n, 10000) << "a load that never ends allocating";
  }
  EXPECT_GT(failed, 0);
  std::printf("batched load: each of %ld allocations failed in turn\n", failed);
}

}  // namespace
}  // namespace ztier
