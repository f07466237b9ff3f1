// worker_pool_test.cc: every lane runs exactly once, on the right threads,
// with several callers at once and with no workers at all.
#include "ztier/worker_pool.h"

#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "testing/test_util.h"

namespace ztier {
namespace {

// Runs Run(n) and checks each lane ran once, lane 0 on the caller.
void RunOnce(WorkerPool& pool, std::size_t n) {
  std::vector<std::atomic<int>> hits(n);
  std::atomic<bool> lane0_on_caller{false};
  const auto caller = std::this_thread::get_id();
  pool.Run(n, [&](std::size_t lane) {
    hits[lane].fetch_add(1, std::memory_order_relaxed);
    if (lane == 0) lane0_on_caller = std::this_thread::get_id() == caller;
  });
  for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << i;
  EXPECT_TRUE(lane0_on_caller.load());
}

TEST(WorkerPoolTest, Lanes) {
  EXPECT_EQ(WorkerPool(0).lanes(), 1u);
  EXPECT_EQ(WorkerPool(3).lanes(), 4u);
}

TEST(WorkerPoolTest, EveryLaneRunsOnce) {
  WorkerPool pool(3);
  for (int rep = 0; rep < 2000; ++rep) RunOnce(pool, 1 + rep % 4);
}

TEST(WorkerPoolTest, NoWorkersRunsAllOnCaller) {
  WorkerPool pool(0);
  std::vector<int> order;
  pool.Run(1,
           [&](std::size_t lane) { order.push_back(static_cast<int>(lane)); });
  EXPECT_EQ(order, std::vector<int>({0}));
  // More lanes than lanes() still works: the caller runs them all.
  order.clear();
  pool.Run(3,
           [&](std::size_t lane) { order.push_back(static_cast<int>(lane)); });
  EXPECT_EQ(order, std::vector<int>({0, 1, 2}));
}

TEST(WorkerPoolTest, UsesWorkerThreads) {
  WorkerPool pool(2);
  std::mutex mu;
  std::set<std::thread::id> threads;
  for (int rep = 0; rep < 200 && threads.size() < 2; ++rep) {
    pool.Run(3, [&](std::size_t) {
      // Long enough that a worker picks up a lane.
      const auto until =
          std::chrono::steady_clock::now() + std::chrono::microseconds(200);
      while (std::chrono::steady_clock::now() < until) {
      }
      std::lock_guard<std::mutex> lock(mu);
      threads.insert(std::this_thread::get_id());
    });
  }
  EXPECT_GE(threads.size(), 2u);
}

TEST(WorkerPoolTest, NoSpinWorkersSleepAndWake) {
  WorkerPool pool(1, /*spin_us=*/0);
  for (int rep = 0; rep < 300; ++rep) {
    RunOnce(pool, 2);
    if (rep % 50 == 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
}

TEST(WorkerPoolTest, ConcurrentCallers) {
  WorkerPool pool(2, /*spin_us=*/50);
  constexpr int kCallers = 4;
  constexpr int kReps = 500;
  std::atomic<long> total{0};
  std::vector<std::thread> callers;
  for (int t = 0; t < kCallers; ++t) {
    callers.emplace_back([&, t] {
      for (int rep = 0; rep < kReps; ++rep) {
        const std::size_t n = 1 + (rep + t) % 3;
        std::vector<std::atomic<int>> hits(n);
        pool.Run(n, [&](std::size_t lane) {
          hits[lane].fetch_add(1, std::memory_order_relaxed);
          total.fetch_add(1, std::memory_order_relaxed);
        });
        for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1);
      }
    });
  }
  for (auto& c : callers) c.join();
  long expected = 0;
  for (int t = 0; t < kCallers; ++t) {
    for (int rep = 0; rep < kReps; ++rep) expected += 1 + (rep + t) % 3;
  }
  EXPECT_EQ(total.load(), expected);
}

// A lane that throws, on the caller or on a worker: Run rethrows it, and
// only once every other lane has returned (they use the caller's stack),
// and the pool serves the next job as before.
TEST(WorkerPoolTest, AnExceptionComesBackAfterEveryLane) {
  WorkerPool pool(3);
  for (const std::size_t thrower :
       {std::size_t{0}, std::size_t{1}, std::size_t{3}}) {
    std::atomic<int> finished{0};
    bool caught = false;
    try {
      pool.Run(4, [&](std::size_t lane) {
        if (lane == thrower) throw std::runtime_error("lane failed");
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        finished.fetch_add(1);
      });
    } catch (const std::runtime_error& e) {
      caught = std::string(e.what()) == "lane failed";
      // Every other lane had returned before Run did.
      EXPECT_EQ(finished.load(), 3) << "thrower " << thrower;
    }
    EXPECT_TRUE(caught) << "thrower " << thrower;
    std::atomic<int> ran{0};
    pool.Run(4, [&](std::size_t) { ran.fetch_add(1); });
    EXPECT_EQ(ran.load(), 4);
  }
}

TEST(WorkerPoolTest, DestroyWhileIdle) {
  for (int i = 0; i < 20; ++i) {
    WorkerPool pool(2, i % 2 == 0 ? 0 : 100);
    if (i % 3 == 0) RunOnce(pool, 3);
  }
}

}  // namespace
}  // namespace ztier
