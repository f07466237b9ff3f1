// writeback_test.cc: PageStore::Writeback and reads of written-back slots,
// on a real backing file with real io_uring. Faults come from the backing
// store's fault hook acting on real IO results.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <future>
#include <random>
#include <thread>
#include <vector>

#include "testing/discarding_file.h"
#include "testing/faulty_file.h"
#include "testing/test_util.h"
#include "ztier/backing_store.h"
#include "ztier/page_store.h"

namespace ztier {
namespace {

using Page = std::array<std::byte, kPageSize>;
using testing::ScopedTempDir;

// Page `i` at `version`: a header naming both, then `noise` random bytes
// (more noise: a larger compressed size), then text. noise >= ~3400 makes a
// HUGE page.
Page MakePage(std::uint64_t i, std::uint64_t version, std::size_t noise) {
  Page p;
  std::memcpy(&p[0], &i, 8);
  std::memcpy(&p[8], &version, 8);
  std::mt19937_64 rng(i * 1000003 + version);
  std::size_t at = 16;
  for (; at < 16 + noise && at < kPageSize; ++at) {
    p[at] = static_cast<std::byte>(rng());
  }
  static const char kText[] = "the quick brown fox jumps over the lazy dog ";
  for (std::size_t k = 0; at < kPageSize; ++at, ++k) {
    p[at] = static_cast<std::byte>(kText[k % (sizeof(kText) - 1)]);
  }
  return p;
}

// Noise for slot i: sizes spread over the whole range, some HUGE.
std::size_t NoiseFor(std::uint64_t i) { return (i * 7919) % 4000; }

struct Fixture {
  ScopedTempDir dir;
  std::shared_ptr<BackingStore> backing;
  std::unique_ptr<PageStore> store;

  explicit Fixture(std::size_t pages, BackingOptions bo = {},
                   std::size_t backing_pages = 0) {
    bo.path = dir.File("backing");
    bo.size_bytes = (backing_pages != 0 ? backing_pages : pages) * kPageSize;
    auto b = BackingStore::Open(bo);
    EXPECT_TRUE(b.has_value()) << b.error().ToString();
    backing = std::move(*b);
    PageStoreOptions o;
    o.num_pages = pages;
    o.backing = backing;
    auto s = PageStore::Create(o);
    EXPECT_TRUE(s.has_value()) << s.error().ToString();
    store = std::move(*s);
  }

  void Fill(std::size_t pages, std::uint64_t version = 0) {
    for (std::size_t i = 0; i < pages; ++i) {
      const Page p = MakePage(i, version, NoiseFor(i));
      ASSERT_OK(store->Store(i, ConstPage(p)));
    }
  }

  void ExpectAll(std::size_t pages, std::uint64_t version = 0) {
    Page out;
    for (std::size_t i = 0; i < pages; ++i) {
      ASSERT_OK(store->Load(i, MutablePage(out)));
      const Page want = MakePage(i, version, NoiseFor(i));
      ASSERT_EQ(0, std::memcmp(out.data(), want.data(), kPageSize))
          << "slot " << i;
    }
  }

