// clock_test.cc: the monotonic clock agrees with CLOCK_MONOTONIC and never
// goes back.
#include "platform/clock.h"

#include <gtest/gtest.h>
#include <time.h>

#include <cstdint>

namespace ztier::platform {
namespace {

std::uint64_t KernelMonotonicNs() {
  timespec ts;
  EXPECT_EQ(clock_gettime(CLOCK_MONOTONIC, &ts), 0);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1'000'000'000u +
         static_cast<std::uint64_t>(ts.tv_nsec);
}

TEST(ClockTest, ReadsClockMonotonic) {
  const std::uint64_t before = KernelMonotonicNs();
  const std::uint64_t ns = MonotonicNs();
  const std::uint64_t after = KernelMonotonicNs();
  EXPECT_LE(before, ns);
  EXPECT_LE(ns, after);
  // Seconds come from the coarse clock: the last tick's time, which can
  // still be in the second before `before`.
  const std::uint32_t s = MonotonicSeconds();
  EXPECT_GE(s + 1, before / 1'000'000'000u);
  EXPECT_LE(s, KernelMonotonicNs() / 1'000'000'000u);
}

// Page ages count suspended time, as the kernel's zram's ac_time does:
// BootSeconds is CLOCK_BOOTTIME's seconds (at tick resolution).
TEST(ClockTest, BootSecondsFollowClockBoottime) {
  for (int i = 0; i < 3; ++i) {
    timespec before, after;
    ASSERT_EQ(clock_gettime(CLOCK_BOOTTIME, &before), 0);
    const std::uint32_t s = BootSeconds();
    ASSERT_EQ(clock_gettime(CLOCK_BOOTTIME, &after), 0);
    // The coarse tick can lag into the second before; the rounded
    // suspended time can put it a second either way.
    EXPECT_GE(s + 2, static_cast<std::uint32_t>(before.tv_sec));
    EXPECT_LE(s, static_cast<std::uint32_t>(after.tv_sec) + 1);
  }
}

TEST(ClockTest, NeverGoesBack) {
  std::uint64_t last = MonotonicNs();
  std::uint32_t last_s = MonotonicSeconds();
  for (int i = 0; i < 100000; ++i) {
    const std::uint64_t now = MonotonicNs();
    ASSERT_GE(now, last);
    last = now;
    const std::uint32_t s = MonotonicSeconds();
    ASSERT_GE(s, last_s);
    last_s = s;
  }
}

}  // namespace
}  // namespace ztier::platform
