// File: pool/compact_test.cc
//
// Compaction of one class while other threads use it: it drops the class
// lock every few objects (compact.cc), so Malloc, Free and Read of the same
// class run between its moves, and its reverse map may go stale under it.
// Real threads on a real pool; every object that survives is checked byte
// for byte afterwards. Run under TSan in CI, so it is kept to a second.
#include <atomic>
#include <chrono>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

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

constexpr std::size_t kSize = 200;  // one class for every object

bool Holds(const Pool& pool, const Obj& o) {
  const std::vector<std::byte> want = Contents(o.tag, kSize);
  std::vector<std::byte> got(kSize);
  return pool.ReadInto(o.h, got) == kSize &&
         std::memcmp(got.data(), want.data(), kSize) == 0;
}

Obj Put(Pool& pool, std::uint64_t tag) {
  Obj o{pool.Malloc(kSize), tag};
  if (o.h != kInvalidHandle) pool.Write(o.h, Contents(tag, kSize));
  return o;
}

// A class left sparse (two of three objects freed) is compacted over and
// over while workers free its objects at random and allocate, write and
// read back new ones of the same size (so the zspages compaction works on
// keep changing under it), and a reader reads objects no one frees.
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
  // The sparse class was there to compact: pages came back.
  EXPECT_GT(pool.Stats().pages_compacted, 0u);
  // Quiet now: one more compaction leaves at most one non-full zspage in
  // the class, and every object is intact.
  pool.Compact();
  for (const auto& row : pool.ClassStats()) {
    if (row.size != pool.ClassSizeFor(kSize)) continue;
    std::size_t nonfull = 0;
    for (int k = 0; k < 10; ++k) nonfull += row.fullness[k];
    EXPECT_LE(nonfull, 1u);
  }
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

}  // namespace
}  // namespace ztier