  WritebackResult Writeback(unsigned filter, bool compressed = false,
                            WritebackBudget* budget = nullptr) {
    WritebackRequest r;
    r.scans.push_back({filter, 0, store->num_pages()});
    r.compressed = compressed;
    r.budget = budget;
    auto res = store->Writeback(r);
    EXPECT_TRUE(res.has_value()) << res.error().ToString();
    return res.has_value() ? std::move(*res) : WritebackResult{};
  }
};

TEST(WritebackTest, WithoutBackingStoreIsNotFound) {
  PageStoreOptions o;
  o.num_pages = 4;
  auto s = PageStore::Create(o);
  ASSERT_TRUE(s.has_value());
  WritebackRequest r;
  r.scans.push_back({0, 0, 4});
  EXPECT_EQ((*s)->Writeback(r).error().code(), StatusCode::kNotFound);
}

TEST(WritebackTest, ScanPastTheEndIsOutOfRange) {
  Fixture f(8);
  WritebackRequest r;
  r.scans.push_back({0, 0, 9});
  EXPECT_EQ(f.store->Writeback(r).error().code(), StatusCode::kOutOfRange);
}

TEST(WritebackTest, IdlePagesGoToTheBackingStoreAndReadBack) {
  constexpr std::size_t kPages = 600;
  Fixture f(kPages);
  f.Fill(kPages);
  const Page zero{};
  ASSERT_OK(f.store->Store(kPages - 1, ConstPage(zero)));  // SAME: skipped
  const PageStoreStats before = f.store->Stats();
  ASSERT_GT(before.mem_used_total, 0u);

  // Nothing is idle yet: an idle writeback picks nothing.
  EXPECT_EQ(f.Writeback(kWritebackIdle).candidates, 0u);

  f.store->MarkIdleAll();
  const WritebackResult r = f.Writeback(kWritebackIdle);
  EXPECT_OK(r.status);
  EXPECT_EQ(r.candidates, kPages - 1);
  EXPECT_EQ(r.written, kPages - 1);
  EXPECT_EQ(r.changed + r.failed, 0u);

  const PageStoreStats after = f.store->Stats();
  EXPECT_EQ(after.bd_count, kPages - 1);
  EXPECT_EQ(after.bd_writes, kPages - 1);
  EXPECT_EQ(after.orig_data_size, before.orig_data_size);
  EXPECT_EQ(after.compr_data_size, 0u);
  EXPECT_EQ(after.huge_pages, 0u);
  EXPECT_LT(after.mem_used_total, before.mem_used_total / 4)
      << before.mem_used_total << " before, " << after.mem_used_total
      << " after (" << f.store->pool().Stats().metadata_bytes << " metadata)";
  EXPECT_EQ(f.store->FormatBdStat(), "     599        0      599\n");
  EXPECT_TRUE(f.store->Inspect(0).wb);
  EXPECT_FALSE(f.store->Inspect(0).idle);

  // Read back (the last slot is the zero page).
  Page out;
  for (std::size_t i = 0; i + 1 < kPages; ++i) {
    ASSERT_OK(f.store->Load(i, MutablePage(out)));
    const Page want = MakePage(i, 0, NoiseFor(i));
    ASSERT_EQ(0, std::memcmp(out.data(), want.data(), kPageSize)) << i;
  }
  EXPECT_EQ(f.store->Stats().bd_reads, kPages - 1);
  // The data stays on the backing store after a read.
  EXPECT_TRUE(f.store->Inspect(3).wb);
  EXPECT_EQ(f.store->Stats().bd_count, kPages - 1);

  // A second writeback finds nothing left to write.
  f.store->MarkIdleAll();
  EXPECT_EQ(f.Writeback(0).candidates, 0u);
}

TEST(WritebackTest, OverwriteAndDiscardReleaseTheBlock) {
  Fixture f(16);
  f.Fill(16);
  f.Writeback(0);
  ASSERT_EQ(f.store->Stats().bd_count, 16u);
  const Page p = MakePage(3, 9, 100);
  ASSERT_OK(f.store->Store(3, ConstPage(p)));
  ASSERT_OK(f.store->Discard(4));
  const char part[] = "patched";
  ASSERT_OK(f.store->StorePartial(5, 100, std::as_bytes(std::span(part))));
  EXPECT_EQ(f.store->Stats().bd_count, 13u);
  EXPECT_FALSE(f.store->Inspect(3).wb);
  EXPECT_FALSE(f.store->Inspect(4).allocated);
  Page out;
  ASSERT_OK(f.store->Load(3, MutablePage(out)));
  EXPECT_EQ(0, std::memcmp(out.data(), p.data(), kPageSize));
  ASSERT_OK(f.store->Load(5, MutablePage(out)));
  Page want = MakePage(5, 0, NoiseFor(5));
  std::memcpy(want.data() + 100, part, sizeof(part));
  EXPECT_EQ(0, std::memcmp(out.data(), want.data(), kPageSize));
  f.store.reset();  // the store gives every remaining block back
  EXPECT_EQ(f.backing->blocks_used(), 0u);
}

TEST(WritebackTest, CompressedWritebackKeepsTheObjectAndDecompressesOnRead) {
  constexpr std::size_t kPages = 300;
  Fixture f(kPages);
  f.Fill(kPages);
  const WritebackResult r = f.Writeback(0, /*compressed=*/true);
  EXPECT_OK(r.status);
  EXPECT_EQ(r.written, kPages);
  // A compressible slot keeps its compressed size; a HUGE one was raw.
  const SlotInfo small = f.store->Inspect(0);  // noise 0
  EXPECT_TRUE(small.wb);
  EXPECT_GT(small.size, 0u);
  EXPECT_LT(small.size, 400u);
  f.ExpectAll(kPages);
}

TEST(WritebackTest, FiltersPickHugeOrIdleOrARange) {
  constexpr std::size_t kPages = 200;
  Fixture f(kPages);
  f.Fill(kPages);
  std::vector<bool> was_huge(kPages);
  std::size_t huge = 0;
  for (std::size_t i = 0; i < kPages; ++i) {
    was_huge[i] = f.store->Inspect(i).huge;
    huge += was_huge[i];
  }
  ASSERT_GT(huge, 0u);
  ASSERT_LT(huge, kPages);
  EXPECT_EQ(f.Writeback(kWritebackHuge).written, huge);
  for (std::size_t i = 0; i < kPages; ++i) {
    EXPECT_EQ(f.store->Inspect(i).wb, was_huge[i]) << i;
  }
  // huge_idle: nothing huge is left in RAM.
  f.store->MarkIdleAll();
  EXPECT_EQ(f.Writeback(kWritebackIdle | kWritebackHuge).candidates, 0u);
  // A range.
  WritebackRequest r;
  r.scans.push_back({0, 10, 20});
  auto res = f.store->Writeback(r);
  ASSERT_TRUE(res.has_value());
  for (std::size_t i = 10; i < 20; ++i) {
    EXPECT_TRUE(f.store->Inspect(i).wb) << i;
  }
  f.ExpectAll(kPages);
}

TEST(WritebackTest, LargestFirstUnderABudget) {
  constexpr std::size_t kPages = 256;
  Fixture f(kPages);
  f.Fill(kPages);
  std::vector<std::size_t> sizes;
  for (std::size_t i = 0; i < kPages; ++i) {
    sizes.push_back(f.store->Inspect(i).size);
  }
  WritebackBudget budget;
  budget.enabled = true;
  budget.pages = 20;
  const WritebackResult r = f.Writeback(0, false, &budget);
  EXPECT_EQ(r.written, 20u);
  EXPECT_EQ(budget.pages.load(), 0u);
  EXPECT_EQ(r.status.code(), StatusCode::kIoError);  // zram's EIO
  // Every written slot is at least as large, to the 64-byte bucket, as
  // every slot kept in RAM.
  std::size_t min_written = kPageSize, max_kept = 0;
  for (std::size_t i = 0; i < kPages; ++i) {
    const SlotInfo s = f.store->Inspect(i);
    EXPECT_FALSE(s.pp) << i;
    if (s.wb) {  // NOLINT
      min_written = std::min(min_written, sizes[i]);
    } else {
      max_kept = std::max(max_kept, sizes[i]);
    }
  }
  EXPECT_GE(min_written / 64, max_kept / 64);
  f.ExpectAll(kPages);
}

// The limit test of the zram writeback batching series, at the store level:
// 1002 pages of budget, 10 MiB.
TEST(WritebackTest, LimitWritesExactlyTheBudget) {
  constexpr std::size_t kPages = 2560;
  Fixture f(kPages);
  f.Fill(kPages);
  f.store->MarkIdleAll();
  WritebackBudget budget;
  budget.enabled = true;
  budget.pages = 1002;
  f.Writeback(kWritebackIdle, false, &budget);
  EXPECT_EQ(f.store->Stats().bd_writes, 1002u);
  EXPECT_EQ(f.store->Stats().bd_count, 1002u);
  EXPECT_EQ(budget.pages.load(), 0u);
  f.ExpectAll(kPages);
}

// Faults: each keeps every page in RAM, refunds the budget and reports.
struct FaultCase {
  long result;  // what the hook turns the first write into
  StatusCode want;
};

class WritebackFaultTest : public ::testing::TestWithParam<FaultCase> {};

TEST_P(WritebackFaultTest, LosesNothing) {
  constexpr std::size_t kPages = 200;
  std::atomic<int> writes{0};
  const FaultCase c = GetParam();
  BackingOptions bo;
  bo.wrap_file = testing::FaultyFile([&](const FileIo& io, long result) -> long {
    if (io.kind != FileIo::Kind::kWrite) return result;
    if (writes.fetch_add(1) != 1) return result;  // the second IO fails
    return c.result == 1 ? result - static_cast<long>(kPageSize) : c.result;
  });
  Fixture f(kPages, bo);
  f.Fill(kPages);
  WritebackBudget budget;
  budget.enabled = true;
  budget.pages = 1000;
  const WritebackResult r = f.Writeback(0, false, &budget);
  EXPECT_EQ(r.status.code(), c.want) << r.status.ToString();
  EXPECT_GT(r.failed, 0u);
  EXPECT_EQ(budget.pages.load(), 1000 - r.written);
  EXPECT_EQ(f.store->Stats().bd_count, r.written);
  std::size_t wb = 0;
  for (std::size_t i = 0; i < kPages; ++i) {
    wb += f.store->Inspect(i).wb;
    EXPECT_FALSE(f.store->Inspect(i).pp);
  }
  EXPECT_EQ(wb, r.written);
  f.ExpectAll(kPages);
  // The pages that failed can be written back later.
  const WritebackResult again = f.Writeback(0);
  EXPECT_OK(again.status);
  EXPECT_EQ(again.written + r.written, kPages);
  f.ExpectAll(kPages);
}

INSTANTIATE_TEST_SUITE_P(
    Faults, WritebackFaultTest,
    ::testing::Values(FaultCase{-EIO, StatusCode::kIoError},
                      FaultCase{-ENOSPC, StatusCode::kResourceExhausted},
                      FaultCase{1, StatusCode::kIoError}));  // short write

// A write that timed out (a remote given up on) may still land: its block
// waits for a discard before it is handed out again. A write the file
// refused outright gives its block back at once.
TEST(WritebackTest, BlocksOfWritesThatMayStillLandWaitForADiscard) {
  constexpr std::size_t kPages = 64;
  for (const long fault : {-ETIMEDOUT, -ENOTCONN, -EIO}) {
    SCOPED_TRACE(fault);
    auto file = std::make_shared<testing::DiscardingFile>(kPages * kPageSize);
    BackingOptions bo{.file = file};
    bo.wrap_file = testing::FaultyFile([&](const FileIo& io, long result) {
      return io.kind == FileIo::Kind::kWrite ? fault : result;
    });
    Fixture f(kPages, bo);
    f.Fill(kPages);
    const WritebackResult r = f.Writeback(0);
    EXPECT_EQ(r.status.code(), StatusCode::kIoError);
    EXPECT_EQ(r.written, 0u);
    EXPECT_EQ(r.failed, kPages);
    EXPECT_EQ(f.store->Stats().bd_count, 0u);
    EXPECT_EQ(f.backing->DiscardFreed(), fault == -EIO ? 0u : kPages);
    EXPECT_EQ(file->calls.empty(), fault == -EIO);
    f.ExpectAll(kPages);
  }
}

TEST(WritebackTest, AFullBackingStoreStopsWithNoSpace) {
  constexpr std::size_t kPages = 100;
  Fixture f(kPages, {}, /*backing_pages=*/40);
  f.Fill(kPages);
  const WritebackResult r = f.Writeback(0);
  EXPECT_EQ(r.status.code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(r.written, 40u);
  for (std::size_t i = 0; i < kPages; ++i) EXPECT_FALSE(f.store->Inspect(i).pp);
  f.ExpectAll(kPages);
}

TEST(WritebackTest, AReadErrorIsAnErrorNotData) {
  std::atomic<bool> fail_reads{false};
  BackingOptions bo;
  bo.wrap_file = testing::FaultyFile([&](const FileIo& io, long result) -> long {
    return io.kind == FileIo::Kind::kRead && fail_reads ? -EIO : result;
  });
  Fixture f(8, bo);
  f.Fill(8);
  f.Writeback(0);
  fail_reads = true;
  Page out;
  EXPECT_EQ(f.store->Load(2, MutablePage(out)).code(), StatusCode::kIoError);
  EXPECT_EQ(f.store->Stats().failed_reads, 1u);
  // A partial write reads the old page first: the read error is its error,
  // counted as a failed write (zram_bvec_write_partial()), and the page
  // stays as it was.
  const std::byte patch[3] = {std::byte{1}, std::byte{2}, std::byte{3}};
  EXPECT_EQ(f.store->StorePartial(3, 100, patch).code(), StatusCode::kIoError);
  EXPECT_EQ(f.store->Stats().failed_writes, 1u);
  EXPECT_EQ(f.store->Stats().failed_reads, 1u);
  EXPECT_TRUE(f.store->Inspect(3).wb);
  fail_reads = false;
  f.ExpectAll(8);
}

TEST(WritebackTest, EncryptedBlocksHideTheDataAndRefuseTampering) {
  constexpr std::size_t kPages = 64;
  BackingOptions bo;
  bo.encrypt = true;
  Fixture f(kPages, bo);
  // Recognisable, barely compressible plaintext: the header of each page.
  f.Fill(kPages);
  f.Writeback(0);
  f.ExpectAll(kPages);
  // No page's text tail appears in the file.
  const std::string path = f.dir.File("backing");
  const int fd = ::open(path.c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  std::vector<char> file(kPages * kPageSize);
  ASSERT_EQ(::pread(fd, file.data(), file.size(), 0),
            static_cast<ssize_t>(file.size()));
  const std::string needle = "the quick brown fox";
  EXPECT_EQ(std::search(file.begin(), file.end(), needle.begin(), needle.end()),
            file.end());
  // Flip one byte of every block: every read is an error, none is data.
  for (std::size_t b = 0; b < kPages; ++b) {
    char c = file[b * kPageSize + 1000] ^ 0x40;
    ASSERT_EQ(::pwrite(fd, &c, 1, b * kPageSize + 1000), 1);
  }
  ::fsync(fd);
  ::close(fd);
  Page out;
  for (std::size_t i = 0; i < kPages; ++i) {
    const Status st = f.store->Load(i, MutablePage(out));
    EXPECT_FALSE(st.ok()) << i;
  }
}

// Loads, stores and discards do not wait for writeback IO: while the first
// IO is held "in flight" (its completion blocked in the fault hook), another
// thread reads, overwrites and discards slots of that very IO.
TEST(WritebackTest, ClientsDoNotWaitForWritebackIo) {
  constexpr std::size_t kPages = 64;
  std::promise<void> clients_done;
  std::shared_future<void> done_future = clients_done.get_future().share();
  std::atomic<int> writes{0};
  std::atomic<bool> clients_finished_in_time{false};
  BackingOptions bo;
  bo.wrap_file = testing::FaultyFile([&](const FileIo& io, long result) -> long {
    if (io.kind == FileIo::Kind::kWrite && writes.fetch_add(1) == 0) {
      clients_finished_in_time =
          done_future.wait_for(std::chrono::seconds(20)) ==
          std::future_status::ready;
    }
    return result;
  });
  Fixture f(kPages, bo);
  f.Fill(kPages);
  WritebackBudget budget;
  budget.enabled = true;
  budget.pages = 1000;
  std::thread wb([&] {
    WritebackRequest r;
    r.scans.push_back({0, 0, kPages});
    r.in_flight = 1;
    r.max_io_pages = kPages;  // one IO holds every slot
    r.budget = &budget;
    auto res = f.store->Writeback(r);
    ASSERT_TRUE(res.has_value());
    EXPECT_OK(res->status);
  });
  // Wait until the IO is submitted: every slot is PP.
  while (writes.load() == 0) std::this_thread::yield();
  Page out;
  // EXPECT, not ASSERT, until wb is joined: it must not be left joinable.
  for (std::size_t i = 0; i < kPages; i += 3) {
    EXPECT_OK(f.store->Load(i, MutablePage(out)));
  }
  const Page p = MakePage(1, 5, 10);
  EXPECT_OK(f.store->Store(1, ConstPage(p)));
  EXPECT_OK(f.store->Discard(2));
  clients_done.set_value();
  wb.join();
  EXPECT_TRUE(clients_finished_in_time);
  // The slots touched during the IO stayed in RAM; the others were written.
  std::size_t written = 0;
  for (std::size_t i = 0; i < kPages; ++i) {
    const bool touched = i % 3 == 0 || i == 1 || i == 2;
    EXPECT_EQ(f.store->Inspect(i).wb, !touched) << i;
    written += !touched;
  }
  ASSERT_OK(f.store->Load(1, MutablePage(out)));
  EXPECT_EQ(0, std::memcmp(out.data(), p.data(), kPageSize));
  EXPECT_EQ(f.store->Stats().bd_count, written);
  // As zram's writeback_store(): every write counts in bd_writes, and only
  // the pages now on the backing store are charged to writeback_limit.
  EXPECT_EQ(f.store->Stats().bd_writes, kPages);
  EXPECT_EQ(budget.pages.load(), 1000 - written);
}

// A load of a written-back page holds its slot lock while it reads the
// backing store, which may take up to the backing store's timeout.
// SlotStates reads that slot's flags without waiting for the lock: the page
// is data.
TEST(WritebackTest, SlotStatesDoNotWaitForABackingRead) {
  std::promise<void> states_done;
  std::shared_future<void> done_future = states_done.get_future().share();
  std::atomic<int> reads{0};
  BackingOptions bo;
  bo.wrap_file =
      testing::FaultyFile([&](const FileIo& io, long result) -> long {
        if (io.kind == FileIo::Kind::kRead && reads.fetch_add(1) == 0) {
          done_future.wait_for(std::chrono::seconds(20));
        }
        return result;
      });
  Fixture f(8, bo);
  f.Fill(4);
  WritebackRequest r;
  r.scans.push_back({0, 0, 2});  // pages 0 and 1
  ASSERT_TRUE(f.store->Writeback(r).has_value());
  ASSERT_TRUE(f.store->Inspect(0).wb);
  std::thread loader([&] {
    Page out;
    EXPECT_OK(f.store->Load(0, MutablePage(out)));
  });
  while (reads.load() == 0) std::this_thread::yield();
  // EXPECT, not ASSERT, until loader is joined.
  auto states = std::async(std::launch::async, [&] {
    std::array<SlotState, 8> out{};
    EXPECT_OK(f.store->SlotStates(0, out));
    return out;
  });
  const bool in_time =
      states.wait_for(std::chrono::seconds(5)) == std::future_status::ready;
  states_done.set_value();
  loader.join();
  EXPECT_TRUE(in_time) << "SlotStates waited for the backing read";
  using S = SlotState;
  EXPECT_EQ(states.get(), (std::array<SlotState, 8>{
                              S::kData, S::kData, S::kData, S::kData, S::kEmpty,
                              S::kEmpty, S::kEmpty, S::kEmpty}));
}

// Races: threads overwrite, discard and read their own slots while passes
// run back to back; every read returns the latest data its thread wrote.
TEST(WritebackTest, RacingClientsAlwaysReadTheLatestData) {
  constexpr std::size_t kPages = 512;
  constexpr int kThreads = 3;
  Fixture f(kPages);
  f.Fill(kPages);
  std::atomic<bool> stop{false};
  std::atomic<int> passes{0};
  std::atomic<bool> wb_failed{false};  // the clients stop waiting for passes
  std::thread wb([&] {
    while (!stop) {
      f.store->MarkIdleAll();
      WritebackRequest r;
      r.scans.push_back({0, 0, kPages});
      r.compressed = passes % 2 == 1;
      r.in_flight = 4;
      r.max_io_pages = 8;
      auto res = f.store->Writeback(r);
      const Status s = res.has_value() ? res->status : res.error();
      if (!s.ok()) {
        ADD_FAILURE() << "writeback pass " << passes << ": " << s.ToString();
        wb_failed = true;
        return;
      }
      ++passes;
    }
  });
  std::vector<std::thread> clients;
  std::atomic<std::uint64_t> checks{0};
  for (int t = 0; t < kThreads; ++t) {
    clients.emplace_back([&, t] {
      std::mt19937 rng(t);
      std::vector<std::int64_t> version(kPages, 0);  // -1: discarded
      std::int64_t next = 1;
      Page out;
      const auto deadline =
          std::chrono::steady_clock::now() + std::chrono::seconds(2);
      while (std::chrono::steady_clock::now() < deadline ||
             (passes < 5 && !wb_failed)) {
        const std::size_t i = (rng() % (kPages / kThreads)) * kThreads + t;
        if (i >= kPages) continue;
        switch (rng() % 4) {
          case 0: {
            version[i] = next++;
            const Page p = MakePage(i, version[i], NoiseFor(i + version[i]));
            ASSERT_OK(f.store->Store(i, ConstPage(p)));
            break;
          }
          case 1:
            ASSERT_OK(f.store->Discard(i));
            version[i] = -1;
            break;
          default: {
            ASSERT_OK(f.store->Load(i, MutablePage(out)));
            Page want{};
            if (version[i] >= 0) {
              want = MakePage(i, version[i], NoiseFor(i + version[i]));
            }
            ASSERT_EQ(0, std::memcmp(out.data(), want.data(), kPageSize))
                << "slot " << i << " version " << version[i];
            ++checks;
          }
        }
      }
    });
  }
  for (auto& c : clients) c.join();
  stop = true;
  wb.join();
  EXPECT_GE(passes.load(), 5);
  EXPECT_GT(checks.load(), 1000u);
  // Nothing leaked: every block in use belongs to a WB slot.
  std::size_t wb_slots = 0;
  for (std::size_t i = 0; i < kPages; ++i) wb_slots += f.store->Inspect(i).wb;
  EXPECT_EQ(f.store->Stats().bd_count, wb_slots);
}

}  // namespace
}  // namespace ztier
