// recompress_test.cc: PageStore::Recompress on known sequences of
// operations: selection and skip rules, the smaller-class rule,
// INCOMPRESSIBLE, threshold and max_pages, IDLE, pages touched during a
// pass, counters, block_state, and every page read back bit-exactly.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "page_store_test_peer.h"
#include "testing/test_util.h"
#include "ztier/backing_store.h"
#include "ztier/page_store.h"

namespace ztier {
namespace {

using Page = std::array<std::byte, kPageSize>;
using testing::ScopedTempDir;

// Page `i`: `noise` random bytes (more noise: a larger object; ~3400 and
// up is HUGE), then words in a random order, which an entropy coder (zstd,
// deflate) packs tighter than lz4 does.
Page MakePage(std::uint64_t i, std::size_t noise, std::uint64_t version = 0) {
  Page p;
  std::mt19937_64 rng(i * 1000003 + version * 7 + 1);
  std::size_t at = 0;
  for (; at < noise && at < kPageSize; ++at) {
    p[at] = static_cast<std::byte>(rng());
  }
  static const char* kWords[] = {"alpha ", "beta ",  "gamma ", "delta ",
                                 "page ",  "store ", "zram ",  "slot\n"};
  while (at < kPageSize) {
    for (const char* c = kWords[rng() % 8]; *c != '\0' && at < kPageSize;) {
      p[at++] = static_cast<std::byte>(*c++);
    }
  }
  std::memcpy(&p[0], &i, 8);  // every page distinct
  return p;
}

Page Filled(std::uint64_t word) {
  Page p;
  for (std::size_t i = 0; i < kPageSize; i += 8) std::memcpy(&p[i], &word, 8);
  return p;
}

struct Fixture {
  ScopedTempDir dir;
  std::shared_ptr<BackingStore> backing;
  std::unique_ptr<PageStore> store;
  std::vector<Page> pages;  // what each slot should read as

  explicit Fixture(std::size_t n, std::vector<std::string> secondary = {"zstd"},
                   BatchBackend backend = BatchBackend::kSerial,
                   bool with_backing = false) {
    PageStoreOptions o;
    o.num_pages = n;
    o.batch_backend = backend;
    for (std::size_t p = 0; p < secondary.size(); ++p) {
      o.recomp[p].codec = secondary[p];
    }
    if (with_backing) {
      BackingOptions bo;
      bo.path = dir.File("backing");
      bo.size_bytes = n * kPageSize;
      auto b = BackingStore::Open(bo);
      EXPECT_TRUE(b.has_value()) << b.error().ToString();
      backing = std::move(*b);
      o.backing = backing;
    }
    auto s = PageStore::Create(o);
    EXPECT_TRUE(s.has_value()) << s.error().ToString();
    store = std::move(*s);
    pages.assign(n, Page{});
  }

  void Put(std::uint64_t i, const Page& p) {
    ASSERT_OK(store->Store(i, ConstPage(p)));
    pages[i] = p;
  }
  // Slots [0, n) with noise spread over the whole range of sizes.
  void Fill(std::size_t n, std::size_t max_noise = 4000) {
    for (std::size_t i = 0; i < n; ++i) Put(i, MakePage(i, (i * 977) % max_noise));
  }

  void ExpectAll() {
    Page out;
    for (std::size_t i = 0; i < pages.size(); ++i) {
      ASSERT_OK(store->Load(i, MutablePage(out)));
      ASSERT_EQ(0, std::memcmp(out.data(), pages[i].data(), kPageSize))
          << "slot " << i;
    }
    std::vector<std::byte> all(pages.size() * kPageSize);
    ASSERT_OK(store->LoadBatch(0, all));
    for (std::size_t i = 0; i < pages.size(); ++i) {
      ASSERT_EQ(0, std::memcmp(&all[i * kPageSize], pages[i].data(), kPageSize))
          << "slot " << i << " (LoadBatch)";
    }
  }

