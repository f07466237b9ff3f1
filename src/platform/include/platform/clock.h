// clock.h: the engine's one source of time, the monotonic clock.
//
//   const auto deadline = platform::MonotonicClock::now() + timeout;
//   const std::uint64_t t0 = platform::MonotonicNs();
//
// Every timeout, deadline and latency in src/ is measured on this clock (a
// page's age, on BootSeconds below): CLOCK_MONOTONIC (clock_gettime(2)),
// which libstdc++'s std::chrono::steady_clock reads through the vDSO,
// without a system call.
// It never jumps with the wall clock (settimeofday, NTP steps) and does not
// advance while the machine is suspended. Wall-clock time (logs, file
// dates) is not taken from here.
//
// MonotonicSeconds reads the same clock through CLOCK_MONOTONIC_COARSE: the
// time of the last timer tick (at most a few milliseconds behind), which the
// vDSO returns without reading the CPU's counter. BootSeconds adds the time
// the machine spent suspended (CLOCK_BOOTTIME's seconds), as the kernel's
// zram stamps a page's ac_time: stores and loads stamp every page they
// touch with it, and a page's age needs only seconds.
//
// Thread safety: reading the clock is safe from any thread.
#ifndef ZTIER_PLATFORM_CLOCK_H_
#define ZTIER_PLATFORM_CLOCK_H_

#include <time.h>

#include <chrono>
#include <cstdint>

namespace ztier::platform {

using MonotonicClock = std::chrono::steady_clock;
static_assert(MonotonicClock::is_steady, "the engine's clock never goes back");

// Nanoseconds since an arbitrary fixed point (boot, on Linux).
inline std::uint64_t MonotonicNs() {
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(
          MonotonicClock::now().time_since_epoch())
          .count());
}

// Nanoseconds since boot, suspend included (CLOCK_BOOTTIME): for spans of
// calendar time, such as a day, that a suspended machine lives through.
inline std::uint64_t BootTimeNs() {
  struct timespec ts;
  ::clock_gettime(CLOCK_BOOTTIME, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1000000000u +
         static_cast<std::uint64_t>(ts.tv_nsec);
}

// Whole seconds on the same clock, at tick resolution (above); wraps after
// 136 years of uptime.
inline std::uint32_t MonotonicSeconds() {
  struct timespec ts;
  ::clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return static_cast<std::uint32_t>(ts.tv_sec);
}

// Whole seconds since boot, suspend included (CLOCK_BOOTTIME), at tick
// resolution: MonotonicSeconds plus the seconds spent suspended. Those are
// read again (CLOCK_BOOTTIME against CLOCK_MONOTONIC, rounded) only when
// the coarse second moves on, which it always has after a resume; in
// between this costs what MonotonicSeconds does. Wraps as it does.
std::uint32_t BootSeconds();

}  // namespace ztier::platform

#endif  // ZTIER_PLATFORM_CLOCK_H_
