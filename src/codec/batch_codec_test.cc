// batch_codec_test.cc: serial and parallel batches give the same per-item
// results as one Compressor; DecompressBatch isolates per-item errors; short
// batches work; several threads share one WorkerPool (runs under TSan).
#include "ztier/batch_codec.h"

#include <atomic>
#include <cstring>
#include <thread>
#include <vector>

#include "corpus/corpus.h"
#include "testing/test_util.h"
#include "ztier/page.h"

namespace ztier {
namespace {

using Bytes = std::vector<std::byte>;

const corpus::PageSet& Python() { return testing::TestCorpus("anon-python"); }

std::shared_ptr<const Codec> Make(std::string_view name) {
  auto c = MakeCodec(name);
  EXPECT_TRUE(c.has_value());
  return *c;
}

// Compressed outputs for pages [first, first + n), one buffer each.
struct Batch {
  std::vector<Bytes> out;
  std::vector<BatchItem> items;
  Batch(std::size_t first, std::size_t n, std::size_t cap = kPageSize)
      : out(n, Bytes(cap)), items(n) {
    for (std::size_t i = 0; i < n; ++i) {
      items[i].src = Python().page(first + i);
      items[i].dst = out[i];
    }
  }
};

TEST(BatchCodecTest, Names) {
  EXPECT_EQ(BatchBackendName(BatchBackend::kSerial), "serial");
  EXPECT_EQ(BatchBackendName(BatchBackend::kParallel), "parallel");
}

TEST(BatchCodecTest, BadOptions) {
  auto codec = Make("lz4");
  WorkerPool pool(1);
  EXPECT_FALSE(NewBatchCompressor(codec, {.max_batch = 0}).has_value());
  EXPECT_TRUE(NewBatchCompressor(codec, {.max_batch = kMaxPassBatchSize}).has_value());
  EXPECT_FALSE(
      NewBatchCompressor(codec, {.max_batch = kMaxPassBatchSize + 1}).has_value());
  auto r = NewBatchCompressor(codec, {.backend = BatchBackend::kParallel});
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code(), StatusCode::kInvalidArgument);
  auto ok = NewBatchCompressor(
      codec,
      {.backend = BatchBackend::kParallel, .max_batch = 4, .pool = &pool});
  ASSERT_TRUE(ok.has_value());
  EXPECT_EQ((*ok)->batch_size(), 4u);
  EXPECT_EQ((*ok)->backend(), BatchBackend::kParallel);
}

TEST(BatchCodecTest, SameResultsAsOneCompressor) {
  ASSERT_EQ(Python().size(), 4096u);
  WorkerPool pool(2);
  for (std::string_view name : CodecNames()) {
    auto codec = Make(name);
    auto single = codec->NewCompressor();
    auto serial = NewBatchCompressor(codec, {});
    auto parallel = NewBatchCompressor(
        codec, {.backend = BatchBackend::kParallel, .pool = &pool});
    ASSERT_TRUE(serial.has_value() && parallel.has_value());
    EXPECT_EQ((*serial)->batch_size(), kMaxBatchSize);
    for (std::size_t first = 0; first < 4096; first += 8 * 37) {
      // Small dst for some batches so that "does not fit" (0) shows up too.
      const std::size_t cap = first % 3 == 0 ? 1500 : kPageSize;
      Batch s(first, 8, cap), p(first, 8, cap);
      (*serial)->Compress(s.items);
      (*parallel)->Compress(p.items);
      Bytes want(cap);
      for (std::size_t i = 0; i < 8; ++i) {
        const std::size_t n = (*single)->Compress(s.items[i].src, want);
        ASSERT_EQ(s.items[i].length, n) << name << " item " << i;
        ASSERT_EQ(p.items[i].length, n) << name << " item " << i;
        ASSERT_EQ(std::memcmp(s.out[i].data(), want.data(), n), 0);
        ASSERT_EQ(std::memcmp(p.out[i].data(), want.data(), n), 0);
      }
    }
  }
}

TEST(BatchCodecTest, ShortBatchesAndRoundTrip) {
  WorkerPool pool(3);
  auto codec = Make("zstd");
  auto bc = NewBatchCompressor(
      codec, {.backend = BatchBackend::kParallel, .pool = &pool});
  ASSERT_TRUE(bc.has_value());
  for (std::size_t n = 0; n <= kMaxBatchSize; ++n) {
    Batch b(100, n);
    (*bc)->Compress(b.items);
    std::vector<Bytes> pages(n, Bytes(kPageSize));
    std::vector<BatchItem> d(n);
    for (std::size_t i = 0; i < n; ++i) {
      ASSERT_GT(b.items[i].length, 0u);
      d[i].src = std::span(b.out[i]).first(b.items[i].length);
      d[i].dst = pages[i];
    }
    DecompressBatch(*codec, d, n % 2 == 0 ? &pool : nullptr);
    for (std::size_t i = 0; i < n; ++i) {
      ASSERT_OK(d[i].status);
      EXPECT_EQ(d[i].length, kPageSize);
      EXPECT_EQ(std::memcmp(pages[i].data(), Python().page(100 + i).data(),
                            kPageSize),
                0);
    }
  }
}

TEST(BatchCodecTest, DecompressErrorsStayPerItem) {
  WorkerPool pool(1);
  for (std::string_view name : CodecNames()) {
    auto codec = Make(name);
    auto bc = NewBatchCompressor(codec, {});
    Batch b(2000, 8);
    (*bc)->Compress(b.items);
    std::vector<Bytes> pages(8, Bytes(kPageSize));
    std::vector<BatchItem> d(8);
    for (std::size_t i = 0; i < 8; ++i) {
      ASSERT_GT(b.items[i].length, 0u);
      d[i].src = std::span(b.out[i]).first(b.items[i].length);
      d[i].dst = pages[i];
    }
    d[3].src = d[3].src.first(d[3].src.size() / 2);       // truncated
    d[5].dst = std::span(pages[5]).first(kPageSize - 1);  // wrong size
    for (WorkerPool* p : {static_cast<WorkerPool*>(nullptr), &pool}) {
      DecompressBatch(*codec, d, p);
      for (std::size_t i = 0; i < 8; ++i) {
        if (i == 3 || i == 5) {
          EXPECT_EQ(d[i].status.code(), StatusCode::kCorruption) << name << i;
          EXPECT_EQ(d[i].length, 0u);
        } else {
          ASSERT_OK(d[i].status);
          EXPECT_EQ(d[i].length, kPageSize);
          EXPECT_EQ(std::memcmp(pages[i].data(), Python().page(2000 + i).data(),
                                kPageSize),
                    0);
        }
      }
    }
  }
}

TEST(BatchCodecTest, ThreadsShareOnePool) {
  WorkerPool pool(2, /*spin_us=*/50);
  auto codec = Make("lz4");
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      auto bc = NewBatchCompressor(
          codec, {.backend = BatchBackend::kParallel, .pool = &pool});
      ASSERT_TRUE(bc.has_value());
      for (std::size_t first = t * 8; first + 8 <= 4096; first += 8 * 41) {
        Batch b(first, 8);
        (*bc)->Compress(b.items);
        std::vector<Bytes> pages(8, Bytes(kPageSize));
        std::vector<BatchItem> d;
        std::vector<std::size_t> index;  // the pages that compressed
        for (std::size_t i = 0; i < 8; ++i) {
          if (b.items[i].length == 0) continue;  // stored raw
          d.push_back({.src = std::span(b.out[i]).first(b.items[i].length),
                       .dst = pages[i]});
          index.push_back(i);
        }
        DecompressBatch(*codec, d, &pool);
        for (std::size_t k = 0; k < d.size(); ++k) {
          ASSERT_OK(d[k].status);
          ASSERT_EQ(
              std::memcmp(pages[index[k]].data(),
                          Python().page(first + index[k]).data(), kPageSize),
              0);
        }
      }
    });
  }
  for (auto& t : threads) t.join();
}