  RecompressResult Run(RecompressRequest r = {}) {
    auto res = store->Recompress(r);
    EXPECT_TRUE(res.has_value()) << res.error().ToString();
    return res.has_value() ? std::move(*res) : RecompressResult{};
  }
};

TEST(RecompressTest, SecondaryCodecsAreMadeAndBadOnesNamed) {
  Fixture f(4, {"zstd", "", "deflate"});
  EXPECT_EQ(f.store->codec_at(0)->name(), "lz4");
  EXPECT_EQ(f.store->codec_at(1)->name(), "zstd");
  EXPECT_EQ(f.store->codec_at(2), nullptr);
  EXPECT_EQ(f.store->codec_at(3)->name(), "deflate");
  EXPECT_EQ(f.store->codec_at(4), nullptr);

  PageStoreOptions o;
  o.num_pages = 4;
  o.recomp[1] = {"nope", ""};
  auto bad = PageStore::Create(o);
  ASSERT_FALSE(bad.has_value());
  EXPECT_NE(bad.error().message().find("priority 2"), std::string::npos)
      << bad.error().ToString();
  o.recomp[1] = {"zstd", "level=99"};
  EXPECT_FALSE(PageStore::Create(o).has_value());
  o.recomp[1] = {"zstd", "level=19"};
  auto good = PageStore::Create(o);
  ASSERT_TRUE(good.has_value());
  EXPECT_EQ((*good)->codec_at(2)->level(), 19);
}

TEST(RecompressTest, WithoutASecondaryCodecIsInvalid) {
  Fixture f(4, {});
  f.Fill(4);
  auto r = f.store->Recompress({});
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code(), StatusCode::kInvalidArgument);
  Fixture g(4, {"", "zstd"});
  RecompressRequest only_1;
  only_1.priority_end = 2;  // priority 1 has no codec
  EXPECT_FALSE(g.store->Recompress(only_1).has_value());
  g.Fill(4);
  EXPECT_GT(g.Run().recompressed, 0u);  // priority 2 does
  EXPECT_EQ(g.store->Inspect(0).priority, 2);
}

// A slot is picked only if a codec above its priority is in the range: in
// [1, 3) with codecs at 1 and 3, a slot already at 1 has nothing to try.
// Nor is it marked INCOMPRESSIBLE there: the top (3) was not tried.
TEST(RecompressTest, OnlySlotsWithACodecAboveThemInRangeArePicked) {
  Fixture f(32, {"zstd", "", "deflate"});
  f.Fill(32, 3000);
  RecompressRequest low;
  low.priority_end = 3;
  const RecompressResult first = f.Run(low);
  EXPECT_EQ(first.candidates, 32u);
  EXPECT_GT(first.recompressed, 0u);
  EXPECT_EQ(first.incompressible, 0u);
  const RecompressResult again = f.Run(low);
  EXPECT_EQ(again.candidates, 32u - first.recompressed);
  EXPECT_EQ(again.attempted, 32u - first.recompressed);
  // Up to the top: every slot is tried with deflate.
  const RecompressResult top = f.Run();
  EXPECT_EQ(top.candidates, 32u);
  f.ExpectAll();
}

// Every secondary codec: the pages read back bit-exactly afterwards, through
// Load and LoadBatch, on both backends.
TEST(RecompressTest, EverySecondaryCodecReadsBackExactly) {
  for (const char* codec : {"zstd", "deflate", "lz4hc", "lzo"}) {
    for (BatchBackend b : {BatchBackend::kSerial, BatchBackend::kParallel}) {
      SCOPED_TRACE(std::string(codec) + " " + std::string(BatchBackendName(b)));
      Fixture f(64, {codec}, b);
      f.Fill(64);
      f.Put(60, Filled(0));
      f.Put(61, Filled(0x0101010101010101ull));
      const PageStoreStats before = f.store->Stats();
      const RecompressResult r = f.Run();
      EXPECT_EQ(r.candidates, 62u);  // the two SAME pages are not
      EXPECT_EQ(r.attempted, 62u);
      const PageStoreStats after = f.store->Stats();
      EXPECT_EQ(after.orig_data_size, before.orig_data_size);
      EXPECT_EQ(after.priority_pages[1], r.recompressed);
      EXPECT_EQ(after.priority_pages[0] + after.priority_pages[1], 62u);
      EXPECT_EQ(after.compr_data_size,
                before.compr_data_size - r.bytes_before + r.bytes_after);
      EXPECT_EQ(after.recompressed_pages, r.recompressed);
      EXPECT_EQ(after.recompress_attempts, r.attempted);
      f.ExpectAll();
    }
  }
}

// A result wins only in a smaller size class of the pool (and below the
// huge size); otherwise the slot keeps its lz4 object. Predicted here from
// the codecs themselves, slot by slot.
TEST(RecompressTest, OnlyASmallerSizeClassWins) {
  Fixture f(200, {"zstd"});
  f.Fill(200);
  const Pool& pool = f.store->pool();
  auto zstd = f.store->codec_at(1)->NewCompressor();
  ASSERT_TRUE(zstd.has_value());
  std::vector<bool> expect_win(200);
  std::size_t wins = 0;
  for (std::size_t i = 0; i < 200; ++i) {
    const SlotInfo si = f.store->Inspect(i);
    Page out;
    const std::size_t z = (*zstd)->Compress(f.pages[i], out);
    expect_win[i] = z != 0 && z < pool.HugeClassSize() &&
                    pool.ClassSizeFor(z) < pool.ClassSizeFor(si.size);
    wins += expect_win[i];
  }
  ASSERT_GT(wins, 10u);
  ASSERT_LT(wins, 200u);  // both outcomes occur
  const RecompressResult r = f.Run();
  EXPECT_EQ(r.recompressed, wins);
  for (std::size_t i = 0; i < 200; ++i) {
    const SlotInfo si = f.store->Inspect(i);
    EXPECT_EQ(si.priority == 1, expect_win[i]) << "slot " << i;
    // One secondary: it is the top, so a slot that did not win is
    // INCOMPRESSIBLE.
    EXPECT_EQ(si.incompressible, !expect_win[i]) << "slot " << i;
  }
  EXPECT_EQ(f.store->Stats().incompressible_pages, 200u - wins);
  f.ExpectAll();
}

// Skipped: SAME, WB, INCOMPRESSIBLE, already at the pass's top priority.
TEST(RecompressTest, SkipsSameWrittenBackIncompressibleAndDone) {
  Fixture f(16, {"zstd", "deflate"}, BatchBackend::kSerial,
            /*with_backing=*/true);
  for (std::uint64_t i = 0; i < 12; ++i) f.Put(i, MakePage(i, 200));
  f.Put(12, Filled(7));
  f.Put(13, MakePage(13, kPageSize));  // random: HUGE, compresses with none
  WritebackRequest wb;
  wb.scans.push_back({0, 0, 2});
  ASSERT_TRUE(f.store->Writeback(wb).has_value());
  ASSERT_TRUE(f.store->Inspect(0).wb);
  ASSERT_TRUE(f.store->Inspect(1).wb);

  RecompressRequest to_1;
  to_1.priority_end = 2;  // zstd only
  RecompressResult r = f.Run(to_1);
  EXPECT_EQ(r.candidates, 11u);  // 2..11 and 13
  EXPECT_EQ(r.recompressed, 10u);
  EXPECT_EQ(r.incompressible, 0u);  // zstd is not the top: not marked
  EXPECT_FALSE(f.store->Inspect(13).incompressible);
  // Again to priority 1: everything is there or cannot go; only 13 is left.
  r = f.Run(to_1);
  EXPECT_EQ(r.candidates, 1u);
  // Up to the top: the zstd slots may still move to deflate; 13 ends
  // INCOMPRESSIBLE, and is never picked again.
  r = f.Run();
  EXPECT_GE(r.candidates, 11u);
  EXPECT_TRUE(f.store->Inspect(13).incompressible);
  EXPECT_TRUE(f.store->Inspect(13).huge);
  r = f.Run();
  EXPECT_EQ(r.candidates, 0u);
  EXPECT_EQ(f.store->Inspect(12).priority, 0);
  f.ExpectAll();
  // Overwriting clears INCOMPRESSIBLE and the priority.
  f.Put(13, MakePage(13, 100));
  f.Put(2, MakePage(2, 100, 1));
  EXPECT_FALSE(f.store->Inspect(13).incompressible);
  EXPECT_EQ(f.store->Inspect(2).priority, 0);
  std::uint64_t marked = 0;
  for (std::uint64_t i = 0; i < 16; ++i) marked += f.store->Inspect(i).incompressible;
  EXPECT_EQ(f.store->Stats().incompressible_pages, marked);
  f.ExpectAll();
}

// A huge page that zstd packs into a normal class stops being huge.
TEST(RecompressTest, HugePagesRecompressedAreNoLongerHuge) {
  Fixture f(8, {"zstd"});
  // Noise of ~2900 bytes: lz4 lands at the huge size here, zstd below it.
  for (std::uint64_t i = 0; i < 8; ++i) f.Put(i, MakePage(i, 2950 + i * 40));
  const PageStoreStats before = f.store->Stats();
  ASSERT_GT(before.huge_pages, 0u);
  RecompressRequest huge;
  huge.filter = kRecompressHuge;
  const RecompressResult r = f.Run(huge);
  EXPECT_EQ(r.candidates, before.huge_pages);
  const PageStoreStats after = f.store->Stats();
  EXPECT_EQ(after.huge_pages, before.huge_pages - r.recompressed);
  EXPECT_EQ(after.huge_pages_since, before.huge_pages_since);
  EXPECT_GT(r.recompressed, 0u);
  f.ExpectAll();
}

TEST(RecompressTest, ThresholdPicksLargeObjectsAndBoundsTheResult) {
  Fixture f(100, {"zstd"});
  f.Fill(100, 3000);
  std::size_t at_least = 0;
  for (std::size_t i = 0; i < 100; ++i) {
    at_least += f.store->Inspect(i).size >= 1500;
  }
  RecompressRequest r;
  r.threshold = 1500;
  const RecompressResult res = f.Run(r);
  EXPECT_EQ(res.candidates, at_least);
  for (std::size_t i = 0; i < 100; ++i) {
    const SlotInfo si = f.store->Inspect(i);
    if (si.priority == 1) {
      EXPECT_LT(si.size, 1500u) << "slot " << i;
    }
  }
  r.threshold = f.store->pool().HugeClassSize();
  auto bad = f.store->Recompress(r);
  ASSERT_FALSE(bad.has_value());
  EXPECT_EQ(bad.error().code(), StatusCode::kInvalidArgument);
  f.ExpectAll();
}

// max_pages counts attempts, largest objects first; IDLE is cleared on the
// slots tried and only on them; the idle and huge filters select.
TEST(RecompressTest, MaxPagesLargestFirstAndIdleCleared) {
  Fixture f(40, {"zstd"});
  f.Fill(40, 3300);
  f.store->MarkIdleAll();
  std::vector<std::pair<std::size_t, std::uint64_t>> by_size;
  for (std::uint64_t i = 0; i < 40; ++i) {
    by_size.emplace_back(f.store->Inspect(i).size, i);
  }
  std::sort(by_size.rbegin(), by_size.rend());
  RecompressRequest r;
  r.filter = kRecompressIdle;
  r.max_pages = 5;
  const RecompressResult res = f.Run(r);
  EXPECT_EQ(res.candidates, 40u);
  EXPECT_EQ(res.attempted, 5u);
  std::size_t idle = 0;
  for (std::uint64_t i = 0; i < 40; ++i) idle += f.store->Inspect(i).idle;
  EXPECT_EQ(idle, 35u);
  // The five tried are among the largest (64-byte buckets: ties may go
  // either way inside the fifth one's bucket).
  const std::size_t fifth = by_size[4].first / 64;
  for (std::size_t k = 0; k < 40; ++k) {
    const auto [size, i] = by_size[k];
    if (size / 64 > fifth) {
      EXPECT_FALSE(f.store->Inspect(i).idle) << i;
    }
    if (size / 64 < fifth) {
      EXPECT_TRUE(f.store->Inspect(i).idle) << i;
    }
  }
  // type=idle skips what is no longer idle.
  const RecompressResult again = f.Run(r);
  EXPECT_EQ(again.candidates, 35u);
  f.ExpectAll();
}

// An object that does not decompress is left as it is (IDLE too), and its
// page stays an error (never other data); the pass goes on past it and
// max_pages counts only the slots it compressed again (zram's recompress_slot()
// decrements num_recomp_pages after compressing; its recompress_store()
// stops at a slot it cannot read, ztier goes on: docs/conformance.md).
TEST(RecompressTest, DamagedObjectsAreSkippedAndNotCountedInMaxPages) {
  for (const BatchBackend backend :
       {BatchBackend::kSerial, BatchBackend::kParallel}) {
    SCOPED_TRACE(backend == BatchBackend::kSerial ? "serial" : "parallel");
    Fixture f(40, {"zstd"}, backend);
    f.Fill(40, 3000);
    std::vector<std::pair<std::size_t, std::uint64_t>> by_size;
    for (std::uint64_t i = 0; i < 40; ++i) {
      ASSERT_FALSE(f.store->Inspect(i).huge) << i;
      by_size.emplace_back(f.store->Inspect(i).size, i);
    }
    std::sort(by_size.rbegin(), by_size.rend());
    // The three largest: the first the pass picks.
    std::vector<std::uint64_t> damaged;
    for (std::size_t k = 0; k < 3; ++k) {
      ASSERT_TRUE(PageStoreTestPeer::CorruptSlot(*f.store, by_size[k].second));
      damaged.push_back(by_size[k].second);
    }
    f.store->MarkIdleAll();
    RecompressRequest r;
    r.max_pages = 5;
    const RecompressResult res = f.Run(r);
    EXPECT_OK(res.status);
    EXPECT_EQ(res.attempted, 5u);
    EXPECT_EQ(res.damaged, 3u);
    // zstd is the top priority: each slot tried either won or is now
    // INCOMPRESSIBLE.
    EXPECT_EQ(res.recompressed + res.incompressible, 5u);
    EXPECT_EQ(f.store->Stats().decompress_fail, 3u);
    Page out;
    for (const std::uint64_t i : damaged) {
      EXPECT_EQ(f.store->Load(i, MutablePage(out)).code(),
                StatusCode::kCorruption)
          << i;
      EXPECT_EQ(f.store->Inspect(i).priority, 0) << i;
      EXPECT_FALSE(f.store->Inspect(i).incompressible) << i;
      // Still idle: not read (recompress_slot() clears ZRAM_IDLE once it
      // read the page).
      EXPECT_TRUE(f.store->Inspect(i).idle) << i;
      f.Put(i, MakePage(i, 100));  // rewritten: readable again
    }
    f.ExpectAll();
  }
}

// Pages stored, discarded or read while the pass runs keep their newest
// content; the pass counts them as changed. `pace` runs between batches,
// so it touches slots the pass has picked but not reached.
TEST(RecompressTest, PagesTouchedDuringThePassKeepTheirNewestContent) {
  Fixture f(64, {"zstd"});
  f.Fill(64, 2000);
  int calls = 0;
  Page out;
  RecompressRequest r;
  r.pace = [&] {
    if (calls++ == 0) {
      for (std::uint64_t i = 0; i < 64; i += 4) {
        f.Put(i, MakePage(i, 1000, 5));                    // stored
        EXPECT_OK(f.store->Discard(i + 1));                // discarded
        f.pages[i + 1] = Page{};
        EXPECT_OK(f.store->Load(i + 2, MutablePage(out)));  // read
      }
    }
    return true;
  };
  const RecompressResult res = f.Run(r);
  EXPECT_GT(calls, 1);
  EXPECT_GT(res.changed, 0u);
  EXPECT_LE(res.changed, 48u);
  EXPECT_EQ(res.candidates, 64u);
  f.ExpectAll();
  // The pace callback can end the pass early.
  Fixture g(64, {"zstd"});
  g.Fill(64, 2000);
  RecompressRequest stop;
  stop.pace = [] { return false; };
  const RecompressResult one = g.Run(stop);
  EXPECT_EQ(one.attempted, kMaxPassBatchSize);
  EXPECT_EQ(g.Run().candidates, 64u - one.recompressed - one.incompressible);
  g.ExpectAll();
}

// Compressed writeback keeps a recompressed slot's priority, so its read
// decompresses with the secondary codec.
TEST(RecompressTest, RecompressedPagesWrittenBackCompressedReadBack) {
  for (bool compressed : {false, true}) {
    SCOPED_TRACE(compressed ? "compressed" : "pages");
    Fixture f(32, {"zstd"}, BatchBackend::kSerial, /*with_backing=*/true);
    f.Fill(32, 3000);
    ASSERT_GT(f.Run().recompressed, 0u);
    WritebackRequest wb;
    wb.scans.push_back({0, 0, 32});
    wb.compressed = compressed;
    auto w = f.store->Writeback(wb);
    ASSERT_TRUE(w.has_value());
    EXPECT_EQ(w->written, 32u);
    const PageStoreStats s = f.store->Stats();
    for (int p = 0; p < kMaxCodecPriorities; ++p) {
      EXPECT_EQ(s.priority_pages[p], 0u) << p;
    }
    f.ExpectAll();
  }
}

TEST(RecompressTest, BlockStateListsAllocatedSlotsWithTheirFlags) {
  std::uint32_t now = 1000;
  PageStoreOptions o;
  o.num_pages = 8;
  o.recomp[0] = {"zstd", ""};
  o.clock = [&] { return now; };
  auto store = std::move(*PageStore::Create(o));
  const Page same = Filled(0);
  ASSERT_OK(store->Store(1, same));
  now = 1234;
  ASSERT_OK(store->Store(3, MakePage(3, kPageSize)));  // HUGE
  ASSERT_OK(store->Store(5, MakePage(5, 500)));
  store->MarkIdleAll();
  ASSERT_OK(store->Store(6, MakePage(6, 600)));
  RecompressRequest r;
  r.filter = kRecompressIdle;
  ASSERT_TRUE(store->Recompress(r).has_value());
  store->MarkIdleAll();
  EXPECT_EQ(store->FormatBlockState(),
            "           1         1000.000000 s.....\n"
            "           3         1234.000000 ..hi.n\n"
            "           5         1234.000000 ...ir.\n"
            "           6         1234.000000 ...i..\n");
  EXPECT_EQ(store->FormatBlockState(4, 2),
            "           5         1234.000000 ...ir.\n");
  EXPECT_EQ(store->FormatBlockState(9, 2), "");
}

// With the pool's reserve spent, a win cannot be allocated: the pass stops
// with kResourceExhausted and the slot keeps its old object.
TEST(RecompressTest, AFailedAllocationKeepsTheOldObject) {
  PageStoreOptions o;
  o.num_pages = 4096;
  o.recomp[0] = {"zstd", ""};
  o.mem_limit = 256 * 1024;
  o.prealloc = true;
  auto store = std::move(*PageStore::Create(o));
  // Past mem_limit, up to what the reserve holds (it does not grow).
  store->SetMemLimit(std::size_t{1} << 30);
  std::vector<Page> pages;
  std::uint64_t n = 0;
  for (; n < 4096; ++n) {
    // One size only, so that the pool's pages are all of one class and
    // the reserve has none left for zstd's smaller class.
    const Page p = MakePage(n, 1900);
    if (!store->Store(n, ConstPage(p)).ok()) break;
    pages.push_back(p);
  }
  ASSERT_GT(n, 10u);
  ASSERT_LT(n, 4096u);
  const std::uint64_t refused = store->Stats().reject_alloc_fail;
  ASSERT_GT(refused, 0u);
  auto r = store->Recompress({});
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->status.code(), StatusCode::kResourceExhausted)
      << r->status.ToString() << " recompressed " << r->recompressed;
  // The pass's refusal is its result, not a store refused (zswap's
  // reject_alloc_fail, mm/zswap.c; zram's recompress_slot counts none).
  EXPECT_EQ(store->Stats().reject_alloc_fail, refused);
  Page out;
  for (std::uint64_t i = 0; i < n; ++i) {
    ASSERT_OK(store->Load(i, MutablePage(out)));
    ASSERT_EQ(0, std::memcmp(out.data(), pages[i].data(), kPageSize)) << i;
  }
}

}  // namespace
}  // namespace ztier
