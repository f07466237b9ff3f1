// sharded_counter_test.cc: the sum is exact once writers stop, with many
// threads adding and subtracting at once (runs under TSan), wraps back
// right when subtractions land in other cells than the additions, and never
// reads below zero.
#include "platform/sharded_counter.h"

#include <sched.h>

#include <thread>
#include <vector>

#include "testing/test_util.h"

namespace ztier::internal {
namespace {

TEST(ShardedCounterTest, StartsAtZero) {
  ShardedCounter c;
  EXPECT_EQ(c.Sum(), 0u);
  c.Add(5);
  c.Sub(2);
  EXPECT_EQ(c.Sum(), 3u);
}

TEST(ShardedCounterTest, ManyThreadsSumExactly) {
  ShardedCounter c;
  constexpr int kThreads = 8;
  constexpr int kOps = 100000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&c, t] {
      for (int i = 0; i < kOps; ++i) {
        c.Add(3);
        c.Sub(1);
        if (i % 1000 == 0) sched_yield();  // move between CPUs now and then
      }
      c.Add(static_cast<std::uint64_t>(t));
    });
  }
  for (auto& t : threads) t.join();
  // 2 per op, plus 0 + 1 + ... + 7.
  EXPECT_EQ(c.Sum(), std::uint64_t{kThreads} * kOps * 2 + 28);
}

// A thread that adds on one CPU and subtracts on another leaves one cell
// "negative"; the unsigned sum still comes back to the right value.
TEST(ShardedCounterTest, SubtractingOnAnotherCpuWrapsBack) {
  ShardedCounter c;
  const unsigned cpus = std::thread::hardware_concurrency();
  auto pinned = [](unsigned cpu, auto fn) {
    std::thread t([cpu, fn] {
      cpu_set_t set;
      CPU_ZERO(&set);
      CPU_SET(cpu, &set);
      (void)sched_setaffinity(0, sizeof(set), &set);  // best effort
      fn();
    });
    t.join();
  };
  pinned(0, [&] { c.Add(1000); });
  pinned(cpus > 1 ? 1 : 0, [&] { c.Sub(999); });
  EXPECT_EQ(c.Sum(), 1u);
  pinned(cpus > 1 ? 1 : 0, [&] { c.Sub(1); });
  EXPECT_EQ(c.Sum(), 0u);
}

// A reader that sees a subtraction before the addition it undoes (made on
// another CPU) reads 0, not a number near 2^64.
TEST(ShardedCounterTest, NeverReadsBelowZero) {
  ShardedCounter c;
  c.Sub(1);  // the addition is still "in flight"
  EXPECT_EQ(c.Sum(), 0u);
  c.Add(1);
  EXPECT_EQ(c.Sum(), 0u);
  c.Add(1);
  EXPECT_EQ(c.Sum(), 1u);
}

}  // namespace
}  // namespace ztier::internal
