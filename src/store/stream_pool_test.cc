// stream_pool_test.cc: the stream policy: never sleep on a held stream while
// another or a reserve one is free.
#include "stream_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <new>
#include <thread>
#include <vector>

#include "testing/test_util.h"

namespace ztier::internal {
namespace {

std::unique_ptr<StreamPool> MakePool(std::size_t count, std::size_t reserve) {
  auto codec = MakeCodec("lz4");
  EXPECT_TRUE(codec.has_value());
  auto pool = StreamPool::Create(*codec, BatchOptions{}, count, reserve);
  EXPECT_TRUE(pool.has_value()) << pool.error().ToString();
  return std::move(*pool);
}

TEST(StreamPoolTest, HeldStreamIsSkippedNotWaitedFor) {
  auto pool = MakePool(2, 0);
  auto a = pool->Acquire();
  auto b = pool->Acquire();  // must not block: the other stream is free
  EXPECT_NE(&*a, &*b);
  EXPECT_EQ(pool->batch_size(), kMaxBatchSize);
}

TEST(StreamPoolTest, ReserveStreamsServeWhenAllRegularOnesAreHeld) {
  auto pool = MakePool(1, 2);
  EXPECT_EQ(pool->reserve_count(), 2u);
  auto a = pool->Acquire();
  auto b = pool->Acquire();
  auto c = pool->Acquire();
  EXPECT_NE(&*a, &*b);
  EXPECT_NE(&*b, &*c);
  EXPECT_NE(&*a, &*c);
  Stream* released = &*b;
  {
    auto d = std::move(b);  // released at the end of this scope
  }
  auto e = pool->Acquire();  // the only free one: the released stream
  EXPECT_EQ(&*e, released);
}

// A visit that throws gives its stream back: none is left taken, so a
// store after it does not wait for good.
TEST(StreamPoolTest, AVisitThatThrowsGivesItsStreamBack) {
  auto pool = MakePool(1, 2);
  int visits = 0;
  EXPECT_THROW(pool->VisitIdle([&](Stream&) {
    ++visits;
    throw std::bad_alloc();
  }),
               std::bad_alloc);
  EXPECT_EQ(visits, 1);
  std::size_t idle = 0;
  pool->VisitIdle([&](Stream&) { ++idle; });
  EXPECT_EQ(idle, pool->count() + pool->reserve_count());
}

TEST(StreamPoolTest, WaitsOnlyWhenEverythingIsHeldAndWakesOnRelease) {
  auto pool = MakePool(1, 0);
  std::atomic<bool> got{false};
  std::thread t;
  {
    auto held = pool->Acquire();
    t = std::thread([&] {
      auto s = pool->Acquire();
      got = true;
    });
    // The other thread announces its wait before it sleeps; until this
    // stream is released it cannot get one.
    while (pool->waiting() == 0) std::this_thread::yield();
    EXPECT_FALSE(got.load());
  }
  t.join();
  EXPECT_TRUE(got.load());
}

TEST(StreamPoolTest, ManyThreadsShareFewStreams) {
  auto pool = MakePool(2, 1);
  std::atomic<int> inside{0}, max_inside{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 6; ++i) {
    threads.emplace_back([&] {
      for (int k = 0; k < 2000; ++k) {
        auto s = pool->Acquire();
        int now = ++inside;
        int m = max_inside.load();
        while (now > m && !max_inside.compare_exchange_weak(m, now)) {
        }
        --inside;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_LE(max_inside.load(), 3);  // 2 streams + 1 reserve
}

}  // namespace
}  // namespace ztier::internal
