// File: pool/pool_test.cc
//
// Tests for ztier::Pool: class geometry, round trips with content checks,
// handles surviving compaction, memory overhead bounds on a realistic size
// mix, statistics text, and a concurrency test (run under TSan in CI, so it
// is kept to a few seconds).
#include "ztier/pool.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include <lz4.h>

#include "corpus/corpus.h"
#include "testing/test_util.h"

namespace ztier {
namespace {

std::unique_ptr<Pool> NewPool(PoolOptions options = {}) {
  auto pool = Pool::Create(options);
  EXPECT_TRUE(pool.has_value());
  return std::move(*pool);
}

// Deterministic contents for (tag, size): every byte depends on the tag.
void Fill(std::vector<std::byte>& buf, std::uint64_t tag, std::size_t size) {
  buf.resize(size);
  std::uint64_t x = tag * 0x9E3779B97F4A7C15ull + 1;
  for (std::size_t i = 0; i < size; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    buf[i] = static_cast<std::byte>(x);
  }
}

bool Matches(const Pool& pool, Handle h, std::uint64_t tag, std::size_t size) {
  std::vector<std::byte> want;
  Fill(want, tag, size);
  bool ok = false;
  pool.Read(h, [&](std::span<const std::byte> got) {
    ok = got.size() == size && std::memcmp(got.data(), want.data(), size) == 0;
  });
  return ok;
}

struct Obj {
  Handle h = kInvalidHandle;
  std::uint64_t tag = 0;
  std::size_t size = 0;
};

Obj Put(Pool& pool, std::uint64_t tag, std::size_t size) {
  Obj o{pool.Malloc(size), tag, size};
  EXPECT_NE(o.h, kInvalidHandle);
  std::vector<std::byte> buf;
  Fill(buf, tag, size);
  pool.Write(o.h, buf);
  return o;
}

// Sizes like lz4 on anonymous memory: drawn from the histogram (256-byte
// buckets) of LZ4_compress_default on the 4059 non-same-filled pages of
// anon-python (testdata/): mean ~1480 B, 46% between 1280 and 1536,
// 2% incompressible. Sizes >= HugeClassSize() (3632) are stored raw, as the
// store does, so they count as 4096.
std::vector<std::size_t> RealisticSizes(std::mt19937_64& rng, std::size_t n) {
  static constexpr int kBucketCounts[16] = {0,   2,   184, 511, 481, 1878,
                                            337, 81,  301, 174, 2,   6,
                                            7,   4,   5,   5 + 81};
  std::discrete_distribution<int> bucket(std::begin(kBucketCounts),
                                         std::end(kBucketCounts));
  std::vector<std::size_t> sizes;
  for (std::size_t i = 0; i < n; ++i) {
    const int b = bucket(rng);
    std::size_t s = 256 * b + rng() % 256;
    if (b == 15 && rng() % 86 < 81) s = 4096;  // the raw pages
    if (s >= 3632) s = 4096;
    sizes.push_back(s);
  }
  return sizes;
}

TEST(PoolTest, CreateRejectsBadOptions) {
  PoolOptions o;
  o.max_pages_per_zspage = 0;
  EXPECT_FALSE(Pool::Create(o).has_value());
  o.max_pages_per_zspage = 17;
  EXPECT_FALSE(Pool::Create(o).has_value());
  o = PoolOptions{};
  o.arena_bytes = 4096;
  EXPECT_FALSE(Pool::Create(o).has_value());
}

TEST(PoolTest, ClassGeometryMatchesZsmalloc) {
  auto pool = NewPool();
  EXPECT_EQ(pool->HugeClassSize(), 3632u);
  EXPECT_EQ(pool->ClassSizeFor(1), 32u);
  EXPECT_EQ(pool->ClassSizeFor(32), 32u);
  EXPECT_GE(pool->ClassSizeFor(33), 48u);
  EXPECT_EQ(pool->ClassSizeFor(3631), 3632u);
  EXPECT_EQ(pool->ClassSizeFor(3632), 4096u);  // at the watermark: huge
  EXPECT_EQ(pool->ClassSizeFor(4096), 4096u);
  // zsmalloc's documented example puts 1568 B in the 1632 B class (2 pages,
  // 5 objects) because it compares integer percentages; exact fractions
  // give 1568 B its own class: 5 pages, 13 objects, 96 B of tail waste.
  EXPECT_EQ(pool->ClassSizeFor(1568), 1568u);
  for (std::size_t s = 1; s <= 4096; ++s) {
    ASSERT_GE(pool->ClassSizeFor(s), s);
    ASSERT_EQ(pool->ClassSizeFor(s) % 16, 0u);
  }
  auto rows = pool->ClassStats();
  // Last, the packed page class (MallocWholePage): one object a page.
  ASSERT_FALSE(rows.empty());
  EXPECT_EQ(rows.back().size, 4096u);
  EXPECT_EQ(rows.back().pages_per_zspage, 8u);
  EXPECT_EQ(rows.back().objs_per_zspage, 8u);
  rows.pop_back();
  EXPECT_EQ(rows.size(), 119u);  // exact waste fractions; zsmalloc has 123
  for (const auto& r : rows) {
    EXPECT_GE(r.pages_per_zspage, 1u);
    EXPECT_LE(r.pages_per_zspage, 8u);
    EXPECT_EQ(r.objs_per_zspage, r.pages_per_zspage * 4096 / r.size);
  }
  EXPECT_EQ(rows.back().size, 4096u);
  EXPECT_EQ(rows.back().pages_per_zspage, 1u);
  EXPECT_EQ(rows.back().objs_per_zspage, 1u);

  // Chain 4 and 16 watermarks, as in the kernel documentation.
  PoolOptions o;
  o.max_pages_per_zspage = 4;
  EXPECT_EQ(NewPool(o)->HugeClassSize(), 3264u);
  o.max_pages_per_zspage = 16;
  EXPECT_EQ(NewPool(o)->HugeClassSize(), 3840u);
}

TEST(PoolTest, OnlyTouchedPagesAreCounted) {
  auto pool = NewPool();
  EXPECT_EQ(pool->TotalBytes(), 0u);
  // Class 32: 1 page per zspage. Class 1632: several pages; one object must
  // cost one page, not the whole zspage.
  Obj a = Put(*pool, 1, 1600);
  const PoolStats s = pool->Stats();
  EXPECT_EQ(s.pages_used, 1u);
  EXPECT_EQ(s.total_bytes, 4096 + s.metadata_bytes);
  EXPECT_EQ(pool->TotalBytes(), s.total_bytes);
  EXPECT_EQ(s.objects, 1u);
  EXPECT_EQ(s.object_bytes, 1600u);
  EXPECT_LT(s.metadata_bytes, 4096u);
  Obj b = Put(*pool, 2, 1600);
  Obj c = Put(*pool, 3, 1600);  // spans into page 2
  EXPECT_EQ(pool->Stats().pages_used, 2u);
  EXPECT_TRUE(Matches(*pool, a.h, a.tag, a.size));
  EXPECT_TRUE(Matches(*pool, b.h, b.tag, b.size));
  EXPECT_TRUE(Matches(*pool, c.h, c.tag, c.size));
  pool->Free(a.h);
  pool->Free(b.h);
  pool->Free(c.h);
  // The emptied zspage stays as the class's spare, pages and all, until
  // the next Malloc of the class or a Compact().
  EXPECT_EQ(pool->Stats().pages_used, 2u);
  Obj d = Put(*pool, 4, 1600);  // reuses the spare: no new page
  EXPECT_EQ(pool->Stats().pages_used, 2u);
  EXPECT_TRUE(Matches(*pool, d.h, d.tag, d.size));
  pool->Free(d.h);
  EXPECT_EQ(pool->Compact(), 2u);
  EXPECT_EQ(pool->Stats().pages_used, 0u);
  EXPECT_EQ(pool->Stats().objects, 0u);
  EXPECT_EQ(pool->Stats().object_bytes, 0u);
}

TEST(PoolTest, HugeObjectsTakeOnePageEach) {
  auto pool = NewPool();
  std::vector<Obj> objs;
  for (int i = 0; i < 10; ++i) {
    objs.push_back(Put(*pool, i, i % 2 ? 4096 : pool->HugeClassSize()));
  }
  EXPECT_EQ(pool->Stats().pages_used, 10u);
  for (const Obj& o : objs) {
    EXPECT_EQ(pool->ObjectSize(o.h), o.size);
    EXPECT_TRUE(Matches(*pool, o.h, o.tag, o.size));
  }
  for (const Obj& o : objs) pool->Free(o.h);
  EXPECT_EQ(pool->Stats().pages_used, 1u);  // the huge class's spare
  pool->Compact();
  EXPECT_EQ(pool->Stats().pages_used, 0u);
}

// The packed page class: pages held as the huge class holds them, one
// descriptor for every 8 (the default chain), and the same handling of
// holes as every class: compaction moves the objects left.
TEST(PoolTest, WholePagesShareDescriptors) {
  for (const bool reserve : {false, true}) {
    SCOPED_TRACE(reserve ? "reserve" : "lazy");
    PoolOptions options;
    if (reserve) options.prealloc_bytes = 8 << 20;
    auto packed = NewPool(options);
    auto huge = NewPool(options);
    constexpr int kPages = 1024;
    std::vector<Obj> objs;
    std::vector<std::byte> buf;
    for (int i = 0; i < kPages; ++i) {
      Obj o{packed->MallocWholePage(), static_cast<std::uint64_t>(i), 4096};
      ASSERT_NE(o.h, kInvalidHandle);
      Fill(buf, o.tag, o.size);
      packed->Write(o.h, buf);
      objs.push_back(o);
      ASSERT_NE(huge->Malloc(4096), kInvalidHandle);
    }
    const PoolStats p = packed->Stats();
    const PoolStats h = huge->Stats();
    EXPECT_EQ(p.pages_used, std::size_t{kPages});
    EXPECT_EQ(h.pages_used, std::size_t{kPages});
    // 128 descriptors of 32 bytes instead of 1024 (the tables grow in
    // chunks, so allow for a part-used one).
    EXPECT_GE(h.metadata_bytes, p.metadata_bytes + (kPages - 128) * 32)
        << h.metadata_bytes << " " << p.metadata_bytes;
    for (const Obj& o : objs) {
      ASSERT_EQ(packed->ObjectSize(o.h), 4096u);
      ASSERT_TRUE(Matches(*packed, o.h, o.tag, o.size));
    }

    // Every other page freed: each zspage keeps its pages (a hole is not
    // given back alone) until compaction moves the survivors together.
    std::vector<Obj> kept;
    for (std::size_t i = 0; i < objs.size(); ++i) {
      if (i % 2 == 0) {
        packed->Free(objs[i].h);
      } else {
        kept.push_back(objs[i]);
      }
    }
    EXPECT_EQ(packed->Stats().pages_used, std::size_t{kPages});
    packed->Compact();
    EXPECT_EQ(packed->Stats().pages_used, kept.size());
    for (const Obj& o : kept) ASSERT_TRUE(Matches(*packed, o.h, o.tag, o.size));
    for (const Obj& o : kept) packed->Free(o.h);
    packed->Compact();
    EXPECT_EQ(packed->Stats().pages_used, 0u);
  }
}

// Compact() counts what the held pages fell by, and CompactablePages()
// says so beforehand, also where moves touch a destination's untouched
// tail and where only packing the last partial zspage frees pages (whole
// pages, 8 to a zspage: every move touches a page or frees one).
TEST(PoolTest, CompactCountsWhatTheHeldPagesFellBy) {
  for (const bool reserve : {false, true}) {
    SCOPED_TRACE(reserve ? "reserve" : "lazy");
    PoolOptions options;
    if (reserve) options.prealloc_bytes = 4 << 20;
    auto pool = NewPool(options);
    std::vector<std::byte> page(4096, std::byte{0x5a});
    auto whole = [&](int n) {
      std::vector<Handle> hs;
      for (int i = 0; i < n; ++i) {
        hs.push_back(pool->MallocWholePage());
        pool->Write(hs.back(), page);
      }
      return hs;
    };
    auto compact = [&](std::size_t want_freed, std::size_t want_held) {
      const std::size_t held = pool->Stats().pages_used;
      const std::size_t compacted = pool->Stats().pages_compacted;
      EXPECT_EQ(pool->CompactablePages(), want_freed);
      EXPECT_EQ(pool->Compact(), want_freed);
      EXPECT_EQ(pool->Stats().pages_used, want_held);
      EXPECT_EQ(held - want_held, want_freed);
      EXPECT_EQ(pool->Stats().pages_compacted - compacted, want_freed);
    };
    // A full zspage b, 6 of 8 pages of a: b's 2 survivors move into a's
    // pages 6 and 7, which moving touches, and b's 8 pages go: 6 net.
    std::vector<Handle> b = whole(8);
    std::vector<Handle> a = whole(6);
    for (int i = 2; i < 8; ++i) pool->Free(b[i]);
    EXPECT_EQ(pool->Stats().pages_used, 14u);
    compact(6, 8);
    for (int i = 0; i < 2; ++i) pool->Free(b[i]);
    for (Handle h : a) pool->Free(h);
    pool->Compact();
    // One zspage, its first 7 pages freed: only packing the last partial
    // zspage gives them back (no whole zspage's worth of free slots).
    std::vector<Handle> c = whole(8);
    for (int i = 0; i < 7; ++i) pool->Free(c[i]);
    compact(7, 1);
    pool->Free(c[7]);
    compact(1, 0);  // the empty zspage, kept as the class's spare
  }
}

TEST(PoolTest, RandomRoundTrips) {
  auto pool = NewPool();
  std::mt19937_64 rng(301);
  std::vector<Obj> live;
  std::uint64_t tag = 0;
  std::vector<std::byte> out(4096);
  for (int round = 0; round < 20000; ++round) {
    const bool alloc = live.empty() || rng() % 100 < 55;
    if (alloc) {
      const std::size_t size = 1 + rng() % 4096;
      live.push_back(Put(*pool, ++tag, size));
      ASSERT_NE(live.back().h, kInvalidHandle);
    } else {
      const std::size_t i = rng() % live.size();
      const Obj o = live[i];
      ASSERT_EQ(pool->ObjectSize(o.h), o.size);
      ASSERT_EQ(pool->ReadInto(o.h, out), o.size);
      std::vector<std::byte> want;
      Fill(want, o.tag, o.size);
      ASSERT_EQ(std::memcmp(out.data(), want.data(), o.size), 0);
      pool->Free(o.h);
      live[i] = live.back();
      live.pop_back();
    }
    if (round % 5000 == 4999) pool->Compact();
  }
  std::size_t bytes = 0;
  for (const Obj& o : live) {
    ASSERT_TRUE(Matches(*pool, o.h, o.tag, o.size)) << o.h;
    bytes += o.size;
  }
  EXPECT_EQ(pool->Stats().objects, live.size());
  EXPECT_EQ(pool->Stats().object_bytes, bytes);
  for (const Obj& o : live) pool->Free(o.h);
  pool->Compact();  // releases the spares
  EXPECT_EQ(pool->Stats().pages_used, 0u);
}

TEST(PoolTest, HandlesSurviveCompaction) {
  auto pool = NewPool();
  std::mt19937_64 rng(7);
  std::vector<Obj> objs;
  for (int i = 0; i < 6000; ++i) {
    objs.push_back(Put(*pool, i, 32 + rng() % 3000));
  }
  std::shuffle(objs.begin(), objs.end(), rng);
  // Keep one in five: leaves sparse zspages everywhere.
  std::vector<Obj> kept;
  for (std::size_t i = 0; i < objs.size(); ++i) {
    if (i % 5 == 0) {
      kept.push_back(objs[i]);
    } else {
      pool->Free(objs[i].h);
    }
  }
  const std::size_t before = pool->TotalBytes();
  const std::size_t pages_before = pool->Stats().pages_used;
  const auto freeable_before = pool->ClassStats();
  std::size_t freeable = 0;
  for (const auto& r : freeable_before) freeable += r.freeable;
  EXPECT_GT(freeable, 0u);
  const std::size_t compactable = pool->CompactablePages();

  const std::size_t freed = pool->Compact();
  const std::size_t after = pool->TotalBytes();
  EXPECT_GT(freed, 0u);
  EXPECT_EQ(pool->Stats().pages_compacted, freed);
  // Net of the destination pages the moves touched: what the held pages
  // fell by, and what CompactablePages said a compaction would free.
  EXPECT_EQ(pages_before - pool->Stats().pages_used, freed);
  EXPECT_EQ(compactable, freed);
  EXPECT_LT(after, before / 2);
  for (const Obj& o : kept) {
    ASSERT_EQ(pool->ObjectSize(o.h), o.size);
    ASSERT_TRUE(Matches(*pool, o.h, o.tag, o.size));
  }
  // At most one non-full zspage per class after compaction.
  for (const auto& r : pool->ClassStats()) {
    std::size_t nonfull = 0;
    for (int k = 0; k < 10; ++k) nonfull += r.fullness[k];
    EXPECT_LE(nonfull, 1u) << "class " << r.class_index;
    EXPECT_EQ(r.freeable, 0u);
  }
  // A second compaction finds nothing to do.
  EXPECT_EQ(pool->CompactablePages(), 0u);
  EXPECT_EQ(pool->Compact(), 0u);
  EXPECT_EQ(pool->Stats().pages_compacted, freed);
  // Allocation still works into the compacted pool, and contents hold.
  for (int i = 0; i < 500; ++i) kept.push_back(Put(*pool, 100000 + i, 1 + rng() % 4096));
  for (const Obj& o : kept) ASSERT_TRUE(Matches(*pool, o.h, o.tag, o.size));
  for (const Obj& o : kept) pool->Free(o.h);
  pool->Compact();  // releases the spares
  EXPECT_EQ(pool->Stats().pages_used, 0u);
}

TEST(PoolTest, CompactionPacksTheLastPartialZspage) {
  auto pool = NewPool();
  // 720 B objects: 17 per 3-page zspage. Fill 16 (3 pages touched), free
  // the first 14: the last two slide to slots 0 and 1 and pages 1 and 2 go
  // back.
  ASSERT_EQ(pool->ClassSizeFor(720), 720u);
  std::vector<Obj> objs;
  for (int i = 0; i < 16; ++i) objs.push_back(Put(*pool, i, 720));
  EXPECT_EQ(pool->Stats().pages_used, 3u);
  for (int i = 0; i < 14; ++i) pool->Free(objs[i].h);
  EXPECT_EQ(pool->Stats().pages_used, 3u);  // tail still held
  EXPECT_EQ(pool->Compact(), 2u);
  EXPECT_EQ(pool->Stats().pages_used, 1u);
  EXPECT_EQ(pool->Stats().pages_compacted, 2u);
  EXPECT_TRUE(Matches(*pool, objs[14].h, objs[14].tag, objs[14].size));
  EXPECT_TRUE(Matches(*pool, objs[15].h, objs[15].tag, objs[15].size));
  pool->Free(objs[14].h);
  pool->Free(objs[15].h);
}

// Stores `sizes`, frees a random half, compacts; returns the TotalBytes /
// object-bytes ratios when stored and after compaction, checking contents.
struct Overhead {
  double stored = 0;
  double compacted = 0;
  std::size_t metadata = 0;
};
Overhead MeasureOverhead(const std::vector<std::size_t>& sizes,
                         std::uint64_t seed) {
  auto pool = NewPool();
  std::mt19937_64 rng(seed);
  std::vector<Obj> objs;
  std::size_t bytes = 0;
  for (std::size_t s : sizes) {
    objs.push_back(Put(*pool, objs.size(), s));
    bytes += s;
  }
  Overhead r;
  r.stored = static_cast<double>(pool->TotalBytes()) / bytes;
  r.metadata = pool->Stats().metadata_bytes;
  std::shuffle(objs.begin(), objs.end(), rng);
  std::size_t half_bytes = 0;
  for (std::size_t i = 0; i < objs.size(); ++i) {
    if (i % 2) {
      pool->Free(objs[i].h);
    } else {
      half_bytes += objs[i].size;
    }
  }
  pool->Compact();
  r.compacted = static_cast<double>(pool->TotalBytes()) / half_bytes;
  for (std::size_t i = 0; i < objs.size(); i += 2) {
    EXPECT_TRUE(Matches(*pool, objs[i].h, objs[i].tag, objs[i].size));
  }
  return r;
}

// The lead's targets, on the real thing: anon-python's pages compressed
// with LZ4 (same-filled pages skipped, as the store does; pages compressing
// to >= HugeClassSize() stored raw): TotalBytes <= 1.05 x object bytes when
// stored, <= 1.10 x after freeing a random half and compacting.
TEST(PoolTest, MemoryOverheadOnAnonPython) {
  auto pages =
      corpus::LoadPageSet(::ztier::testing::CorpusDir() + "/anon-python.pages.zst");
  ASSERT_TRUE(pages.has_value()) << pages.error().ToString();
  const std::size_t huge = NewPool()->HugeClassSize();
  std::vector<std::size_t> sizes;
  std::vector<char> dst(LZ4_compressBound(4096));
  for (std::size_t i = 0; i < pages->size(); ++i) {
    const auto page = pages->page(i);
    std::uint64_t w0;
    std::memcpy(&w0, page.data(), 8);
    bool same = true;
    for (std::size_t off = 8; off < 4096 && same; off += 8) {
      std::uint64_t w;
      std::memcpy(&w, page.data() + off, 8);
      same = w == w0;
    }
    if (same) continue;
    const int n = LZ4_compress_default(
        reinterpret_cast<const char*>(page.data()), dst.data(), 4096,
        static_cast<int>(dst.size()));
    ASSERT_GT(n, 0);
    sizes.push_back(static_cast<std::size_t>(n) >= huge ? 4096 : n);
  }
  const Overhead r = MeasureOverhead(sizes, 1);
  std::printf("anon-python lz4 (%zu objects): stored %.4f, compacted %.4f "
              "(metadata %zu B)\n",
              sizes.size(), r.stored, r.compacted, r.metadata);
  EXPECT_LE(r.stored, 1.05);
  EXPECT_LE(r.compacted, 1.10);
}

// The same targets on synthetic sizes drawn from anon-python's histogram.
// Uniform within each 256-byte bucket, they spread over more classes (~88
// vs 73) than the real, clustered sizes, so each class's partly used last
// page weighs more (it is the largest waste: ~2.5-3%, then rounding up to
// the class size ~1.3%, metadata ~1%); measured 1.052..1.058 stored and
// 1.08..1.09 compacted. The bounds catch regressions, the test above the
// targets.
TEST(PoolTest, MemoryOverheadOnRealisticSizes) {
  for (std::uint64_t seed : {1, 2, 3}) {
    std::mt19937_64 rng(seed);
    const Overhead r = MeasureOverhead(RealisticSizes(rng, 4096), seed);
    std::printf("synthetic seed %llu: stored %.4f, compacted %.4f "
                "(metadata %zu B)\n",
                static_cast<unsigned long long>(seed), r.stored, r.compacted,
                r.metadata);
    EXPECT_LE(r.stored, 1.065);
    EXPECT_LE(r.compacted, 1.10);
  }
}

// Uniform sizes (the brief's alternative mix): fewer objects per class, so
// per-class partial zspages weigh more; a looser sanity bound.
TEST(PoolTest, MemoryOverheadOnUniformSizes) {
  auto pool = NewPool();
  std::mt19937_64 rng(11);
  std::vector<Obj> objs;
  std::size_t bytes = 0;
  for (int i = 0; i < 4096; ++i) {
    const std::size_t s = i % 10 == 0 ? 30 + rng() % 170 : 200 + rng() % 3401;
    objs.push_back(Put(*pool, i, s));
    bytes += s;
  }
  const double stored = static_cast<double>(pool->TotalBytes()) / bytes;
  std::shuffle(objs.begin(), objs.end(), rng);
  std::size_t half_bytes = 0;
  for (std::size_t i = 0; i < objs.size(); ++i) {
    if (i % 2) {
      pool->Free(objs[i].h);
    } else {
      half_bytes += objs[i].size;
    }
  }
  pool->Compact();
  const double compacted = static_cast<double>(pool->TotalBytes()) / half_bytes;
  std::printf("uniform: %zu B: stored %.4f, compacted %.4f\n", bytes, stored,
              compacted);
  EXPECT_LE(stored, 1.10);
  EXPECT_LE(compacted, 1.15);
}

TEST(PoolTest, FormatClasses) {
  auto pool = NewPool();
  std::vector<Obj> objs;
  for (int i = 0; i < 100; ++i) objs.push_back(Put(*pool, i, 100 + 30 * i));
  const std::string text = pool->FormatClasses();
  EXPECT_EQ(text.rfind(
                " class  size       10%       20%       30%       40%       "
                "50%       60%       70%       80%       90%       99%      "
                "100% obj_allocated   obj_used pages_used pages_per_zspage "
                "freeable\n",
                0),
            0u)
      << text;
  EXPECT_NE(text.find("\n Total       "), std::string::npos) << text;
  // Header + one row per merged class + blank line + Total.
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'),
            static_cast<long>(pool->ClassStats().size()) + 3);
  std::size_t used = 0, pages = 0;
  for (const auto& r : pool->ClassStats()) {
    used += r.obj_used;
    pages += r.pages_used;
  }
  EXPECT_EQ(used, 100u);
  EXPECT_EQ(pages, pool->Stats().pages_used);
  for (const Obj& o : objs) pool->Free(o.h);
}

// Threads malloc/write/read-verify/free their own handles while another
// compacts in a loop. Every read is checked.
TEST(PoolTest, ConcurrentWithCompaction) {
  auto pool = NewPool();
  constexpr int kThreads = 3;
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(1500);
  std::atomic<bool> stop{false};
  std::atomic<std::size_t> failures{0};
  std::atomic<std::size_t> compactions{0};
  std::atomic<std::size_t> ops{0};

  std::thread compactor([&] {
    while (!stop.load()) {
      pool->Compact();
      compactions.fetch_add(1);
      std::this_thread::yield();
    }
  });
  std::vector<std::thread> workers;
  for (int t = 0; t < kThreads; ++t) {
    workers.emplace_back([&, t] {
      std::mt19937_64 rng(1000 + t);
      std::vector<Obj> mine;
      std::uint64_t tag = static_cast<std::uint64_t>(t) << 40;
      std::vector<std::byte> buf(4096);
      std::size_t n = 0;
      while (std::chrono::steady_clock::now() < deadline) {
        for (int k = 0; k < 64; ++k, ++n) {
          // Small sizes in a few classes so threads share zspages, and
          // one in eight a page of the packed page class.
          const bool whole = rng() % 8 == 0;
          const std::size_t size = whole ? 4096 : 40 + rng() % 600;
          if (mine.size() < 300 && (mine.size() < 50 || rng() % 2)) {
            Obj o{whole ? pool->MallocWholePage() : pool->Malloc(size), ++tag,
                  size};
            if (o.h == kInvalidHandle) {
              failures.fetch_add(1);
              continue;
            }
            std::vector<std::byte> want;
            Fill(want, o.tag, o.size);
            pool->Write(o.h, want);
            mine.push_back(o);
          } else {
            const std::size_t i = rng() % mine.size();
            const Obj o = mine[i];
            if (!Matches(*pool, o.h, o.tag, o.size)) failures.fetch_add(1);
            if (rng() % 2) {
              pool->Free(o.h);
              mine[i] = mine.back();
              mine.pop_back();
            }
          }
        }
      }
      for (const Obj& o : mine) {
        if (pool->ReadInto(o.h, buf) != o.size ||
            !Matches(*pool, o.h, o.tag, o.size)) {
          failures.fetch_add(1);
        }
        pool->Free(o.h);
      }
      ops.fetch_add(n);
    });
  }
  for (auto& w : workers) w.join();
  stop.store(true);
  compactor.join();
  std::printf("concurrent: %zu ops, %zu compactions, %llu pages compacted\n",
              ops.load(), compactions.load(),
              static_cast<unsigned long long>(pool->Stats().pages_compacted));
  EXPECT_EQ(failures.load(), 0u);
  EXPECT_GT(compactions.load(), 0u);
  EXPECT_EQ(pool->Stats().objects, 0u);
  pool->Compact();  // releases the spares
  EXPECT_EQ(pool->Stats().pages_used, 0u);
}

// Not a pass/fail test: prints Malloc+Write and Read throughput.
TEST(PoolTest, Throughput) {
  auto pool = NewPool();
  std::mt19937_64 rng(5);
  const std::vector<std::size_t> sizes = RealisticSizes(rng, 1 << 16);
  std::vector<std::byte> page(4096, std::byte{0x5a});
  std::vector<Handle> hs(sizes.size());
  std::size_t bytes = 0;
  auto t0 = std::chrono::steady_clock::now();
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    hs[i] = pool->Malloc(sizes[i]);
    pool->Write(hs[i], std::span<const std::byte>(page.data(), sizes[i]));
    bytes += sizes[i];
  }
  auto t1 = std::chrono::steady_clock::now();
  std::vector<std::byte> out(4096);
  std::size_t sum = 0;
  for (Handle h : hs) sum += pool->ReadInto(h, out);
  auto t2 = std::chrono::steady_clock::now();
  for (Handle h : hs) pool->Free(h);
  auto t3 = std::chrono::steady_clock::now();
  EXPECT_EQ(sum, bytes);
  auto ns = [](auto d) {
    return std::chrono::duration<double, std::nano>(d).count();
  };
  std::printf(
      "throughput (%zu objects, %.1f MB): malloc+write %.0f ns/obj (%.0f "
      "MB/s), read %.0f ns/obj (%.0f MB/s), free %.0f ns/obj\n",
      sizes.size(), bytes / 1e6, ns(t1 - t0) / sizes.size(),
      bytes / (ns(t1 - t0) / 1e3), ns(t2 - t1) / sizes.size(),
      bytes / (ns(t2 - t1) / 1e3), ns(t3 - t2) / sizes.size());
}

}  // namespace
}  // namespace ztier
