// dictionary_test.cc: PageStore::TrainDictionary. Stores after training use
// the dictionary; objects of older dictionaries stay readable; ids are
// reused only once free; the memory counts; writeback, recompression and
// batched loads read every dictionary's objects; stores, loads and
// trainings race without a wrong page (run under TSan by make test-tsan).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "page_store_test_peer.h"
#include "testing/test_util.h"
#include "ztier/backing_store.h"
#include "ztier/page_store.h"

namespace ztier {
namespace {

using testing::ScopedTempDir;

const corpus::PageSet& Python() { return testing::TestCorpus("anon-python"); }

// Corpus page i (wrapping), the content of every slot in these tests.
ConstPage CorpusPage(std::size_t i) {
  return Python().page(i % Python().size());
}

std::unique_ptr<PageStore> MakeStore(std::string codec, std::size_t pages,
                                     PageStoreOptions o = {}) {
  o.num_pages = pages;
  o.codec = std::move(codec);
  auto s = PageStore::Create(o);
  EXPECT_TRUE(s.has_value()) << s.error().ToString();
  return s.has_value() ? std::move(*s) : nullptr;
}

// Stores corpus page (base + i) in slot i, for slots [first, last).
void Fill(PageStore& store, std::size_t first, std::size_t last,
          std::size_t base = 0) {
  for (std::size_t i = first; i < last; ++i) {
    ASSERT_OK(store.Store(i, CorpusPage(base + i)));
  }
}

// Every slot of [first, last) reads as corpus page (base + i).
void ExpectPages(PageStore& store, std::size_t first, std::size_t last,
                 std::size_t base = 0) {
  std::vector<std::byte> out(kPageSize);
  for (std::size_t i = first; i < last; ++i) {
    ASSERT_OK(store.Load(i, MutablePage(out.data(), kPageSize)));
    ASSERT_EQ(std::memcmp(out.data(), CorpusPage(base + i).data(), kPageSize),
              0)
        << "slot " << i;
  }
}

// Slots of [first, last) whose object was made with dictionary `id`.
std::size_t WithDict(const PageStore& store, std::size_t first,
                     std::size_t last, int id) {
  std::size_t n = 0;
  for (std::size_t i = first; i < last; ++i) n += store.Inspect(i).dict == id;
  return n;
}

class DictionaryTest : public ::testing::TestWithParam<const char*> {};

TEST_P(DictionaryTest, StoresAfterTrainingUseIt) {
  auto store = MakeStore(GetParam(), 2048);
  Fill(*store, 0, 1024);
  EXPECT_EQ(store->Stats().dict_id, 0);
  EXPECT_EQ(store->Stats().dict_memory, 0u);
  auto info = store->TrainDictionary({.dict_bytes = 8192});
  ASSERT_TRUE(info.has_value()) << info.error().ToString();
  EXPECT_EQ(info->id, 1);
  EXPECT_GT(info->bytes, 1024u);
  EXPECT_LE(info->bytes, 8192u);
  EXPECT_GT(info->memory, info->bytes);
  EXPECT_GT(info->samples, 200u);
  EXPECT_LT(info->sample_bytes_with, info->sample_bytes_without);
  // The dictionary's memory raised mem_used_total: a peak.
  EXPECT_GE(store->Stats().mem_used_max, store->Stats().mem_used_total);
  Fill(*store, 1024, 2048);
  // Objects made before keep no dictionary; compressed pages after have it.
  EXPECT_EQ(WithDict(*store, 0, 1024, 1), 0u);
  const std::size_t after = WithDict(*store, 1024, 2048, 1);
  EXPECT_GT(after, 900u);
  const PageStoreStats st = store->Stats();
  EXPECT_EQ(st.dict_id, 1);
  EXPECT_EQ(st.dict_memory, info->memory);
  EXPECT_EQ(st.dict_pages[1], after);
  EXPECT_EQ(st.mem_used_total, store->pool().TotalBytes() + info->memory);
  EXPECT_EQ(store->PoolBytes(), st.mem_used_total);
  ExpectPages(*store, 0, 2048);
  // Rewriting the old half moves it to the dictionary too.
  Fill(*store, 0, 1024);
  EXPECT_GT(WithDict(*store, 0, 1024, 1), 900u);
  ExpectPages(*store, 0, 2048);
}

// A dictionary given as dict=PATH (zram's algorithm_params) is held for
// the store's life: it counts in mem_used_total from the start.
TEST_P(DictionaryTest, AGivenDictionaryCountsToo) {
  ScopedTempDir dir;
  const std::string path = dir.File("given.dict");
  {
    std::ofstream f(path, std::ios::binary);
    for (std::size_t i = 0; i < 4; ++i) {
      f.write(reinterpret_cast<const char*>(CorpusPage(i * 97).data()),
              kPageSize);
    }
  }
  auto store = MakeStore(GetParam(), 256, {.algorithm_params = "dict=" + path});
  ASSERT_NE(store, nullptr);
  const std::size_t memory = store->codec().dictionary_bytes();
  EXPECT_GE(memory, 4 * kPageSize);
  PageStoreStats st = store->Stats();
  EXPECT_EQ(st.dict_memory, memory);
  EXPECT_EQ(st.mem_used_total, store->pool().TotalBytes() + memory);
  Fill(*store, 0, 256);
  st = store->Stats();
  EXPECT_EQ(st.dict_memory, memory);
  EXPECT_EQ(st.mem_used_total, store->pool().TotalBytes() + memory);
  ExpectPages(*store, 0, 256);
}

// A recompression algorithm's dict=PATH that cannot be read fails Create
// with the errno of its open (ErrnoNameOf: ENOENT, not kNotFound's ENODEV),
// the message naming the priority.
TEST(DictionaryFileTest, ARecompressionDictionaryNotThereIsEnoent) {
  ScopedTempDir dir;
  PageStoreOptions o;
  o.num_pages = 16;
  o.codec = "lz4";
  o.recomp[0] = {"zstd", "dict=" + dir.File("none.dict")};
  auto store = PageStore::Create(o);
  ASSERT_FALSE(store.has_value());
  EXPECT_EQ(store.error().code(), StatusCode::kNotFound);
  EXPECT_EQ(ErrnoNameOf(store.error()), "ENOENT") << store.error().ToString();
  EXPECT_EQ(store.error().message().rfind(
                "recompression algorithm (priority 1): ", 0),
            0u)
      << store.error().ToString();
}

INSTANTIATE_TEST_SUITE_P(Codecs, DictionaryTest,
                         ::testing::Values("zstd", "lz4"));

TEST(DictionaryIdsTest, OlderObjectsStayReadableAndIdsAreReused) {
  auto store = MakeStore("zstd", 4096);
  Fill(*store, 0, 1024);                       // no dictionary
  ASSERT_EQ(store->TrainDictionary({.dict_bytes = 4096})->id, 1);
  Fill(*store, 1024, 2048);                    // 1
  ASSERT_EQ(store->TrainDictionary({.dict_bytes = 4096})->id, 2);
  Fill(*store, 2048, 3072);                    // 2
  ASSERT_EQ(store->TrainDictionary({.dict_bytes = 4096})->id, 3);
  Fill(*store, 3072, 4096);                    // 3
  ExpectPages(*store, 0, 4096);
  // 1 and 2 hold pages and 3 is current: no id is free.
  auto full = store->TrainDictionary({.dict_bytes = 4096});
  ASSERT_FALSE(full.has_value());
  EXPECT_EQ(full.error().code(), StatusCode::kResourceExhausted);
  const std::uint64_t memory = store->Stats().dict_memory;
  // Discarding dictionary 1's pages frees its id (its memory goes with the
  // next training, below).
  for (std::size_t i = 1024; i < 2048; ++i) ASSERT_OK(store->Discard(i));
  EXPECT_EQ(store->Stats().dict_pages[1], 0u);
  // Its memory is released by the next training, not by the discard.
  EXPECT_EQ(store->Stats().dict_memory, memory);
  auto again = store->TrainDictionary({.dict_bytes = 4096});
  ASSERT_TRUE(again.has_value()) << again.error().ToString();
  EXPECT_EQ(again->id, 1);
  EXPECT_LT(store->Stats().dict_memory, memory + again->memory);
  Fill(*store, 1024, 2048, 7);
  EXPECT_GT(WithDict(*store, 1024, 2048, 1), 900u);
  ExpectPages(*store, 0, 1024);
  ExpectPages(*store, 1024, 2048, 7);
  ExpectPages(*store, 2048, 4096);
}

TEST(DictionaryErrorsTest, ClearErrors) {
  auto hc = MakeStore("lz4hc", 512);
  Fill(*hc, 0, 512);
  auto r = hc->TrainDictionary({});
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.error().message().find("lz4hc"), std::string::npos);

