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
