// page_store_model_test.cc: a randomized model test of the PageStore.
//
// Worker threads run a long random mix of store, batch store, load, batch
// load and discard on their own ranges of slots, each checking every result
// against a plain reference map (slot -> which page it should hold). Other
// threads meanwhile compact the pool, mark slots idle, run recompression
// passes (zstd, then deflate) across the whole table and train dictionaries
// from the stored pages, so every operation races with compaction moving
// its objects, with recompression swapping them and with stores switching
// to a new dictionary while objects of older ones are read. The serial pass
// (the million operations) has units of 16 pages (unit_pages): its batch
// stores make units, which its stores, partial writes and discards detach
// pages from and reclaim, while a writeback thread writes idle units and
// pages to a backing file. At the end the counters must agree with the
// union of the reference maps.
//
// At least one million operations in all (ZTIER_MODEL_OPS overrides the
// count; the seed is fixed and printed).
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include "testing/nothing_stored.h"
#include "testing/test_util.h"
#include "ztier/backing_store.h"
#include "ztier/page_store.h"

namespace ztier {
namespace {

constexpr std::size_t kDistinctPages = 512;
constexpr std::size_t kSlotsPerWorker = 1024;
constexpr int kWorkers = 2;
constexpr std::size_t kBatch = 32;  // pages per batch store or load

// Pages of every compressibility: a text-like prefix of random length, then
// random bytes; every 16th is same-filled, every 32nd all zero. Their
// compressed sizes cover the pool's size classes from tens of bytes to huge.
std::vector<std::byte> MakePages(std::uint32_t seed) {
  std::vector<std::byte> pages(kDistinctPages * kPageSize);
  std::mt19937_64 rng(seed);
  for (std::size_t p = 0; p < kDistinctPages; ++p) {
    std::byte* d = &pages[p * kPageSize];
    if (p % 32 == 0) continue;  // zero
    if (p % 16 == 0) {
      const std::uint64_t w = rng();
      for (std::size_t i = 0; i < kPageSize; i += 8) std::memcpy(d + i, &w, 8);
      continue;
    }
    const std::size_t text = rng() % (kPageSize + 1);
    for (std::size_t i = 0; i < kPageSize; ++i) {
      d[i] = i < text ? static_cast<std::byte>("ztier page model "[rng() % 17])
                      : static_cast<std::byte>(rng());
    }
  }
  return pages;
}

std::size_t OpsFromEnv() {
  const char* env = std::getenv("ZTIER_MODEL_OPS");
  return env != nullptr ? std::strtoull(env, nullptr, 10) : 1'000'000;
}

TEST(PageStoreModelTest, MillionMixedOpsMatchAReferenceMap) {
  const std::uint32_t seed = 20261130;
  const std::size_t total_ops = OpsFromEnv();
  std::printf("seed %u, %zu operations, %d workers\n", seed, total_ops,
              kWorkers);
  const std::vector<std::byte> pages = MakePages(seed);
  auto page = [&](std::size_t id) {
    return ConstPage(&pages[id * kPageSize], kPageSize);
  };

  for (const BatchBackend backend :
       {BatchBackend::kSerial, BatchBackend::kParallel}) {
    SCOPED_TRACE(BatchBackendName(backend));
    // The million operations run on the serial backend, with units; the
    // parallel backend gets a shorter pass: it shares the code paths
    // except the batch fan-out.
    const bool main_pass = backend == BatchBackend::kSerial;
    testing::ScopedTempDir dir;
    PageStoreOptions o;
    o.num_pages = kSlotsPerWorker * kWorkers;
    o.batch_backend = backend;
    if (main_pass) {
      o.unit_pages = 16;
      BackingOptions bo;
      bo.path = dir.File("backing");
      // A written-back unit keeps its blocks until its last page goes, so
      // blocks in use can pass the slots; a full store is refused, not an
      // error.
      bo.size_bytes = 4 * o.num_pages * kPageSize;
      auto backing = BackingStore::Open(bo);
      ASSERT_TRUE(backing.has_value()) << backing.error().ToString();
      o.backing = std::move(*backing);
    }
    o.recomp[0] = {"zstd", ""};
    o.recomp[1] = {"deflate", ""};
    auto created = PageStore::Create(o);
    ASSERT_TRUE(created.has_value()) << created.error().ToString();
    PageStore& store = **created;

    std::atomic<bool> done{false};
    std::atomic<std::size_t> mismatches{0};
    // Dictionaries trained by the trainer thread below while the workers
    // run.
    std::atomic<std::uint64_t> trained{0};
    std::vector<std::unordered_map<std::size_t, std::size_t>> models(kWorkers);
    const std::size_t ops_per_worker =
        (main_pass ? total_ops : total_ops / 4) / kWorkers;

    auto worker = [&](int w) {
      std::mt19937_64 rng(seed + w);
      auto& model = models[w];
      const std::size_t base = w * kSlotsPerWorker;
      std::vector<std::byte> batch(kBatch * kPageSize);
      std::array<std::byte, kPageSize> out;
      auto check = [&](std::size_t slot, const std::byte* got) {
        auto it = model.find(slot);
        const bool ok =
            it == model.end()
                ? std::all_of(got, got + kPageSize,
                              [](std::byte b) { return b == std::byte{0}; })
                : std::memcmp(got, page(it->second).data(), kPageSize) == 0;
        if (!ok && mismatches.fetch_add(1) < 5) {
          ADD_FAILURE() << "slot " << base + slot << " holds wrong data";
        }
      };
      // A short run can end before a dictionary is accepted (the store
      // refuses one that would not help): workers then go on, up to four
      // times their share, until one is.
      for (std::size_t op = 0;
           op < ops_per_worker ||
           (trained.load() == 0 && op < 4 * ops_per_worker);
           ++op) {
        const unsigned r = rng() % 100;
        const std::size_t slot = rng() % kSlotsPerWorker;
        if (r < 30) {
          const std::size_t id = rng() % kDistinctPages;
          ASSERT_OK(store.Store(base + slot, page(id)));
          model[slot] = id;
        } else if (r < 38) {
          // Aligned batches (whole units), and half as many starting at
          // any multiple of 4 (units with pages stored singly around them).
          std::size_t first = slot & ~(kBatch - 1);
          std::size_t count = kBatch;
          if (r < 34) {
            first = slot & ~std::size_t{3};
            count = std::min(kBatch, kSlotsPerWorker - first);
          }
          std::size_t ids[kBatch];
          for (std::size_t k = 0; k < count; ++k) {
            ids[k] = rng() % kDistinctPages;
            std::memcpy(&batch[k * kPageSize], page(ids[k]).data(), kPageSize);
          }
          ASSERT_OK(store.StoreBatch(
              base + first,
              std::span<const std::byte>(batch.data(), count * kPageSize)));
          for (std::size_t k = 0; k < count; ++k) model[first + k] = ids[k];
        } else if (r < 41) {
          // A sub-page write: the model's page changes to another known
          // page only if the patch makes it one, so patch it with the same
          // bytes the page already has (a no-op for the data, a detach and
          // a fresh object for the store).
          auto it = model.find(slot);
          const std::size_t id = it == model.end() ? 0 : it->second;
          const std::size_t off = rng() % kPageSize;
          const std::size_t len = 1 + rng() % (kPageSize - off);
          ASSERT_OK(store.StorePartial(
              base + slot, off,
              std::span<const std::byte>(page(id).data() + off, len)));
          if (it == model.end()) model[slot] = 0;  // zeros: page 0 is zero
        } else if (r < 73) {
          ASSERT_OK(store.Load(base + slot, out));
          check(slot, out.data());
        } else if (r < 80) {
          const std::size_t first = slot & ~(kBatch - 1);
          ASSERT_OK(store.LoadBatch(base + first, batch));
          for (std::size_t k = 0; k < kBatch; ++k) {
            check(first + k, &batch[k * kPageSize]);
          }
        } else if (r < 95) {
          ASSERT_OK(store.Discard(base + slot));
          model.erase(slot);
        } else if (r < 99) {
          const bool stored = model.contains(slot);
          if (store.Inspect(base + slot).allocated != stored) {
            ADD_FAILURE() << "slot " << base + slot << " allocated flag wrong";
          }
        } else if (op % 1000 == 99) {
          store.Compact();
        } else if (op % 5000 == 199) {
          store.MarkIdleAll();
        }
      }
    };
    // Background post-processing racing with the workers.
    std::thread compactor([&] {
      while (!done.load()) {
        store.Compact();
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
      }
    });
    std::thread idler([&] {
      std::uint32_t age = 0;
      while (!done.load()) {
        if (age++ % 2 == 0) {
          store.MarkIdleAll();
        } else {
          store.MarkIdleOlderThan(0);
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
    });
    std::atomic<std::uint64_t> recompressed{0};
    std::thread recompressor([&] {
      std::mt19937 rng(seed);
      while (!done.load()) {
        RecompressRequest r;
        switch (rng() % 5) {
          case 0: break;
          case 1: r.filter = kRecompressIdle; break;
          case 2: r.filter = kRecompressHuge; break;
          case 3: r.priority_end = 2; break;
          default: r.threshold = 1000; break;
        }
        r.max_pages = rng() % 2 ? UINT64_MAX : 1 + rng() % 64;
        auto res = store.Recompress(r);
        if (!res.has_value() || !res->status.ok()) {
          ADD_FAILURE() << "recompress: "
                        << (res ? res->status : res.error()).ToString();
          return;
        }
        recompressed += res->recompressed;
        // Passes with pauses, as the compactor: the race is what matters,
        // and a pass back to back with the next would take a core from the
        // workers.
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
    });
    // Dictionaries: refused while every id holds pages or when one would
    // not help (both leave the store as it was); trained otherwise.
    std::thread trainer([&] {
      while (!done.load()) {
        auto r = store.TrainDictionary({.dict_bytes = 4096});
        if (r.has_value()) {
          ++trained;
        } else if (r.error().code() != StatusCode::kResourceExhausted &&
                   r.error().code() != StatusCode::kFailedPrecondition &&
                   r.error().code() != StatusCode::kInvalidArgument) {
          ADD_FAILURE() << "train_dict: " << r.error().ToString();
          return;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
    });
    // Writeback of idle pages and units (the serial pass has a backing
    // file).
    std::atomic<std::uint64_t> written{0};
    std::thread writer([&] {
      while (main_pass && !done.load()) {
        // Passes with pauses, as the others: each scans every slot.
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        auto r = store.Writeback(
            {.scans = {{kWritebackIdle, 0, store.num_pages()}}});
        if (!r.has_value() ||
            (!r->status.ok() &&
             r->status.code() != StatusCode::kResourceExhausted)) {
          ADD_FAILURE() << "writeback: "
                        << (r ? r->status : r.error()).ToString();
          return;
        }
        written += r->written;
      }
    });
    std::vector<std::thread> workers;
    for (int w = 0; w < kWorkers; ++w) workers.emplace_back(worker, w);
    for (auto& t : workers) t.join();
    done = true;
    compactor.join();
    idler.join();
    recompressor.join();
    trainer.join();
    writer.join();
    if (main_pass) {
      const PageStoreStats s = store.Stats();
      std::printf("units: %llu pages written back, %llu units live, %llu "
                  "pages reclaimed from units during the run\n",
                  static_cast<unsigned long long>(written.load()),
                  static_cast<unsigned long long>(s.units),
                  static_cast<unsigned long long>(s.units_reclaimed));
      EXPECT_GT(written.load(), 0u);
      EXPECT_GT(s.units, 0u);
      EXPECT_GT(s.units_reclaimed, 0u);
    }
    std::printf("%s: %llu dictionaries trained during the run\n",
                std::string(BatchBackendName(backend)).c_str(),
                static_cast<unsigned long long>(trained.load()));
    EXPECT_GT(trained.load(), 0u);
    std::printf("%s: %llu pages recompressed during the run\n",
                std::string(BatchBackendName(backend)).c_str(),
                static_cast<unsigned long long>(recompressed.load()));
    EXPECT_GT(recompressed.load(), 0u);

    EXPECT_EQ(mismatches.load(), 0u);
    // By now the pages recompressed during the run may all be overwritten,
    // discarded or written back, and the writeback thread may have taken
    // every page left (its last pass can come after the workers end). So
    // the most text-like pages are stored once more, singly, and one pass
    // after the threads end must recompress them: zstd's entropy coding
    // wins on the text that the primary codec leaves as it is.
    constexpr std::size_t kFresh = 8;
    std::vector<std::size_t> by_text(kDistinctPages);
    std::vector<std::size_t> text_bytes(kDistinctPages, 0);
    for (std::size_t id = 0; id < kDistinctPages; ++id) {
      by_text[id] = id;
      if (id % 16 == 0) continue;  // same-filled
      const std::byte* d = page(id).data();
      while (text_bytes[id] < kPageSize &&
             std::string_view("ztier page model ")
                     .find(static_cast<char>(d[text_bytes[id]])) !=
                 std::string_view::npos) {
        ++text_bytes[id];
      }
    }
    std::partial_sort(
        by_text.begin(), by_text.begin() + kFresh, by_text.end(),
        [&](std::size_t a, std::size_t b) {
          return text_bytes[a] > text_bytes[b];
        });
    for (std::size_t k = 0; k < kFresh; ++k) {
      ASSERT_OK(store.Store(k, page(by_text[k])));
      models[0][k] = by_text[k];
    }
    auto final_pass = store.Recompress({});
    ASSERT_TRUE(final_pass.has_value()) << final_pass.error().ToString();
    ASSERT_OK(final_pass->status);
    // Every slot, read once more after all threads are done.
    std::size_t stored = 0, written_back = 0, in_units = 0;
    std::array<std::byte, kPageSize> out;
    for (int w = 0; w < kWorkers; ++w) {
      for (std::size_t slot = 0; slot < kSlotsPerWorker; ++slot) {
        ASSERT_OK(store.Load(w * kSlotsPerWorker + slot, out));
        auto it = models[w].find(slot);
        if (it == models[w].end()) {
          EXPECT_FALSE(store.Inspect(w * kSlotsPerWorker + slot).allocated);
          continue;
        }
        ++stored;
        const SlotInfo info = store.Inspect(w * kSlotsPerWorker + slot);
        written_back += info.wb;
        in_units += info.unit;
        ASSERT_EQ(0, std::memcmp(out.data(), page(it->second).data(), kPageSize))
            << "slot " << w * kSlotsPerWorker + slot;
      }
    }
    const PageStoreStats s = store.Stats();
    EXPECT_EQ(s.orig_data_size, stored * kPageSize);
    std::uint64_t by_priority = 0;
    for (std::uint64_t n : s.priority_pages) by_priority += n;
    EXPECT_EQ(by_priority + s.same_pages + written_back, stored);
    EXPECT_EQ(s.unit_pages, in_units);
    EXPECT_GE(final_pass->recompressed, kFresh);
    EXPECT_GE(s.priority_pages[1] + s.priority_pages[2],
              final_pass->recompressed);
    EXPECT_EQ(s.failed_reads, 0u);
    EXPECT_EQ(s.failed_writes, 0u);
    // Discard everything: the pool must come back to (almost) nothing.
    for (std::size_t i = 0; i < store.num_pages(); ++i) {
      ASSERT_OK(store.Discard(i));
    }
    ztier::testing::ExpectNothingStored(store.Stats());
  }
}

// Two threads store and load the same few slots. Whatever interleaving
// happens, every load returns one of the pages that was stored, whole.
TEST(PageStoreModelTest, ContendedSlotsNeverReturnTornPages) {
  const std::vector<std::byte> pages = MakePages(7);
  std::unordered_map<std::uint64_t, int> known;
  auto hash = [](const std::byte* p) {
    std::uint64_t h = 1469598103934665603ull;
    for (std::size_t i = 0; i < kPageSize; ++i) {
      h = (h ^ static_cast<std::uint64_t>(p[i])) * 1099511628211ull;
    }
    return h;
  };
  for (std::size_t i = 0; i < kDistinctPages; ++i) known[hash(&pages[i * kPageSize])] = 1;
  std::array<std::byte, kPageSize> zero{};
  known[hash(zero.data())] = 1;

  PageStoreOptions o;
  o.num_pages = 16;
  auto store = std::move(*PageStore::Create(o));
  std::atomic<int> torn{0};
  auto run = [&](int seed) {
    std::mt19937 rng(seed);
    std::array<std::byte, kPageSize> out;
    for (int i = 0; i < 20000; ++i) {
      const std::size_t slot = rng() % 16;
      if (rng() % 2) {
        const std::size_t id = rng() % kDistinctPages;
        ASSERT_OK(store->Store(slot, ConstPage(&pages[id * kPageSize], kPageSize)));
      } else {
        ASSERT_OK(store->Load(slot, out));
        if (!known.contains(hash(out.data()))) torn++;
      }
      if (i % 2000 == 0) store->Compact();
    }
  };
  std::thread a(run, 1), b(run, 2);
  a.join();
  b.join();
  EXPECT_EQ(torn.load(), 0);
}

}  // namespace
}  // namespace ztier