  auto z = MakeStore("zstd", 512);
  EXPECT_EQ(z->TrainDictionary({.dict_bytes = 100}).error().code(),
            StatusCode::kInvalidArgument);
  // Nothing stored: nothing to train on.
  auto none = z->TrainDictionary({});
  ASSERT_FALSE(none.has_value());
  EXPECT_EQ(none.error().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(none.error().message().find("0 samples"), std::string::npos)
      << none.error().message();
  EXPECT_EQ(z->Stats().dict_id, 0);

  // The dictionary's memory must fit under mem_limit.
  auto limited = MakeStore("zstd", 1024);
  Fill(*limited, 0, 1024);
  limited->SetMemLimit(limited->PoolBytes() + 4096);
  auto over = limited->TrainDictionary({.dict_bytes = 16384});
  ASSERT_FALSE(over.has_value());
  EXPECT_EQ(over.error().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(limited->Stats().dict_memory, 0u);
}

// Pages that share nothing: each is 512 random bytes repeated. A
// dictionary cannot make them smaller, so it is not used.
TEST(DictionaryErrorsTest, ADictionaryThatDoesNotHelpIsNotUsed) {
  auto store = MakeStore("zstd", 2048);
  std::mt19937_64 rng(5);
  std::vector<std::byte> page(kPageSize);
  for (std::size_t i = 0; i < 2048; ++i) {
    for (std::size_t k = 0; k < 512; ++k) {
      page[k] = static_cast<std::byte>(rng());
    }
    for (std::size_t k = 512; k < kPageSize; ++k) page[k] = page[k % 512];
    ASSERT_OK(store->Store(i, ConstPage(page.data(), kPageSize)));
  }
  auto r = store->TrainDictionary({.dict_bytes = 8192});
  ASSERT_FALSE(r.has_value())
      << r->sample_bytes_without << " bytes without, " << r->sample_bytes_with
      << " with";
  EXPECT_EQ(r.error().code(), StatusCode::kFailedPrecondition)
      << r.error().ToString();
  EXPECT_NE(r.error().message().find("not used"), std::string::npos);
  EXPECT_EQ(store->Stats().dict_id, 0);
  EXPECT_EQ(store->Stats().dict_memory, 0u);
}

TEST(DictionaryPassesTest, WritebackRecompressionAndBatchedLoads) {
  ScopedTempDir dir;
  BackingOptions bo;
  bo.path = dir.File("backing");
  bo.size_bytes = 4096 * kPageSize;
  auto backing = BackingStore::Open(bo);
  ASSERT_TRUE(backing.has_value()) << backing.error().ToString();
  PageStoreOptions o;
  o.backing = std::move(*backing);
  o.recomp[0].codec = "zstd";
  o.recomp[0].algorithm_params = "level=12";
  o.batch_backend = BatchBackend::kParallel;
  o.parallel_workers = 2;
  auto store = MakeStore("lz4", 4096, o);
  Fill(*store, 0, 1024);
  ASSERT_TRUE(store->TrainDictionary({.dict_bytes = 8192}).has_value());
  Fill(*store, 1024, 2048);
  ASSERT_TRUE(store->TrainDictionary({.dict_bytes = 8192}).has_value());
  Fill(*store, 2048, 3072);
  // Batched loads across slots of three dictionaries.
  std::vector<std::byte> out(3072 * kPageSize);
  ASSERT_OK(store->LoadBatch(0, out));
  for (std::size_t i = 0; i < 3072; ++i) {
    ASSERT_EQ(std::memcmp(out.data() + i * kPageSize, CorpusPage(i).data(),
                          kPageSize),
              0)
        << "slot " << i;
  }
  // Compressed writeback keeps the dictionary (and the count for it).
  const std::size_t with1 = WithDict(*store, 1024, 1536, 1);
  EXPECT_GT(with1, 400u);
  WritebackRequest compressed;
  compressed.scans = {{0, 1024, 1536}};
  compressed.compressed = true;
  ASSERT_TRUE(store->Writeback(compressed).has_value());
  EXPECT_EQ(WithDict(*store, 1024, 1536, 1), with1);
  EXPECT_EQ(store->Stats().dict_pages[1], WithDict(*store, 0, 3072, 1));
  ExpectPages(*store, 1024, 1536);
  // Recompression makes its objects with the current dictionary (2).
  auto rc = store->Recompress({.priority = 1});
  ASSERT_TRUE(rc.has_value()) << rc.error().ToString();
  EXPECT_GT(rc->recompressed, 1000u);
  std::size_t recompressed_with_2 = 0;
  for (std::size_t i = 0; i < 3072; ++i) {
    const SlotInfo si = store->Inspect(i);
    if (si.priority == 1) recompressed_with_2 += si.dict == 2;
  }
  EXPECT_EQ(recompressed_with_2, rc->recompressed);
  ExpectPages(*store, 0, 3072);
  // Writeback of the rest, not compressed: the pages, no dictionary.
  WritebackRequest rest;
  rest.scans = {{0, 0, 3072}};
  ASSERT_TRUE(store->Writeback(rest).has_value());
  EXPECT_GT(store->Stats().bd_count, 2900u);
  ExpectPages(*store, 0, 3072);
  EXPECT_EQ(store->Stats().dict_pages[2], 0u);
  EXPECT_EQ(store->Stats().dict_pages[1], with1);
}

// Recompression with a codec that takes no dictionary (deflate) marks its
// objects with none: they must not hold the current id, and its memory,
// for good (the pages are then top-priority, never picked again).
TEST(DictionaryPassesTest, RecompressionWithoutADictionaryHoldsNoId) {
  PageStoreOptions o;
  o.recomp[0].codec = "deflate";
  auto store = MakeStore("zstd", 1024, o);
  Fill(*store, 0, 512);
  ASSERT_TRUE(store->TrainDictionary({.dict_bytes = 8192}).has_value());
  Fill(*store, 0, 512, 3);  // rewritten with dictionary 1
  auto rc = store->Recompress({.priority = 1});
  ASSERT_TRUE(rc.has_value()) << rc.error().ToString();
  EXPECT_GT(rc->recompressed, 0u);
  std::size_t at1 = 0;
  for (std::size_t i = 0; i < 512; ++i) {
    const SlotInfo si = store->Inspect(i);
    if (si.priority == 1) {
      ++at1;
      EXPECT_EQ(si.dict, 0) << "slot " << i;
    }
  }
  EXPECT_EQ(at1, rc->recompressed);
  EXPECT_EQ(store->Stats().dict_pages[1], WithDict(*store, 0, 1024, 1));
  ExpectPages(*store, 0, 512, 3);
}

// A store that compressed with dictionary 1 and waits for its slot's lock
// holds id 1: two trainings meanwhile must not give the id to a new
// dictionary (which would then decompress the store's object).
TEST(DictionaryIdsTest, AStoreBetweenCompressionAndInstallHoldsItsId) {
  for (const char* codec : {"lz4", "zstd"}) {
    SCOPED_TRACE(codec);
    auto store = MakeStore(codec, 2048);
    Fill(*store, 0, 1024);
    ASSERT_EQ(store->TrainDictionary({.dict_bytes = 8192})->id, 1);
    // Slot 2000 is empty, so that no training samples (and locks) it.
    constexpr std::uint64_t kSlot = 2000;
    std::thread writer;
    int third = 0;
    PageStoreTestPeer::WithSlotLocked(*store, kSlot, [&] {
      writer = std::thread([&] { ASSERT_OK(store->Store(kSlot, CorpusPage(7))); });
      while (!PageStoreTestPeer::SlotHasWaiters(*store, kSlot)) {
        std::this_thread::yield();
      }
      // The writer compressed (with id 1) and sleeps on the lock.
      ASSERT_EQ(store->TrainDictionary({.dict_bytes = 8192})->id, 2);
      auto info = store->TrainDictionary({.dict_bytes = 8192});
      ASSERT_TRUE(info.has_value()) << info.error().ToString();
      third = info->id;
    });
    writer.join();
    EXPECT_EQ(third, 3);
    EXPECT_EQ(store->Inspect(kSlot).dict, 1);
    ExpectPages(*store, kSlot, kSlot + 1, 7 - kSlot);
  }
}

// Writers overwrite their own slots (whole pages, sub-page writes and
// batches) and check them, while another thread trains again and again;
// every read is the last write. Ids come free as the writers rewrite.
TEST(DictionaryRaceTest, StoresAndLoadsDuringTraining) {
  constexpr std::size_t kThreads = 3;
  constexpr std::size_t kPer = 512;
  auto store = MakeStore("zstd", kThreads * kPer);
  Fill(*store, 0, kThreads * kPer);
  std::atomic<bool> stop{false};
  std::atomic<int> trained{0};
  std::vector<std::thread> writers;
  std::vector<std::string> failures(kThreads);
  for (std::size_t t = 0; t < kThreads; ++t) {
    writers.emplace_back([&, t] {
      std::vector<std::size_t> base(kPer, 0);  // slot first + j has page base+j
      const std::size_t first = t * kPer;
      std::vector<std::byte> out(8 * kPageSize);
      for (std::size_t round = 1; !stop.load() && failures[t].empty();
           ++round) {
        for (std::size_t j = 0; j < kPer && failures[t].empty(); j += 8) {
          const std::size_t b = round * 13 + t;
          if (round % 3 == 0) {
            std::vector<std::byte> batch(8 * kPageSize);
            for (std::size_t k = 0; k < 8; ++k) {
              std::memcpy(batch.data() + k * kPageSize,
                          CorpusPage(b + first + j + k).data(), kPageSize);
            }
            if (!store->StoreBatch(first + j, batch).ok()) {
              failures[t] = "StoreBatch";
            }
          } else {
            for (std::size_t k = 0; k < 8; ++k) {
              const std::size_t i = first + j + k;
              const Status st =
                  round % 3 == 1
                      ? store->Store(i, CorpusPage(b + i))
                      : store->StorePartial(i, 0, CorpusPage(b + i));
              if (!st.ok()) failures[t] = st.ToString();
            }
          }
          for (std::size_t k = 0; k < 8; ++k) base[j + k] = b;
          if (!store->LoadBatch(first + j, out).ok()) failures[t] = "load";
          for (std::size_t k = 0; k < 8 && failures[t].empty(); ++k) {
            const std::size_t i = first + j + k;
            if (std::memcmp(out.data() + k * kPageSize,
                            CorpusPage(base[j + k] + i).data(),
                            kPageSize) != 0) {
              failures[t] = "slot " + std::to_string(i) + " reads wrong";
            }
          }
        }
      }
    });
  }
  // Ids busy (kResourceExhausted) and a dictionary judged no better
  // (kFailedPrecondition) are refusals that leave the store as it was.
  // Until 8 have been trained, bounded by time, not by attempts: a refusal
  // waits for the writers to move pages off old dictionaries, which on a
  // busy machine can take many quick refusals.
  std::thread trainer([&] {
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (trained.load() < 8 && std::chrono::steady_clock::now() < deadline) {
      auto r = store->TrainDictionary({.dict_bytes = 4096});
      if (r.has_value()) {
        trained.fetch_add(1);
      } else if (r.error().code() != StatusCode::kResourceExhausted &&
                 r.error().code() != StatusCode::kFailedPrecondition) {
        ADD_FAILURE() << r.error().ToString();
        break;
      } else {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
    }
    stop.store(true);
  });
  trainer.join();
  for (auto& w : writers) w.join();
  for (const std::string& f : failures) EXPECT_EQ(f, "");
  EXPECT_EQ(trained.load(), 8);
}

}  // namespace
}  // namespace ztier
