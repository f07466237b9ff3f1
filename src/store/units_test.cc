// units_test.cc: multi-page objects (PageStoreOptions::unit_pages): what a
// unit holds and counts, pages leaving it, its reclaim, writeback of units,
// a damaged unit, and reads (single and batched) racing writes and
// reclaims.
#include <gtest/gtest.h>

#include <atomic>
#include <bit>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "page_store_test_peer.h"
#include "testing/discarding_file.h"
#include "testing/faulty_file.h"
#include "testing/nothing_stored.h"
#include "testing/test_util.h"
#include "unit_table.h"
#include "ztier/backing_store.h"
#include "ztier/page_store.h"

namespace ztier {
namespace {

using testing::ScopedTempDir;

// Lets the stress threads run for `least`, and on until done() holds or a
// minute has passed (a property that never comes fails its check after).
template <typename Done>
void RunAtLeast(std::chrono::milliseconds least, Done done) {
  const auto t0 = std::chrono::steady_clock::now();
  for (;;) {
    const auto ran = std::chrono::steady_clock::now() - t0;
    if (ran >= std::chrono::minutes(1) || (ran >= least && done())) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

const corpus::PageSet& Python() { return testing::TestCorpus("anon-python"); }

// The content of slot i: a corpus page, or (where zero_every divides i) a
// zero page.
std::vector<std::byte> Pages(std::size_t first, std::size_t count,
                             std::size_t base = 0, std::size_t zero_every = 0) {
  std::vector<std::byte> v(count * kPageSize);
  for (std::size_t k = 0; k < count; ++k) {
    const std::size_t i = first + k;
    if (zero_every != 0 && i % zero_every == 0) continue;
    ConstPage p = Python().page((base + i) % Python().size());
    std::memcpy(v.data() + k * kPageSize, p.data(), kPageSize);
  }
  return v;
}

// `count` pages of random bytes (seeded): none compresses, each is HUGE
// alone.
std::vector<std::byte> RandomPages(std::size_t count, std::uint64_t seed) {
  std::vector<std::byte> v(count * kPageSize);
  std::mt19937_64 rng(seed);
  for (std::size_t i = 0; i < v.size(); i += 8) {
    const std::uint64_t x = rng();
    std::memcpy(v.data() + i, &x, 8);
  }
  return v;
}

// A run of 16 pages of text, each its own, that compress alone (not every
// corpus page does), but for `poor` pages from page 13 on, each `noise`
// (one random page: it does not compress alone). `shift` varies the text.
std::vector<std::byte> PoorAloneRun(std::uint64_t shift,
                                    const std::vector<std::byte>& noise,
                                    std::size_t poor) {
  std::vector<std::byte> data(16 * kPageSize);
  static const char kText[] = "the quick brown fox jumps over the lazy dog ";
  for (std::size_t b = 0; b < data.size(); ++b) {
    data[b] = static_cast<std::byte>(
        kText[(b / 7 + shift + b / kPageSize) % (sizeof(kText) - 1)]);
  }
  for (std::size_t k = 13; k < 13 + poor; ++k) {
    std::memcpy(data.data() + k * kPageSize, noise.data(), kPageSize);
  }
  return data;
}

// A corpus page number from which 64 pages in a row are none of them
// same-filled, so that a run stored from there is all members.
std::size_t DenseBase() {
  std::size_t run = 0;
  for (std::size_t i = 0; i < Python().size(); ++i) {
    ConstPage p = Python().page(i);
    bool same = true;
    for (std::size_t w = 8; w < kPageSize && same; w += 8) {
      same = std::memcmp(p.data(), p.data() + w, 8) == 0;
    }
    run = same ? 0 : run + 1;
    if (run == 64) return i - 63;
  }
  ADD_FAILURE() << "no 64 pages in a row that are not same-filled";
  return 0;
}

std::unique_ptr<PageStore> MakeStore(std::size_t pages, std::size_t unit,
                                     PageStoreOptions o = {}) {
  o.num_pages = pages;
  o.unit_pages = unit;
  auto s = PageStore::Create(o);
  EXPECT_TRUE(s.has_value()) << s.error().ToString();
  return s.has_value() ? std::move(*s) : nullptr;
}

// A store of units of 16 whose memory is a preallocated reserve of
// `reserve` bytes, and no more: mem_limit is lifted past it once made (the
// reserve does not grow), so that the pool, not the limit, refuses.
std::unique_ptr<PageStore> MakeReserveStore(std::size_t pages,
                                            std::size_t reserve) {
  PageStoreOptions o;
  o.mem_limit = reserve;
  o.prealloc = true;
  auto store = MakeStore(pages, 16, o);
  if (store != nullptr) store->SetMemLimit(std::size_t{1} << 30);
  return store;
}

// Options with a backing file of `blocks` blocks in `dir`, for writeback.
PageStoreOptions WithBacking(const ScopedTempDir& dir, std::size_t blocks) {
  BackingOptions bo;
  bo.path = dir.File("backing");
  bo.size_bytes = blocks * kPageSize;
  auto backing = BackingStore::Open(bo);
  EXPECT_TRUE(backing.has_value()) << backing.error().ToString();
  PageStoreOptions o;
  if (backing.has_value()) o.backing = std::move(*backing);
  return o;
}

void ExpectRange(PageStore& store, std::size_t first,
                 const std::vector<std::byte>& want) {
  std::vector<std::byte> out(kPageSize);
  for (std::size_t k = 0; k < want.size() / kPageSize; ++k) {
    ASSERT_OK(store.Load(first + k, MutablePage(out.data(), kPageSize)));
    ASSERT_EQ(std::memcmp(out.data(), want.data() + k * kPageSize, kPageSize),
              0)
        << "slot " << first + k;
  }
}

TEST(UnitsTest, RejectsOtherSizes) {
  for (std::size_t bad : {2, 3, 5, 32}) {
    PageStoreOptions o;
    o.num_pages = 64;
    o.unit_pages = bad;
    auto s = PageStore::Create(o);
    ASSERT_FALSE(s.has_value()) << bad;
    EXPECT_EQ(s.error().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(s.error().message().find("unit_pages"), std::string::npos);
  }
}

TEST(UnitsTest, AlignedRunsBecomeUnitsAndReadBack) {
  for (std::size_t unit : {4, 8, 16}) {
    auto store = MakeStore(256, unit);
    // Slots 3..100: a head and a tail of single pages around whole units;
    // every 5th page zero.
    const auto data = Pages(3, 98, 0, 5);
    ASSERT_OK(store->StoreBatch(3, data));
    const std::size_t first_unit = (3 + unit - 1) / unit * unit;
    const std::size_t end_unit = 101 / unit * unit;
    const PageStoreStats st = store->Stats();
    EXPECT_EQ(st.units, (end_unit - first_unit) / unit) << unit;
    std::size_t members = 0;
    for (std::size_t i = first_unit; i < end_unit; ++i) members += i % 5 != 0;
    EXPECT_EQ(st.unit_pages, members);
    EXPECT_EQ(st.orig_data_size, 98 * kPageSize);
    EXPECT_EQ(st.same_pages, 20u);  // 5, 10, ..., 100
    for (std::size_t i = 3; i < 101; ++i) {
      const SlotInfo info = store->Inspect(i);
      const bool in_unit = i >= first_unit && i < end_unit && i % 5 != 0;
      EXPECT_EQ(info.unit, in_unit) << "slot " << i;
      EXPECT_EQ(info.same, i % 5 == 0) << "slot " << i;
    }
    ExpectRange(*store, 3, data);
    // Batched loads read units too (serial backend: page by page).
    std::vector<std::byte> out(data.size());
    ASSERT_OK(store->LoadBatch(3, out));
    EXPECT_EQ(std::memcmp(out.data(), data.data(), data.size()), 0);
  }
}

TEST(UnitsTest, UnitsTakeLessThanPages) {
  auto pages = MakeStore(1024, 0);
  auto units = MakeStore(1024, 16);
  const auto data = Pages(0, 1024);
  ASSERT_OK(pages->StoreBatch(0, data));
  ASSERT_OK(units->StoreBatch(0, data));
  const PageStoreStats a = pages->Stats();
  const PageStoreStats b = units->Stats();
  EXPECT_EQ(a.orig_data_size, b.orig_data_size);
  EXPECT_LT(b.compr_data_size, a.compr_data_size);
  EXPECT_LT(b.mem_used_total, a.mem_used_total);
  EXPECT_GT(b.units, 0u);
}

// A unit's object is whole pages and a rest in power-of-two pieces of at
// least 64 bytes, and one last piece under that: the rests of many units
// fill a few of the pool's size classes, each of which wastes the unused
// part of its last page, not one partly used page in nearly every class.
TEST(UnitsTest, UnitRestsFillFewSizeClasses) {
  auto store = MakeStore(2048, 16);
  ASSERT_OK(store->StoreBatch(0, Pages(0, 2048, DenseBase())));
  // Every run a unit (none stored page by page, whose objects would fall
  // in any class), each of under 10 whole pages.
  ASSERT_EQ(store->Stats().units, 128u);
  std::size_t whole = 0;
  for (const PoolClassStats& c : store->pool().ClassStats()) {
    if (c.obj_used == 0) continue;
    EXPECT_TRUE(c.size <= 64 || std::has_single_bit(c.size))
        << "class of " << c.size << " bytes holds " << c.obj_used;
    // Whole pages go to the packed page class, several pages a zspage,
    // not to the huge class's one-page zspages.
    if (c.size == kPageSize) {
      EXPECT_GT(c.objs_per_zspage, 1u)
          << c.obj_used << " in class " << c.class_index;
      whole += c.obj_used;
    }
  }
  EXPECT_GE(whole, 128u);  // each unit's object is over a page
  ExpectRange(*store, 0, Pages(0, 2048, DenseBase()));
}

// Every length a unit's object can have: at most kMaxUnitPieces pieces,
// none empty, adding up to it; whole pages first, then powers of two from
// 2048 down to 64 while pieces last, and one last piece.
TEST(UnitsTest, UnitPieceSizesSplitEveryLength) {
  for (std::size_t len = 1; len < internal::kMaxUnitPages * kPageSize; ++len) {
    std::size_t sizes[internal::kMaxUnitPieces];
    const std::size_t n = internal::UnitPieceSizes(len, sizes);
    ASSERT_GE(n, 1u) << len;
    ASSERT_LE(n, internal::kMaxUnitPieces) << len;
    std::size_t sum = 0;
    std::size_t k = 0;
    for (; k < n && sizes[k] == kPageSize; ++k) sum += kPageSize;
    ASSERT_EQ(k, len / kPageSize) << len;
    for (; k < n; ++k) {
      ASSERT_GT(sizes[k], 0u) << len;
      if (k + 1 < n) {
        ASSERT_TRUE(std::has_single_bit(sizes[k]) && sizes[k] >= 64 &&
                    sizes[k] < kPageSize)
            << len << " piece " << k << ": " << sizes[k];
        if (k > len / kPageSize) {
          ASSERT_LT(sizes[k], sizes[k - 1]) << len;
        }
      } else if (n < internal::kMaxUnitPieces && sizes[k] != kPageSize) {
        // Pieces to spare: the last is a power of two of the run, or under
        // 64 bytes.
        ASSERT_TRUE(sizes[k] < 64 || std::has_single_bit(sizes[k]))
            << len << " last piece: " << sizes[k];
      }
      sum += sizes[k];
    }
    ASSERT_EQ(sum, len);
  }
}

TEST(UnitsTest, IncompressibleRunsArePages) {
  auto store = MakeStore(64, 16);
  std::vector<std::byte> data(16 * kPageSize);
  std::mt19937_64 rng(7);
  for (std::size_t i = 0; i < data.size(); i += 8) {
    const std::uint64_t v = rng();
    std::memcpy(data.data() + i, &v, 8);
  }
  ASSERT_OK(store->StoreBatch(16, data));
  EXPECT_EQ(store->Stats().units, 0u);
  EXPECT_EQ(store->Stats().huge_pages, 16u);
  ExpectRange(*store, 16, data);
}

TEST(UnitsTest, OverwriteAndDiscardDetachThenReclaim) {
  auto store = MakeStore(64, 16);
  const auto data = Pages(0, 16, DenseBase());
  ASSERT_OK(store->StoreBatch(0, data));
  ASSERT_EQ(store->Stats().units, 1u);
  ASSERT_EQ(store->Stats().unit_pages, 16u);
  const std::uint64_t unit_bytes = store->Stats().compr_data_size;
  // Overwrite page 2 and discard page 3: the unit keeps 14.
  auto newer = Pages(100, 1);
  ASSERT_OK(store->Store(2, ConstPage(newer.data(), kPageSize)));
  ASSERT_OK(store->Discard(3));
  EXPECT_EQ(store->Inspect(0).unit_live, 14u);
  EXPECT_FALSE(store->Inspect(2).unit);
  EXPECT_FALSE(store->Inspect(3).allocated);
  // A partial write detaches too.
  std::byte x[100];
  std::memset(x, 0x5a, sizeof(x));
  ASSERT_OK(store->StorePartial(4, 10, x));
  auto want = data;
  std::memcpy(want.data() + 2 * kPageSize, newer.data(), kPageSize);
  std::memset(want.data() + 3 * kPageSize, 0, kPageSize);
  std::memcpy(want.data() + 4 * kPageSize + 10, x, sizeof(x));
  ExpectRange(*store, 0, want);
  EXPECT_EQ(store->Stats().units, 1u);
  EXPECT_EQ(store->Stats().unit_pages, 13u);
  EXPECT_EQ(store->Stats().compr_data_size,
            unit_bytes + store->Inspect(2).size + store->Inspect(4).size);
  // Down to 7 of 16 (below half): the survivors become single pages and
  // the unit is freed.
  for (std::size_t i = 5; i < 11; ++i) ASSERT_OK(store->Discard(i));
  for (std::size_t i = 5; i < 11; ++i) {
    std::memset(want.data() + i * kPageSize, 0, kPageSize);
  }
  const PageStoreStats st = store->Stats();
  EXPECT_EQ(st.units, 0u);
  EXPECT_EQ(st.unit_pages, 0u);
  EXPECT_EQ(st.units_reclaimed, 7u);
  for (std::size_t i = 0; i < 16; ++i) EXPECT_FALSE(store->Inspect(i).unit);
  ExpectRange(*store, 0, want);
  EXPECT_EQ(st.orig_data_size, 9 * kPageSize);
}

TEST(UnitsTest, DiscardingEveryPageFreesTheObject) {
  auto store = MakeStore(64, 8);
  ASSERT_OK(store->StoreBatch(0, Pages(0, 64)));
  ASSERT_EQ(store->Stats().units, 8u);
  const std::uint64_t full = store->Stats().mem_used_total;
  for (std::size_t i = 0; i < 64; ++i) ASSERT_OK(store->Discard(i));
  store->Compact();
  const PageStoreStats st = store->Stats();
  ztier::testing::ExpectNothingStored(st);
  // What is left is the pool's spare zspages, as after single pages.
  EXPECT_LT(st.mem_used_total, full / 4);
}

TEST(UnitsTest, RewritingARunReplacesItsUnit) {
  auto store = MakeStore(64, 16);
  ASSERT_OK(store->StoreBatch(0, Pages(0, 16)));
  const auto newer = Pages(0, 16, 500);
  ASSERT_OK(store->StoreBatch(0, newer));
  EXPECT_EQ(store->Stats().units, 1u);
  EXPECT_EQ(store->Stats().unit_pages, 16u);
  ExpectRange(*store, 0, newer);
}

// Units of 4 pages with a reclaim pass held up: unit 0 goes below half
// (pages 0-2 discarded) and the discard's pass waits for page 3, which a
// holder keeps locked until Release.
class HeldPass {
 public:
  explicit HeldPass(PageStore& store) : store_(store) {
    holder_ = std::thread([this] {
      PageStoreTestPeer::WithSlotLocked(store_, 3, [this] {
        locked_ = true;
        while (!release_.load()) std::this_thread::yield();
      });
    });
    while (!locked_.load()) std::this_thread::yield();
    discarder_ = std::thread([this] {
      for (std::uint64_t i = 0; i < 3; ++i) EXPECT_OK(store_.Discard(i));
    });
    while (!PageStoreTestPeer::SlotHasWaiters(store_, 3)) {
      std::this_thread::yield();
    }
  }
  ~HeldPass() {
    if (holder_.joinable()) Release();
  }
  void Release() {
    release_ = true;
    holder_.join();
    discarder_.join();
  }

 private:
  PageStore& store_;
  std::atomic<bool> locked_{false}, release_{false};
  std::thread holder_, discarder_;
};

// Rewriting a unit in place queues no reclaim of the unit it replaces (its
// object goes with the rewrite). Such entries used to fill the queue, one
// place per unit, while a pass was held up, so that a unit that really went
// below half its pages was dropped from it and kept its whole object.
TEST(UnitsTest, RewritingAUnitTakesNoPlaceInTheReclaimQueue) {
  constexpr std::size_t kU = 4;
  auto store = MakeStore(4 * kU, kU);  // 4 units: the queue holds 4
  const std::size_t base = DenseBase();
  for (std::size_t u = 0; u < 4; ++u) {
    ASSERT_OK(store->StoreBatch(u * kU, Pages(u * kU, kU, base)));
  }
  HeldPass held(*store);
  for (int r = 0; r < 6; ++r) {
    EXPECT_OK(store->StoreBatch(kU, Pages(kU, kU, base + 100 + r)));
  }
  for (std::uint64_t i = 2 * kU; i < 2 * kU + 3; ++i) {
    EXPECT_OK(store->Discard(i));  // unit 2: 1 page of 4 left
  }
  held.Release();
  // The next call's pass takes what is queued.
  ASSERT_OK(store->Discard(3 * kU));
  EXPECT_FALSE(store->Inspect(2 * kU + 3).unit)
      << "unit 2 keeps its object for 1 page of 4";
  EXPECT_EQ(store->Stats().units, 2u);  // units 1 and 3
  ExpectRange(*store, kU, Pages(kU, kU, base + 105));
  ExpectRange(*store, 2 * kU + 3, Pages(2 * kU + 3, 1, base));
}

// A unit rewritten while queued leaves its entry behind, stale (its
// generation gone); rewritten and queued again and again while a pass is
// held up, one run fills the queue, which has one place per unit. A unit
// that then goes below half its pages still takes its place: the stale
// entries make room (only an older generation of the same run gives way),
// so that once the calls have returned no unit keeps its whole object for
// 1 page of 4 (page_store.h, unit_pages: the worst case).
TEST(UnitsTest, StaleEntriesGiveWayToAUnitBelowHalf) {
  constexpr std::size_t kU = 4;
  auto store = MakeStore(4 * kU, kU);  // 4 units: the queue holds 4
  const std::size_t base = DenseBase();
  for (std::size_t u = 0; u < 4; ++u) {
    ASSERT_OK(store->StoreBatch(u * kU, Pages(u * kU, kU, base)));
  }
  HeldPass held(*store);
  // Unit 1 below half, then rewritten, four times: four entries, three of
  // them stale.
  for (int r = 0; r < 4; ++r) {
    EXPECT_OK(store->StoreBatch(kU, Pages(kU, kU, base + 100 + r)));
    for (std::uint64_t i = kU; i < kU + 3; ++i) EXPECT_OK(store->Discard(i));
  }
  for (std::uint64_t i = 2 * kU; i < 2 * kU + 3; ++i) {
    EXPECT_OK(store->Discard(i));  // unit 2: 1 page of 4 left
  }
  held.Release();
  ASSERT_OK(store->Discard(3 * kU));  // one more call (unit 3: 3 of 4 left)
  EXPECT_FALSE(store->Inspect(2 * kU + 3).unit)
      << "unit 2 keeps its object for 1 page of 4";
  EXPECT_FALSE(store->Inspect(kU + 3).unit);
  EXPECT_EQ(store->Stats().units, 1u);  // unit 3
  ExpectRange(*store, kU + 3, Pages(kU + 3, 1, base + 103));
  ExpectRange(*store, 2 * kU + 3, Pages(2 * kU + 3, 1, base));
}

// The queue's compaction itself: a full queue keeps each run's newest
// generation only (the others are stale), and once every run has an entry
// a newer generation takes its run's place, an older one none.
TEST(UnitsTest, AFullReclaimQueueKeepsEachRunsNewestEntry) {
  constexpr std::size_t kU = 4;
  auto store = MakeStore(4 * kU, kU);  // 4 units: the queue holds 4
  using Entries = std::vector<std::pair<std::uint64_t, std::uint64_t>>;
  std::size_t capacity = 0;
  PageStoreTestPeer::ReclaimQueue(*store, &capacity);
  ASSERT_EQ(capacity, 4u);
  for (const std::uint64_t gen : {5, 6, 7}) {
    PageStoreTestPeer::QueueReclaim(*store, 1, gen);
  }
  PageStoreTestPeer::QueueReclaim(*store, 2, 8);
  PageStoreTestPeer::QueueReclaim(*store, 3, 9);  // full: compacted first
  EXPECT_EQ(PageStoreTestPeer::ReclaimQueue(*store, &capacity),
            (Entries{{1, 7}, {2, 8}, {3, 9}}));
  PageStoreTestPeer::QueueReclaim(*store, 0, 10);
  PageStoreTestPeer::QueueReclaim(*store, 2, 11);  // every run has one
  PageStoreTestPeer::QueueReclaim(*store, 1, 4);   // older: no place
  EXPECT_EQ(PageStoreTestPeer::ReclaimQueue(*store, &capacity),
            (Entries{{0, 10}, {1, 7}, {2, 11}, {3, 9}}));
  EXPECT_EQ(capacity, 4u);
}

// A discard that takes a unit below half its pages while another call's
// reclaim pass runs finds the pass taken and returns at once: that pass
// takes the unit before it returns, so that once both calls have returned
// no unit keeps its whole object for 1 page of 4.
TEST(UnitsTest, AUnitQueuedDuringAPassIsReclaimedByThatPass) {
  constexpr std::size_t kU = 4;
  auto store = MakeStore(2 * kU, kU);
  const std::size_t base = DenseBase();
  ASSERT_OK(store->StoreBatch(0, Pages(0, 2 * kU, base)));
  ASSERT_EQ(store->Stats().units, 2u);
  // Each unit down to 2 of 4: not yet below half.
  for (const std::size_t i : {std::size_t{1}, std::size_t{2}, kU + 1, kU + 2}) {
    ASSERT_OK(store->Discard(i));
  }
  ASSERT_EQ(store->Stats().units, 2u);
  // Unit 0's pass held up: the discard of page 3 queues it, and its pass
  // waits for page 0, which the holder keeps locked.
  std::atomic<bool> locked{false}, release{false};
  std::thread holder([&] {
    PageStoreTestPeer::WithSlotLocked(*store, 0, [&] {
      locked = true;
      while (!release.load()) std::this_thread::yield();
    });
  });
  while (!locked.load()) std::this_thread::yield();
  std::thread discarder([&] { EXPECT_OK(store->Discard(3)); });
  while (!PageStoreTestPeer::SlotHasWaiters(*store, 0)) {
    std::this_thread::yield();
  }
  // Unit 1 below half while that pass runs: this discard returns at once.
  ASSERT_OK(store->Discard(kU + 3));
  release = true;
  holder.join();
  discarder.join();
  const PageStoreStats st = store->Stats();
  EXPECT_EQ(st.units, 0u) << "a unit keeps its object for 1 page of 4";
  EXPECT_FALSE(store->Inspect(kU).unit);
  EXPECT_EQ(st.units_reclaimed, 2u);
  ExpectRange(*store, 0, Pages(0, 1, base));
  ExpectRange(*store, kU, Pages(kU, 1, base));
}

TEST(UnitsTest, DamagedUnitIsAnErrorForEveryPage) {
  auto store = MakeStore(64, 16);
  const auto data = Pages(0, 32, 0, 7);  // zero pages 0, 7, 14, 21, 28
  ASSERT_OK(store->StoreBatch(0, data));
  ASSERT_TRUE(PageStoreTestPeer::CorruptUnit(*store, 17));
  std::vector<std::byte> out(kPageSize);
  for (std::size_t i = 16; i < 32; ++i) {
    std::memset(out.data(), 0, kPageSize);
    Status st = store->Load(i, MutablePage(out.data(), kPageSize));
    if (i % 7 == 0) {  // SAME, not in the unit
      EXPECT_OK(st);
      continue;
    }
    EXPECT_EQ(st.code(), StatusCode::kCorruption) << "slot " << i;
  }
  EXPECT_GE(store->Stats().failed_reads, 14u);
  // The other unit is untouched.
  ExpectRange(*store, 0, std::vector<std::byte>(data.begin(),
                                                data.begin() + 16 * kPageSize));
  // Overwriting the damaged run heals it.
  ASSERT_OK(store->StoreBatch(16, Pages(16, 16)));
  ExpectRange(*store, 16, Pages(16, 16));
}

// A LoadBatch over whole units of all members decompresses each straight
// into its buffer; pages detached since read as what they are now, and a
// damaged unit is an error for each of its pages, on both backends.
TEST(UnitsTest, BatchOverWholeUnitsReadsDetachedAndDamagedPagesRight) {
  for (const BatchBackend backend :
       {BatchBackend::kSerial, BatchBackend::kParallel}) {
    SCOPED_TRACE(BatchBackendName(backend));
    auto store = MakeStore(64, 16, {.batch_backend = backend});
    const std::size_t base = DenseBase();
    auto want = Pages(0, 48, base);
    ASSERT_OK(store->StoreBatch(0, want));
    ASSERT_EQ(store->Stats().units, 3u);
    ASSERT_EQ(store->Stats().unit_pages, 48u);
    // Unit 0 loses page 2 to an overwrite and page 5 to a discard; unit 2
    // is damaged.
    const auto newer = Pages(300, 1);
    ASSERT_OK(store->Store(2, ConstPage(newer.data(), kPageSize)));
    ASSERT_OK(store->Discard(5));
    std::memcpy(want.data() + 2 * kPageSize, newer.data(), kPageSize);
    std::memset(want.data() + 5 * kPageSize, 0, kPageSize);
    ASSERT_TRUE(PageStoreTestPeer::CorruptUnit(*store, 40));
    const std::uint64_t failed = store->Stats().failed_reads;
    // From slot 1: unit 0 is not covered whole, unit 1 is, unit 2 too.
    std::vector<std::byte> out(47 * kPageSize);
    std::vector<Status> statuses(47);
    EXPECT_EQ(store->LoadBatch(1, out, statuses).code(),
              StatusCode::kCorruption);
    for (std::size_t i = 1; i < 48; ++i) {
      const Status& st = statuses[i - 1];
      if (i >= 32) {
        EXPECT_EQ(st.code(), StatusCode::kCorruption) << "slot " << i;
        continue;
      }
      ASSERT_TRUE(st.ok()) << "slot " << i << ": " << st.ToString();
      EXPECT_EQ(std::memcmp(out.data() + (i - 1) * kPageSize,
                            want.data() + i * kPageSize, kPageSize),
                0)
          << "slot " << i;
    }
    EXPECT_EQ(store->Stats().failed_reads, failed + 16);
    // From slot 0: unit 0 whole, with its detached pages.
    out.resize(32 * kPageSize);
    ASSERT_OK(store->LoadBatch(0, out));
    EXPECT_EQ(std::memcmp(out.data(), want.data(), out.size()), 0);
  }
}

// A unit whose survivors cannot be read is not reclaimed, and not tried
// again with every later free; nothing of it is a client's failed write.
TEST(UnitsTest, AReclaimThatCannotReadTheUnitGivesUpOnce) {
  auto store = MakeStore(64, 16);
  ASSERT_OK(store->StoreBatch(0, Pages(0, 16, DenseBase())));
  ASSERT_TRUE(PageStoreTestPeer::CorruptUnit(*store, 0));
  for (std::size_t i = 0; i < 12; ++i) ASSERT_OK(store->Discard(i));
  const PageStoreStats st = store->Stats();
  EXPECT_EQ(st.units, 1u);
  EXPECT_EQ(st.unit_pages, 4u);
  EXPECT_EQ(st.units_reclaimed, 0u);
  EXPECT_EQ(st.decompress_fail, 1u);  // tried once
  EXPECT_EQ(st.failed_writes, 0u);
  for (std::size_t i = 12; i < 16; ++i) ASSERT_OK(store->Discard(i));
  EXPECT_EQ(store->Stats().units, 0u);
  EXPECT_EQ(store->Stats().compr_data_size, 0u);
}

// At mem_limit a reclaim still happens: it replaces a larger object.
TEST(UnitsTest, ReclaimIsNotHeldToMemLimit) {
  auto store = MakeStore(64, 16);
  ASSERT_OK(store->StoreBatch(0, Pages(0, 16, DenseBase())));
  store->SetMemLimit(store->Stats().mem_used_total);
  for (std::size_t i = 0; i < 9; ++i) ASSERT_OK(store->Discard(i));
  const PageStoreStats st = store->Stats();
  EXPECT_EQ(st.units, 0u);
  EXPECT_EQ(st.units_reclaimed, 7u);
  EXPECT_EQ(st.failed_writes, 0u);
  EXPECT_EQ(st.pool_limit_hit, 0u);
  ExpectRange(*store, 9, Pages(9, 7, DenseBase()));
}

// A unit whose reclaim the pool refuses (its reserve spent) keeps its
// object, every page intact, and stays queued: once pages elsewhere free
// memory, the next store or discard that returns reclaims it, though no
// page of the unit leaves again (not kept whole until its last page goes).
TEST(UnitsTest, AUnitThePoolRefusedIsReclaimedOnceThereIsRoom) {
  constexpr std::size_t kPages = 2048;
  auto store = MakeReserveStore(kPages, 256 * 1024);
  ASSERT_NE(store, nullptr);
  const auto data = Pages(0, 16, DenseBase());
  ASSERT_OK(store->StoreBatch(0, data));
  ASSERT_EQ(store->Stats().units, 1u);
  // The rest of the reserve: raw pages, until the pool refuses one.
  const auto noise = RandomPages(kPages, 11);
  auto raw = [&](std::size_t i) {
    return ConstPage(noise.data() + i * kPageSize, kPageSize);
  };
  std::size_t end = 16;
  while (end < kPages && store->Store(end, raw(end)).ok()) ++end;
  ASSERT_LT(end, kPages);
  ASSERT_GT(end, 16u + 64);
  // 7 of 16 pages left: the discard's reclaim finds no room for the
  // survivors, and the unit stays as it was.
  // reject_alloc_fail counts stores the pool refused, as zswap's does
  // (mm/zswap.c, zswap_store): a discard stores nothing, and a reclaim the
  // pool refuses is not a store refused.
  const PageStoreStats full = store->Stats();
  for (std::size_t i = 0; i < 9; ++i) ASSERT_OK(store->Discard(i));
  ASSERT_EQ(store->Stats().reject_alloc_fail, full.reject_alloc_fail);
  ASSERT_EQ(store->Stats().units_reclaim_refused, 1u);
  ASSERT_EQ(store->Stats().units, 1u);
  ASSERT_EQ(store->Stats().unit_pages, 7u);
  const std::vector<std::byte> survivors(data.begin() + 9 * kPageSize,
                                         data.end());
  ExpectRange(*store, 9, survivors);
  // A call while the pool is still full tries it again, once.
  ASSERT_OK(store->Discard(kPages - 1));  // an empty slot: frees nothing
  EXPECT_EQ(store->Stats().reject_alloc_fail, full.reject_alloc_fail);
  EXPECT_EQ(store->Stats().units_reclaim_refused, 2u);
  ASSERT_EQ(store->Stats().units, 1u);
  // Room again: 64 raw pages go, and none of the unit's.
  for (std::size_t i = 16; i < 16 + 64; ++i) ASSERT_OK(store->Discard(i));
  const PageStoreStats st = store->Stats();
  EXPECT_EQ(st.units, 0u) << "the unit keeps its object for 7 pages of 16";
  EXPECT_EQ(st.units_reclaimed, 7u);
  EXPECT_EQ(st.failed_writes, full.failed_writes);  // none since the fill
  ExpectRange(*store, 9, survivors);
  ExpectRange(*store, 16 + 64,
              std::vector<std::byte>(noise.begin() + (16 + 64) * kPageSize,
                                     noise.begin() + end * kPageSize));
}

// A survivor that does not compress alone is kept raw (HUGE) by the
// reclaim: a huge page now, but not a huge page stored. huge_pages_since
// counts the pages the clients' stores keep raw, as zram counts those of
// its writes (zram_write_page); the reclaim rewrites a page no one wrote,
// as recompression does, which leaves the counter alone.
TEST(UnitsTest, AReclaimedRawSurvivorIsNoHugePageStored) {
  auto store = MakeStore(64, 16);
  auto data = Pages(0, 16, DenseBase());
  const auto noise = RandomPages(1, 7);
  std::memcpy(data.data() + 15 * kPageSize, noise.data(), kPageSize);
  ASSERT_OK(store->StoreBatch(0, data));
  ASSERT_EQ(store->Stats().units, 1u);
  ASSERT_EQ(store->Stats().unit_pages, 16u);
  ASSERT_EQ(store->Stats().huge_pages_since, 0u);
  for (std::size_t i = 0; i < 9; ++i) ASSERT_OK(store->Discard(i));
  PageStoreStats st = store->Stats();
  EXPECT_EQ(st.units, 0u);
  EXPECT_EQ(st.units_reclaimed, 7u);
  EXPECT_TRUE(store->Inspect(15).huge);
  const std::uint64_t huge = st.huge_pages;  // a few text pages too
  EXPECT_GE(huge, 1u);
  EXPECT_EQ(st.huge_pages_since, 0u) << "the reclaim counted as a store";
  ExpectRange(*store, 9,
              std::vector<std::byte>(data.begin() + 9 * kPageSize, data.end()));
  // The client's store of that page counts.
  ASSERT_OK(store->Store(20, ConstPage(noise.data(), kPageSize)));
  st = store->Stats();
  EXPECT_EQ(st.huge_pages, huge + 1);
  EXPECT_EQ(st.huge_pages_since, 1u);
}

// Without store_incompressible, a unit whose survivor does not compress
// alone is given up (kept whole until its last page goes). A new
// dictionary may make that page compress: train_dict gives such a unit
// another chance, and the next store or discard that returns reclaims it
// (not the training itself, which runs no reclaim). Here the page is
// random bytes found in many units, so the dictionary holds them.
TEST(UnitsTest, ANewDictionaryRetriesAUnitGivenUpForAPoorPage) {
  PageStoreOptions o;
  o.codec = "zstd";
  o.store_incompressible = false;
  constexpr std::size_t kRuns = 24;
  auto store = MakeStore(kRuns * 16 + 16, 16, o);
  ASSERT_NE(store, nullptr);
  const auto noise = RandomPages(1, 5);
  std::vector<std::vector<std::byte>> runs;
  for (std::size_t r = 0; r < kRuns; ++r) {
    // Pages 13 and 14 random (the same page in every run; two, so that the
    // training's every-other-page split keeps one of each).
    std::vector<std::byte> data = PoorAloneRun(r * 16, noise, 2);
    ASSERT_OK(store->StoreBatch(r * 16, data));
    runs.push_back(std::move(data));
  }
  ASSERT_EQ(store->Stats().units, kRuns);
  // Unit 0 below half: page 13 does not compress alone, so it stays whole.
  for (std::size_t i = 0; i < 9; ++i) ASSERT_OK(store->Discard(i));
  ASSERT_EQ(store->Stats().units, kRuns);
  ASSERT_EQ(store->Stats().units_reclaimed, 0u);
  auto info = store->TrainDictionary({.dict_bytes = 16 * 1024});
  ASSERT_TRUE(info.has_value()) << info.error().ToString();
  // A call after the training (an empty slot: it frees nothing).
  ASSERT_OK(store->Discard(kRuns * 16 + 15));
  const PageStoreStats st = store->Stats();
  EXPECT_EQ(st.units, kRuns - 1) << "unit 0 was not tried again";
  EXPECT_EQ(st.units_reclaimed, 7u);
  const SlotInfo poor = store->Inspect(13);
  EXPECT_FALSE(poor.unit);
  EXPECT_FALSE(poor.huge);
  EXPECT_EQ(poor.dict, info->id);
  ExpectRange(*store, 9,
              std::vector<std::byte>(runs[0].begin() + 9 * kPageSize,
                                     runs[0].end()));
}

// A unit given up for a page that does not compress alone is given up for
// that page: once the page goes, the survivors can be objects of their own
// (page_store.h, unit_pages: the exceptions to the worst case are units
// whose survivors cannot be), and the free of that page queues the unit,
// which the same call reclaims.
TEST(UnitsTest, AUnitGivenUpForAPoorPageIsReclaimedOnceThatPageGoes) {
  PageStoreOptions o;
  o.codec = "zstd";
  o.store_incompressible = false;
  auto store = MakeStore(32, 16, o);
  ASSERT_NE(store, nullptr);
  const std::vector<std::byte> data = PoorAloneRun(0, RandomPages(1, 5), 1);
  ASSERT_OK(store->StoreBatch(0, data));
  ASSERT_EQ(store->Stats().units, 1u);
  // Below half: page 13 does not compress alone, the unit stays whole.
  for (std::size_t i = 0; i < 9; ++i) ASSERT_OK(store->Discard(i));
  ASSERT_EQ(store->Stats().units, 1u);
  // A free of another page leaves it so.
  ASSERT_OK(store->Discard(9));
  ASSERT_EQ(store->Stats().units, 1u);
  // The poor page goes: the 5 left compress alone.
  ASSERT_OK(store->Discard(13));
  EXPECT_EQ(store->Stats().units, 0u)
      << "the unit stayed whole once its poor page had gone";
  EXPECT_EQ(store->Stats().units_reclaimed, 5u);
  std::vector<std::byte> out(kPageSize);
  for (std::size_t i : {10, 11, 12, 14, 15}) {
    ASSERT_OK(store->Load(i, MutablePage(out.data(), kPageSize)));
    ASSERT_EQ(std::memcmp(out.data(), data.data() + i * kPageSize, kPageSize),
              0)
        << "page " << i;
  }
}

// Units given up for a poor page, retried by trainings and by their poor
// page's free while stores, discards and loads of those units run: every
// page reads as stored, and nothing is left behind once every page is
// discarded (no unit queued twice, no entry or counter left over).
TEST(UnitsTest, PoorUnitsRetriedWhileTrainingsRun) {
  PageStoreOptions o;
  o.codec = "zstd";
  o.store_incompressible = false;
  constexpr std::size_t kRuns = 16;
  auto store = MakeStore(kRuns * 16, 16, o);
  ASSERT_NE(store, nullptr);
  const auto noise = RandomPages(1, 5);
  auto run_data = [&](std::size_t r, std::uint64_t v) {
    return PoorAloneRun(r * 16 + v, noise, 2);
  };
  // Writer w owns the runs r % 2 == w.
  for (std::size_t r = 0; r < kRuns; ++r) {
    ASSERT_OK(store->StoreBatch(r * 16, run_data(r, 0)));
  }
  std::atomic<bool> stop{false};
  std::atomic<int> bad{0};
  std::vector<std::thread> threads;
  for (int w = 0; w < 2; ++w) {
    threads.emplace_back([&, w] {
      std::mt19937_64 rng(w + 7);
      std::vector<std::byte> out(kPageSize);
      while (!stop) {
        const std::size_t r = (rng() % (kRuns / 2)) * 2 + w;
        const std::uint64_t v = rng() % 4;
        if (!store->StoreBatch(r * 16, run_data(r, v)).ok()) ++bad;
        for (std::size_t i = 0; i < 9; ++i) {
          if (!store->Discard(r * 16 + i).ok()) ++bad;
        }
        // Now and then the poor page goes too (its free queues the unit).
        const bool poor_gone = rng() % 4 == 0;
        if (poor_gone && !store->Discard(r * 16 + 13).ok()) ++bad;
        const auto data = run_data(r, v);
        for (std::size_t i = 9; i < 16; ++i) {
          if (poor_gone && i == 13) continue;
          if (!store->Load(r * 16 + i, MutablePage(out.data(), kPageSize))
                   .ok() ||
              std::memcmp(out.data(), data.data() + i * kPageSize,
                          kPageSize) != 0) {
            ++bad;
          }
        }
      }
    });
  }
  std::atomic<int> trained{0};
  threads.emplace_back([&] {
    while (!stop) {
      trained += store->TrainDictionary({.dict_bytes = 16 * 1024}).has_value();
      std::this_thread::yield();
    }
  });
  std::this_thread::sleep_for(std::chrono::seconds(2));
  stop = true;
  for (auto& t : threads) t.join();
  EXPECT_EQ(bad.load(), 0);
  const PageStoreStats st = store->Stats();
  std::printf("%d trainings, %llu survivors reclaimed\n", trained.load(),
              static_cast<unsigned long long>(st.units_reclaimed));
  for (std::size_t i = 0; i < kRuns * 16; ++i) ASSERT_OK(store->Discard(i));
  ztier::testing::ExpectNothingStored(store->Stats());
}

// A unit the pool refuses (a raw survivor, no room in the huge class)
// holds up no other queued unit: one whose survivors fit where there is
// room (slots freed in their own classes) is reclaimed by the same call.
TEST(UnitsTest, ARefusedUnitHoldsUpNoOtherUnit) {
  constexpr std::size_t kPages = 4096;
  auto store = MakeReserveStore(kPages, 512 * 1024);
  ASSERT_NE(store, nullptr);
  // A: 15 corpus pages and a random one (a raw survivor); B: 16 corpus
  // pages.
  auto a = Pages(0, 16, DenseBase());
  const auto noise = RandomPages(kPages, 11);
  std::memcpy(a.data() + 15 * kPageSize, noise.data(), kPageSize);
  const auto b = Pages(16, 16, DenseBase());
  ASSERT_OK(store->StoreBatch(0, a));
  ASSERT_OK(store->StoreBatch(16, b));
  ASSERT_EQ(store->Stats().units, 2u);
  // Ten single copies of each of B's survivors (pages 25..31) and A's
  // (9..14), at 64 on: objects of the classes their reclaims need.
  std::size_t next = 64;
  std::vector<std::size_t> copies;
  for (int r = 0; r < 10; ++r) {
    for (std::size_t k = 9; k < 16; ++k) {
      const std::byte* src = k == 15 ? nullptr : a.data() + k * kPageSize;
      if (src != nullptr) {
        ASSERT_OK(store->Store(next, ConstPage(src, kPageSize)));
        copies.push_back(next++);
      }
      ASSERT_OK(store->Store(next, ConstPage(b.data() + k * kPageSize,
                                             kPageSize)));
      copies.push_back(next++);
    }
  }
  // The rest of the reserve: raw pages, until the pool refuses one.
  std::size_t end = next;
  while (end < kPages &&
         store->Store(end, ConstPage(noise.data() + end * kPageSize,
                                     kPageSize)).ok()) {
    ++end;
  }
  ASSERT_LT(end, kPages);
  // Room in the small classes only: one copy of each discarded (their
  // zspages keep the other copies).
  for (std::size_t i = 0; i < 13; ++i) ASSERT_OK(store->Discard(copies[i]));
  // A below half: refused (its raw survivor has no room).
  const PageStoreStats before = store->Stats();
  for (std::size_t i = 0; i < 9; ++i) ASSERT_OK(store->Discard(i));
  ASSERT_EQ(store->Stats().reject_alloc_fail, before.reject_alloc_fail);
  ASSERT_GT(store->Stats().units_reclaim_refused,
            before.units_reclaim_refused);
  ASSERT_EQ(store->Stats().units, 2u);
  // B below half: its survivors fit.
  for (std::size_t i = 16; i < 25; ++i) ASSERT_OK(store->Discard(i));
  const PageStoreStats st = store->Stats();
  EXPECT_EQ(st.units, 1u) << "B was not reclaimed (reclaimed: "
                          << st.units_reclaimed << ")";
  ExpectRange(*store, 9,
              std::vector<std::byte>(a.begin() + 9 * kPageSize, a.end()));
  ExpectRange(*store, 25,
              std::vector<std::byte>(b.begin() + 9 * kPageSize, b.end()));
}

TEST(UnitsTest, MemLimitRefusesTheWholeBatch) {
  PageStoreOptions o;
  o.mem_limit = 64 * 1024;
  auto store = MakeStore(1024, 16, o);
  Status st = store->StoreBatch(0, Pages(0, 1024));
  EXPECT_EQ(st.code(), StatusCode::kResourceExhausted);
  const PageStoreStats s = store->Stats();
  EXPECT_EQ(s.orig_data_size, 0u);
  EXPECT_EQ(s.units, 0u);
  EXPECT_EQ(s.compr_data_size, 0u);
}

TEST(UnitsTest, WritebackWritesEachUnitOnce) {
  ScopedTempDir dir;
  auto store = MakeStore(256, 16, WithBacking(dir, 1024));
  const auto data = Pages(0, 256, DenseBase(), 9);
  ASSERT_OK(store->StoreBatch(0, data));
  const PageStoreStats before = store->Stats();
  ASSERT_EQ(before.units, 16u);
  // One block per 4096 bytes of each unit's object, or part.
  const std::uint64_t blocks = before.compr_data_size / 4096 + before.units;
  store->MarkIdleAll();
  // A page read since it was marked idle keeps its unit out of an idle
  // pass.
  std::vector<std::byte> out(kPageSize);
  ASSERT_OK(store->Load(20, MutablePage(out.data(), kPageSize)));
  auto r = store->Writeback({.scans = {{kWritebackIdle, 0, 256}}});
  ASSERT_TRUE(r.has_value()) << r.error().ToString();
  ASSERT_OK(r->status);
  const PageStoreStats after = store->Stats();
  EXPECT_EQ(r->written, before.unit_pages - 14);  // 16..31 but 18, 27 stayed
  EXPECT_LE(after.bd_writes, blocks);
  EXPECT_GT(after.bd_writes, 0u);
  EXPECT_EQ(after.bd_count, after.bd_writes);
  EXPECT_EQ(after.units, 16u);
  EXPECT_TRUE(store->Inspect(1).wb);
  EXPECT_FALSE(store->Inspect(20).wb);
  // Members of a written-back unit may read the backing store; the unit
  // kept in RAM may not.
  EXPECT_TRUE(store->MayReadBacking(1, 1));
  EXPECT_TRUE(store->MayReadBacking(15, 2));
  EXPECT_FALSE(store->MayReadBacking(16, 16));
  EXPECT_FALSE(store->MayReadBacking(256, 1));  // past the end
  EXPECT_LT(after.compr_data_size, before.compr_data_size);
  ExpectRange(*store, 0, data);
  EXPECT_GT(store->Stats().bd_reads, 0u);
  // Written-back units are not reclaimed; their blocks go with their last
  // page.
  for (std::size_t i = 0; i < 256; ++i) ASSERT_OK(store->Discard(i));
  EXPECT_EQ(store->Stats().bd_count, 0u);
  EXPECT_EQ(store->Stats().units, 0u);
  EXPECT_EQ(store->Stats().compr_data_size, 0u);
}

// A writeback_limit that runs out within a group of units still writes the
// units charged before it (a unit takes at most 16 blocks, so a budget of
// 16 takes at least one whole unit), as zram writes up to its limit.
TEST(UnitsTest, ABudgetSpentMidGroupWritesTheUnitsChargedBefore) {
  ScopedTempDir dir;
  auto store = MakeStore(64, 16, WithBacking(dir, 1024));
  const auto data = Pages(0, 64, DenseBase(), 0);
  ASSERT_OK(store->StoreBatch(0, data));
  ASSERT_EQ(store->Stats().units, 4u);
  WritebackBudget budget;
  budget.enabled = true;
  budget.pages = 16;
  auto r = store->Writeback({.scans = {{0, 0, 64}}, .budget = &budget});
  ASSERT_TRUE(r.has_value()) << r.error().ToString();
  EXPECT_EQ(r->status.code(), StatusCode::kIoError) << r->status.ToString();
  EXPECT_GE(r->written, 16u);
  EXPECT_LT(r->written, 64u);
  // What was charged is exactly what was written: a budget page a block.
  EXPECT_EQ(store->Stats().bd_writes, 16 - budget.pages.load());
  ExpectRange(*store, 0, data);
}

// One failed page write does not end the pass: the units are still
// written back after the pages.
TEST(UnitsTest, AFailedPageWriteLeavesTheUnitsToTheirPass) {
  auto file = std::make_shared<testing::DiscardingFile>(256 * kPageSize);
  std::atomic<int> writes{0};
  BackingOptions bo{.file = file};
  bo.wrap_file = testing::FaultyFile([&](const FileIo& io, long result) {
    const bool first = io.kind == FileIo::Kind::kWrite && writes++ == 0;
    return first ? -EIO : result;
  });
  auto backing = BackingStore::Open(bo);
  ASSERT_TRUE(backing.has_value()) << backing.error().ToString();
  auto store = MakeStore(32, 16, {.backing = std::move(*backing)});
  const auto data = Pages(0, 32, DenseBase(), 0);
  ASSERT_OK(store->StoreBatch(0, std::span(data).first(16 * kPageSize)));
  for (std::size_t i = 16; i < 32; ++i) {
    ASSERT_OK(store->Store(
        i, ConstPage(std::span(data).subspan(i * kPageSize, kPageSize))));
  }
  ASSERT_EQ(store->Stats().units, 1u);
  auto r = store->Writeback(
      {.scans = {{0, 0, 32}}, .in_flight = 1, .max_io_pages = 1});
  ASSERT_TRUE(r.has_value()) << r.error().ToString();
  EXPECT_EQ(r->status.code(), StatusCode::kIoError) << r->status.ToString();
  EXPECT_EQ(r->failed, 1u);
  EXPECT_TRUE(store->Inspect(0).wb);
  EXPECT_TRUE(store->Inspect(15).wb);
  ExpectRange(*store, 0, data);
}

// A unit whose writeback does not complete gives back the blocks it wrote,
// and those whose write may still land (a remote given up on), with a
// discard, so that no copy stays on the backing device and no late write
// lands on a block's next content; a block whose write was refused
// outright goes back at once.
TEST(UnitsTest, AnUnfinishedUnitWritebackDiscardsWhatItWrote) {
  const auto data = Pages(0, 16, DenseBase());
  struct Case {
    std::size_t blocks;  // of the backing file
    long fault;          // every write's result; 0: the real one
    bool discarded;      // its blocks come back through a discard
  };
  for (const Case c : {Case{2, 0, true}, Case{64, -ETIMEDOUT, true},
                       Case{64, -EIO, false}}) {
    SCOPED_TRACE(c.fault);
    auto file = std::make_shared<testing::DiscardingFile>(c.blocks * kPageSize);
    BackingOptions bo{.file = file};
    if (c.fault != 0) {
      bo.wrap_file = testing::FaultyFile([&](const FileIo& io, long result) {
        return io.kind == FileIo::Kind::kWrite ? c.fault : result;
      });
    }
    auto backing = BackingStore::Open(bo);
    ASSERT_TRUE(backing.has_value()) << backing.error().ToString();
    std::shared_ptr<BackingStore> bs = std::move(*backing);
    auto store = MakeStore(16, 16, {.backing = bs});
    ASSERT_OK(store->StoreBatch(0, data));
    ASSERT_EQ(store->Stats().units, 1u);
    ASSERT_GT(store->Stats().compr_data_size, 2 * kPageSize);  // > 2 pieces
    auto r = store->Writeback({.scans = {{0, 0, 16}}});
    ASSERT_TRUE(r.has_value()) << r.error().ToString();
    EXPECT_FALSE(r->status.ok());
    EXPECT_EQ(r->written, 0u);
    EXPECT_EQ(bs->blocks_used(), 0u);
    EXPECT_EQ(bs->DiscardFreed() != 0, c.discarded);
    EXPECT_EQ(file->calls.empty(), !c.discarded);
    EXPECT_EQ(bs->blocks_used(), 0u);
    ExpectRange(*store, 0, data);
  }
}

// Readers of every page race writers that overwrite, discard and rewrite
// whole runs (so units detach, get reclaimed and replaced) and compaction.
// Every read sees a page some writer stored there, never another.
TEST(UnitsTest, ReadsRaceDetachReclaimAndCompaction) {
  constexpr std::size_t kPages = 256;
  constexpr std::size_t kVersions = 4;
  auto store = MakeStore(kPages, 8);
  // Version v of page i: corpus page (i + v * 1000), or zeros when
  // discarded; a page's content tells its version.
  auto content = [](std::size_t i, std::size_t v) {
    return Python().page((i + v * 1000) % Python().size());
  };
  for (std::size_t i = 0; i < kPages; i += 8) {
    ASSERT_OK(store->StoreBatch(i, Pages(i, 8)));
  }
  std::atomic<bool> stop{false};
  std::atomic<std::uint64_t> bad{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(t);
      std::vector<std::byte> run(8 * kPageSize);
      while (!stop.load()) {
        const std::size_t i = rng() % kPages;
        const std::size_t v = rng() % kVersions;
        switch (rng() % 4) {
          case 0: {
            const std::size_t u = i / 8 * 8;
            for (std::size_t k = 0; k < 8; ++k) {
              std::memcpy(run.data() + k * kPageSize, content(u + k, v).data(),
                          kPageSize);
            }
            if (!store->StoreBatch(u, run).ok()) bad++;
            break;
          }
          case 1:
            if (!store->Store(i, content(i, v)).ok()) bad++;
            break;
          case 2:
            if (!store->Discard(i).ok()) bad++;
            break;
          default:
            store->Compact();
        }
      }
    });
  }
  for (int t = 0; t < 2; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(100 + t);
      std::vector<std::byte> out(kPageSize);
      const std::vector<std::byte> zero(kPageSize);
      while (!stop.load()) {
        const std::size_t i = rng() % kPages;
        if (!store->Load(i, MutablePage(out.data(), kPageSize)).ok()) {
          bad++;
          continue;
        }
        bool known = std::memcmp(out.data(), zero.data(), kPageSize) == 0;
        for (std::size_t v = 0; v < kVersions && !known; ++v) {
          known = std::memcmp(out.data(), content(i, v).data(), kPageSize) == 0;
        }
        if (!known) bad++;
      }
    });
  }
  RunAtLeast(std::chrono::milliseconds(1500),
             [&] { return store->Stats().units_reclaimed > 0; });
  stop = true;
  for (auto& th : threads) th.join();
  EXPECT_EQ(bad.load(), 0u);
  const PageStoreStats st = store->Stats();
  EXPECT_GT(st.units_reclaimed, 0u);
  // Counters agree with the slots.
  std::uint64_t allocated = 0, in_units = 0;
  for (std::size_t i = 0; i < kPages; ++i) {
    const SlotInfo info = store->Inspect(i);
    allocated += info.allocated;
    in_units += info.unit;
  }
  EXPECT_EQ(st.orig_data_size, allocated * kPageSize);
  EXPECT_EQ(st.unit_pages, in_units);
}

// LoadBatch over whole units (and runs that start inside one) racing one
// writer's unit rewrites, single-page overwrites, compaction and writeback
// of units, on both batch backends. Each page written carries (slot,
// version); a read must return that slot's page, whole, and never an older
// version than the last write that completed before the read began.
TEST(UnitsTest, BatchReadsRacingWritesNeverGoBack) {
  constexpr std::size_t kUnit = 8;
  constexpr std::size_t kPages = 64;
  constexpr std::size_t kRead = 2 * kUnit;
  // Version v of slot i: a corpus page with (i, v) over its first bytes.
  auto make = [](std::size_t i, std::uint64_t v, std::byte* dst) {
    std::memcpy(dst, Python().page((i + v) % Python().size()).data(),
                kPageSize);
    const std::uint64_t stamp[2] = {i, v};
    std::memcpy(dst, stamp, sizeof(stamp));
  };
  for (const BatchBackend backend :
       {BatchBackend::kSerial, BatchBackend::kParallel}) {
    SCOPED_TRACE(BatchBackendName(backend));
    ScopedTempDir dir;
    PageStoreOptions o = WithBacking(dir, 4096);
    o.batch_backend = backend;
    o.batch_size = 4;  // chunks smaller than a unit
    auto store = MakeStore(kPages, kUnit, o);
    std::vector<std::byte> all(kPages * kPageSize);
    for (std::size_t i = 0; i < kPages; ++i) make(i, 0, &all[i * kPageSize]);
    ASSERT_OK(store->StoreBatch(0, all));
    std::atomic<std::uint64_t> completed[kPages] = {};
    std::atomic<bool> stop{false};
    std::atomic<std::uint64_t> bad{0}, reads{0};
    // One writer, so that each slot's versions only rise.
    std::thread writer([&] {
      std::mt19937_64 rng(7);
      std::vector<std::byte> run(kUnit * kPageSize);
      for (std::uint64_t v = 1; !stop.load(); ++v) {
        const std::size_t i = rng() % kPages;
        switch (rng() % 8) {
          case 0: case 1: case 2: {
            const std::size_t u = i / kUnit * kUnit;
            for (std::size_t k = 0; k < kUnit; ++k) {
              make(u + k, v, &run[k * kPageSize]);
            }
            if (!store->StoreBatch(u, run).ok()) bad++;
            for (std::size_t k = 0; k < kUnit; ++k) completed[u + k] = v;
            break;
          }
          case 3: case 4: case 5:
            make(i, v, run.data());
            if (!store->Store(i, ConstPage(run.data(), kPageSize)).ok()) {
              bad++;
            }
            completed[i] = v;
            break;
          case 6:
            store->Compact();
            break;
          default:
            if (rng() % 8 == 0) {
              auto r = store->Writeback({.scans = {{0, 0, kPages}}});
              if (!r.has_value() || !r->status.ok()) bad++;
            }
        }
      }
    });
    std::vector<std::thread> readers;
    for (int t = 0; t < 2; ++t) {
      readers.emplace_back([&, t] {
        std::mt19937_64 rng(100 + t);
        std::vector<std::byte> out(kRead * kPageSize), want(kPageSize);
        std::vector<Status> status(kRead);
        std::uint64_t before[kRead];
        while (!stop.load()) {
          const std::size_t first = rng() % (kPages / kUnit - 2) * kUnit +
                                    (rng() % 3 == 0 ? 1 : 0);
          for (std::size_t k = 0; k < kRead; ++k) {
            before[k] = completed[first + k].load();
          }
          ASSERT_OK(store->LoadBatch(first, out, status));
          reads++;
          for (std::size_t k = 0; k < kRead; ++k) {
            const std::byte* got = &out[k * kPageSize];
            std::uint64_t stamp[2];
            std::memcpy(stamp, got, sizeof(stamp));
            bool ok = status[k].ok() && stamp[0] == first + k &&
                      stamp[1] >= before[k];
            if (ok) {
              make(first + k, stamp[1], want.data());
              ok = std::memcmp(got, want.data(), kPageSize) == 0;
            }
            if (!ok && bad++ < 5) {
              ADD_FAILURE() << "slot " << first + k << ": "
                            << status[k].ToString() << ", stamp (" << stamp[0]
                            << ", " << stamp[1] << "), completed before "
                            << before[k];
            }
          }
        }
      });
    }
    RunAtLeast(std::chrono::milliseconds(1000), [&] {
      const PageStoreStats now = store->Stats();
      return reads.load() > 0 && now.units_reclaimed > 0 && now.bd_writes > 0;
    });
    stop = true;
    writer.join();
    for (auto& th : readers) th.join();
    EXPECT_EQ(bad.load(), 0u);
    EXPECT_GT(reads.load(), 0u);
    const PageStoreStats st = store->Stats();
    EXPECT_GT(st.units_reclaimed, 0u);
    EXPECT_GT(st.bd_writes, 0u);
  }
}

}  // namespace
}  // namespace ztier
