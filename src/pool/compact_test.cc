// File: pool/compact_test.cc
//
// Compaction of classes while other threads use them: it drops the class
// lock every few objects (compact.cc), so Malloc, Free and Read of the same
// class run between its moves, and its reverse map (one for both classes)
// may go stale under it, zspage ids freed by one class coming back in the
// other.
// Real threads on a real pool; every object that survives is checked byte
// for byte afterwards. Run under TSan in CI, so it is kept to a second.
#include <atomic>
#include <chrono>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "testing/failing_new.h"
#include "testing/test_util.h"
#include "ztier/pool.h"

namespace ztier {
namespace {

// Every byte of an object depends on its tag.
std::vector<std::byte> Contents(std::uint64_t tag, std::size_t size) {
  std::vector<std::byte> buf(size);
  std::uint64_t x = tag * 0x9E3779B97F4A7C15ull + 1;
  for (auto& b : buf) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    b = static_cast<std::byte>(x);
  }
  return buf;
}

struct Obj {
  Handle h = kInvalidHandle;
  std::uint64_t tag = 0;
};

// Two classes: a third of the objects in the larger one.
constexpr std::size_t kSize = 200;
constexpr std::size_t kLargeSize = 1100;
std::size_t SizeOf(std::uint64_t tag) {
  return tag % 3 == 0 ? kLargeSize : kSize;
}

bool Holds(const Pool& pool, const Obj& o) {
  const std::size_t size = SizeOf(o.tag);
  const std::vector<std::byte> want = Contents(o.tag, size);
  std::vector<std::byte> got(size);
  return pool.ReadInto(o.h, got) == size &&
         std::memcmp(got.data(), want.data(), size) == 0;
}

Obj Put(Pool& pool, std::uint64_t tag) {
  const std::size_t size = SizeOf(tag);
  Obj o{pool.Malloc(size), tag};
  if (o.h != kInvalidHandle) pool.Write(o.h, Contents(tag, size));
  return o;
}

// Whether every class of `sizes` has at most one non-full zspage.
bool Compacted(const Pool& pool, std::initializer_list<std::size_t> sizes) {
  for (const auto& row : pool.ClassStats()) {
    bool wanted = false;
    for (std::size_t size : sizes)
      wanted |= row.size == pool.ClassSizeFor(size);
    std::size_t nonfull = 0;
    for (int k = 0; k < 10; ++k) nonfull += row.fullness[k];
    if (wanted && nonfull > 1) return false;
  }
  return true;
}

// Two classes left sparse (two of three objects freed) are compacted over
// and over while workers free their objects at random and allocate, write
// and read back new ones of the same sizes (so the zspages compaction works
// on keep changing under it), and a reader reads objects no one frees.
TEST(CompactTest, ClassInUseWhileCompacted) {
  auto created = Pool::Create({});
  ASSERT_TRUE(created.has_value());
  Pool& pool = **created;

  constexpr int kWorkers = 2;
  std::vector<Obj> fixed;                    // read, never freed
  std::vector<std::vector<Obj>> kept(kWorkers);  // the workers' own
  std::vector<Obj> all;
  for (std::uint64_t i = 0; i < 30000; ++i) {
    all.push_back(Put(pool, i));
    ASSERT_NE(all.back().h, kInvalidHandle);
  }
  std::mt19937_64 rng(7);
  for (const Obj& o : all) {
    switch (rng() % 6) {
      case 0: fixed.push_back(o); break;
      case 1: kept[o.tag % kWorkers].push_back(o); break;
      default: pool.Free(o.h);
    }
  }

  std::atomic<bool> stop{false};
  std::atomic<std::size_t> failures{0};
  std::atomic<std::size_t> compactions{0};
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(1000);
  std::thread compactor([&] {
    while (!stop.load()) {
      pool.Compact();
      compactions.fetch_add(1);
    }
  });
  std::thread reader([&] {
    while (!stop.load()) {
      for (const Obj& o : fixed) {
        if (!Holds(pool, o)) failures.fetch_add(1);
        if (stop.load()) break;
      }
    }
  });
  std::vector<std::thread> workers;
  for (int t = 0; t < kWorkers; ++t) {
    workers.emplace_back([&, t] {
      std::mt19937_64 r(100 + t);
      std::vector<Obj>& mine = kept[t];
      std::uint64_t tag = (static_cast<std::uint64_t>(t) + 1) << 40;
      while (std::chrono::steady_clock::now() < deadline) {
        // Free a few at random, then allocate as many: the handles and the
        // free indices they leave pair up anew.
        const std::size_t n = 1 + r() % 8;
        for (std::size_t k = 0; k < n && !mine.empty(); ++k) {
          const std::size_t i = r() % mine.size();
          if (!Holds(pool, mine[i])) failures.fetch_add(1);
          pool.Free(mine[i].h);
          mine[i] = mine.back();
          mine.pop_back();
        }
        for (std::size_t k = 0; k < n; ++k) {
          Obj o = Put(pool, ++tag);
          if (o.h == kInvalidHandle) {
            failures.fetch_add(1);
            continue;
          }
          mine.push_back(o);
        }
      }
    });
  }
  for (auto& w : workers) w.join();
  stop.store(true);
  reader.join();
  compactor.join();

  EXPECT_EQ(failures.load(), 0u);
  EXPECT_GT(compactions.load(), 0u);
  // The sparse classes were there to compact: pages came back.
  EXPECT_GT(pool.Stats().pages_compacted, 0u);
  // Quiet now: one more compaction leaves at most one non-full zspage in
  // each class, and every object is intact.
  pool.Compact();
  EXPECT_TRUE(Compacted(pool, {kSize, kLargeSize}));
  for (const Obj& o : fixed) EXPECT_TRUE(Holds(pool, o));
  for (const auto& mine : kept) {
    for (const Obj& o : mine) EXPECT_TRUE(Holds(pool, o));
  }
  for (const Obj& o : fixed) pool.Free(o.h);
  for (const auto& mine : kept) {
    for (const Obj& o : mine) pool.Free(o.h);
  }
  EXPECT_EQ(pool.Stats().objects, 0u);
}

// More objects in sparse zspages than one reverse map takes (compact.cc's
// kMapEntries, 2^20), over eight classes: one Compact() maps them in
// batches, and every class ends packed with every object intact.
TEST(CompactTest, ClassesOverSeveralMaps) {
  auto created = Pool::Create({});
  ASSERT_TRUE(created.has_value());
  Pool& pool = **created;
  constexpr std::size_t kObjects = 1600000;
  const auto size_of = [](std::size_t i) { return 32 + (i % 8) * 16; };
  std::vector<Handle> handles(kObjects);
  std::byte buf[256];
  for (std::size_t i = 0; i < kObjects; ++i) {
    handles[i] = pool.Malloc(size_of(i));
    ASSERT_NE(handles[i], kInvalidHandle);
    std::memset(buf, static_cast<int>(i * 7 + i / 8), sizeof buf);
    pool.Write(handles[i], std::span(buf, size_of(i)));
  }
  // Frees 2 of 3, keeping the object count of every class in step.
  for (std::size_t i = 0; i < kObjects; ++i) {
    if ((i / 8) % 3 != 0) pool.Free(handles[i]);
  }
  const std::size_t pages = pool.Stats().pages_used;
  EXPECT_GT(pool.Compact(), pages / 2);
  EXPECT_TRUE(Compacted(pool, {32, 48, 64, 80, 96, 112, 128, 144}));
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < kObjects; i += 24) {
    for (std::size_t k = i; k < i + 8; ++k) {
      std::memset(buf, static_cast<int>(k * 7 + k / 8), sizeof buf);
      std::byte got[256];
      if (pool.ReadInto(handles[k], std::span(got, size_of(k))) != size_of(k) ||
          std::memcmp(got, buf, size_of(k)) != 0) {
        ++wrong;
      }
      pool.Free(handles[k]);
    }
  }
  EXPECT_EQ(wrong, 0u);
  EXPECT_EQ(pool.Stats().objects, 0u);
}

