// clock.h: the engine's one source of time, the monotonic clock.
//
//   const auto deadline = platform::MonotonicClock::now() + timeout;
//   const std::uint64_t t0 = platform::MonotonicNs();
//
// Every timeout, deadline, latency and age in src/ is measured on this
// clock: CLOCK_MONOTONIC (clock_gettime(2)), which libstdc++'s
// std::chrono::steady_clock reads through the vDSO, without a system call.
// It never jumps with the wall clock (settimeofday, NTP steps) and does not
// advance while the machine is suspended. Wall-clock time (logs, file
// dates) is not taken from here.
//
// Thread safety: reading the clock is safe from any thread.
#ifndef ZTIER_PLATFORM_CLOCK_H_
#define ZTIER_PLATFORM_CLOCK_H_

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

// Whole seconds on the same clock; wraps after 136 years of uptime.
inline std::uint32_t MonotonicSeconds() {
  return static_cast<std::uint32_t>(
      std::chrono::duration_cast<std::chrono::seconds>(
          MonotonicClock::now().time_since_epoch())
          .count());
}

}  // namespace ztier::platform

#endif  // ZTIER_PLATFORM_CLOCK_H_
