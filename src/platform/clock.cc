// clock.cc: BootSeconds (platform/clock.h).
#include "platform/clock.h"

#include <atomic>
#include <cstdint>

namespace ztier::platform {
namespace {

std::int64_t Ns(clockid_t id) {
  struct timespec ts;
  ::clock_gettime(id, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

// The coarse second the offset was last read at, and the offset: whole
// seconds suspended since boot, rounded (without a suspend, 0). A reader
// between the two stores may pair the new second with the old offset: one
// stamp off by the time of the last suspend, once, just after a resume.
std::atomic<std::int64_t> offset_read_at{-1};
std::atomic<std::int64_t> suspended_seconds{0};

}  // namespace

std::uint32_t BootSeconds() {
  struct timespec ts;
  ::clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  if (ts.tv_sec != offset_read_at.load(std::memory_order_relaxed)) {
    const std::int64_t ns = Ns(CLOCK_BOOTTIME) - Ns(CLOCK_MONOTONIC);
    suspended_seconds.store((ns + 500'000'000) / 1'000'000'000,
                            std::memory_order_relaxed);
    offset_read_at.store(ts.tv_sec, std::memory_order_relaxed);
  }
  return static_cast<std::uint32_t>(
      ts.tv_sec + suspended_seconds.load(std::memory_order_relaxed));
}

}  // namespace ztier::platform