// Every item reaches the sink exactly once, whatever the number of items
// and lanes (a lane done with its share takes items from the others').
TEST(BatchCodecTest, SinkSeesEveryItemOnce) {
  WorkerPool pool(3, /*spin_us=*/50);
  auto codec = Make("lz4");
  auto bc = NewBatchCompressor(
      codec, {.backend = BatchBackend::kParallel, .pool = &pool});
  ASSERT_TRUE(bc.has_value());
  for (int rep = 0; rep < 300; ++rep) {
    const std::size_t n = 1 + rep % kMaxBatchSize;
    Batch b(rep, n);
    std::vector<std::atomic<int>> seen(n);
    const BatchCompressor::ItemSink sink = [&](std::size_t i) {
      seen[i].fetch_add(1, std::memory_order_relaxed);
    };
    (*bc)->Compress(b.items, &sink);
    for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(seen[i].load(), 1) << i;
  }
}

// A worker busy with another caller's job cannot start its share of a
// batch: the caller does the whole batch itself rather than wait for it.
TEST(BatchCodecTest, CallerTakesTheShareOfABusyWorker) {
  WorkerPool pool(1, /*spin_us=*/50);
  std::atomic<bool> worker_busy{false};
  std::atomic<bool> release{false};
  std::thread other([&] {
    pool.Run(2, [&](std::size_t lane) {
      if (lane == 0) {
        // Held here, the other caller cannot run lane 1 itself: the
        // worker must, and then stays there until released.
        while (!worker_busy.load()) std::this_thread::yield();
        return;
      }
      worker_busy = true;
      while (!release.load()) std::this_thread::yield();
    });
  });
  while (!worker_busy.load()) std::this_thread::yield();

  auto codec = Make("lz4");
  auto bc = NewBatchCompressor(
      codec, {.backend = BatchBackend::kParallel, .pool = &pool});
  if (!bc.has_value()) {
    release = true;
    other.join();
    FAIL() << bc.error().ToString();
  }
  Batch b(0, 8);
  const auto caller = std::this_thread::get_id();
  std::atomic<int> on_caller{0};
  const BatchCompressor::ItemSink sink = [&](std::size_t) {
    if (std::this_thread::get_id() == caller) on_caller.fetch_add(1);
  };
  (*bc)->Compress(b.items, &sink);
  EXPECT_EQ(on_caller.load(), 8);
  for (const BatchItem& item : b.items) EXPECT_GT(item.length, 0u);
  release = true;
  other.join();
}

}  // namespace
}  // namespace ztier