// Compaction out of memory: each allocation of a Compact() of three
// sparse classes fails in turn. It never throws, moves nothing it cannot
// finish, and a Compact() with memory then packs every class.
TEST(CompactTest, OutOfMemoryLeavesEveryObjectInPlace) {
  long failed = 0;
  for (long n = 1;; ++n) {
    SCOPED_TRACE("allocation " + std::to_string(n) + " of Compact failing");
    auto created = Pool::Create({});
    ASSERT_TRUE(created.has_value());
    Pool& pool = **created;
    std::vector<Obj> all, kept;
    for (std::uint64_t tag = 0; tag < 3000; ++tag) {
      all.push_back(Put(pool, tag));
      ASSERT_NE(all.back().h, kInvalidHandle);
    }
    for (const Obj& o : all) {
      if (o.tag % 6 < 2) {
        kept.push_back(o);  // a third of each class
      } else {
        pool.Free(o.h);
      }
    }
    testing::FailNthAllocation(n);
    std::size_t freed = 0;
    EXPECT_NO_THROW(freed = pool.Compact());
    const bool fired = testing::AllocationFailed();
    testing::FailNthAllocation(0);
    failed += fired;
    for (const Obj& o : kept) ASSERT_TRUE(Holds(pool, o)) << o.tag;
    freed += pool.Compact();
    EXPECT_GT(freed, 0u);
    EXPECT_TRUE(Compacted(pool, {kSize, kLargeSize}));
    for (const Obj& o : kept) ASSERT_TRUE(Holds(pool, o)) << o.tag;
    if (!fired) break;
    ASSERT_LT(n, 10000) << "a Compact that never ends allocating";
  }
  EXPECT_GT(failed, 2);
  std::printf("compact: each of %ld allocations failed in turn\n", failed);
}

}  // namespace
}  // namespace ztier
