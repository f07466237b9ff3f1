// futex_test.cc: FutexWait sleeps in the kernel until FutexWake, and
// returns at once when the word no longer holds the expected value.
#include "platform/futex.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <climits>
#include <cstdint>
#include <thread>

namespace ztier::platform {
namespace {

TEST(FutexTest, WaitReturnsAtOnceWhenTheWordDiffers) {
  std::atomic<std::uint32_t> word{5};
  FutexWait(&word, 4);  // would sleep forever if it ignored `expected`
  EXPECT_EQ(word.load(), 5u);
}

TEST(FutexTest, WakeWithNobodyWaitingWakesNone) {
  std::atomic<std::uint32_t> word{0};
  EXPECT_EQ(FutexWake(&word, INT_MAX), 0);
}

// A second thread sleeps on the word; FutexWake reports it woke exactly one
// sleeper only once that thread is asleep in the kernel, and the thread then
// returns from FutexWait.
TEST(FutexTest, WakesASleepingThread) {
  std::atomic<std::uint32_t> word{0};
  std::atomic<bool> returned{false};
  std::thread waiter([&] {
    FutexWait(&word, 0);
    returned.store(true);
  });
  int woken = 0;
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (woken == 0 && std::chrono::steady_clock::now() < deadline) {
    woken = FutexWake(&word, INT_MAX);
    if (woken == 0) std::this_thread::yield();
  }
  EXPECT_EQ(woken, 1);
  if (woken == 0) word.store(1);  // let a waiter that never slept finish
  waiter.join();
  EXPECT_TRUE(returned.load());
  EXPECT_EQ(word.load(), 0u);
}

// The protocol futex.h shows: the waiter loops until the word changes; the
// waker changes it, then wakes. The wake is never lost.
TEST(FutexTest, ChangeThenWakeReleasesEveryWaiter) {
  for (int round = 0; round < 200; ++round) {
    std::atomic<std::uint32_t> word{0};
    std::thread a([&] {
      while (word.load() == 0) FutexWait(&word, 0);
    });
    std::thread b([&] {
      while (word.load() == 0) FutexWait(&word, 0);
    });
    word.store(1);
    FutexWake(&word, INT_MAX);
    a.join();
    b.join();
  }
}

}  // namespace
}  // namespace ztier::platform
