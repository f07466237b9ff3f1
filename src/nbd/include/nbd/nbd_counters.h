// nbd_counters.h: what the NBD server counts for monitoring: connections,
// requests by command, error replies by errno, and READ/WRITE latency
// histograms. The Prometheus exporter (src/ctl/metrics.h) renders them;
// docs/metrics.md says what each one means.
//
// The IO path updates them (connection.cc): each update is one relaxed
// atomic add on memory that lives as long as the server, so counting takes
// no lock and allocates nothing (a swap device's IO path must not allocate).
// The cost is one contended cache line per counter group when many
// connections run at once (each group is aligned to its own 64-byte line so
// groups do not slow each other down).
//
// Thread safety: any thread may update or read any field at any time. A
// reader sees each counter at some recent value; two counters (or two buckets
// of one histogram) read one after the other need not agree with each other.
#ifndef ZTIER_NBD_NBD_COUNTERS_H_
#define ZTIER_NBD_NBD_COUNTERS_H_

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>

#include "nbd/protocol.h"

namespace ztier::nbd {

// Request latency, from the moment its header was parsed to the moment its
// reply was sent or handed on to be sent (docs/metrics.md). Buckets are
// Prometheus-style upper bounds; each counts only the requests that fell in
// it (the exporter makes them cumulative).
struct LatencyHistogram {
  // Upper bounds in nanoseconds: 10 us .. 1 s, 1-2.5-5 steps.
  static constexpr std::array<std::uint64_t, 16> kBoundsNs = {
      10'000,      25'000,      50'000,      100'000,
      250'000,     500'000,     1'000'000,   2'500'000,
      5'000'000,   10'000'000,  25'000'000,  50'000'000,
      100'000'000, 250'000'000, 500'000'000, 1'000'000'000};
  static constexpr std::size_t kBuckets = kBoundsNs.size() + 1;  // + "+Inf"

  void Observe(std::uint64_t ns) {
    std::size_t i = 0;
    while (i < kBoundsNs.size() && ns > kBoundsNs[i]) ++i;
    buckets[i].fetch_add(1, std::memory_order_relaxed);
    sum_ns.fetch_add(ns, std::memory_order_relaxed);
  }

  alignas(64) std::array<std::atomic<std::uint64_t>, kBuckets> buckets{};
  std::atomic<std::uint64_t> sum_ns{0};
};

struct NbdServerCounters {
  // Commands by wire type (kCmdRead .. kCmdBlockStatus); anything else
  // counts in the last slot.
  static constexpr std::size_t kCommandSlots = kCmdBlockStatus + 2;
  static constexpr std::size_t CommandSlot(std::uint16_t type) {
    return type <= kCmdBlockStatus ? type : kCommandSlots - 1;
  }
  // Error replies by NBD error (protocol.h's kErr*); any other value counts
  // in the last slot.
  static constexpr std::array<std::uint32_t, 8> kErrors = {
      kErrPerm,  kErrIo,       kErrNoMem,  kErrInval,
      kErrNoSpc, kErrOverflow, kErrNotSup, kErrShutdown};
  static constexpr std::size_t kErrorSlots = kErrors.size() + 1;
  static constexpr std::size_t ErrorSlot(std::uint32_t error) {
    std::size_t i = 0;
    while (i < kErrors.size() && kErrors[i] != error) ++i;
    return i;
  }

  void CountRequest(std::uint16_t type) {
    requests[CommandSlot(type)].fetch_add(1, std::memory_order_relaxed);
  }
  void CountErrorReply(std::uint32_t error) {
    error_replies[ErrorSlot(error)].fetch_add(1, std::memory_order_relaxed);
  }

  // Every connection accept() returned, including refused ones.
  alignas(64) std::atomic<std::uint64_t> connections_accepted{0};
  // Those refused because max_connections were open.
  std::atomic<std::uint64_t> connections_refused{0};
  // Request buffers mapped as requests came (a connection's set-up, and
  // --prealloc's buffers, not counted): none while a --prealloc server's
  // requests fit its buffers, as a swap device's IO must take no memory.
  std::atomic<std::uint64_t> request_buffers_mapped{0};
  // Requests read in the transmission phase, NBD_CMD_DISC included, bad
  // ones (answered EINVAL) included.
  alignas(64) std::array<std::atomic<std::uint64_t>, kCommandSlots> requests{};
  // Replies that carried an error (any command).
  alignas(
      64) std::array<std::atomic<std::uint64_t>, kErrorSlots> error_replies{};
  // Valid READ and WRITE requests (bad ones are answered before they run).
  LatencyHistogram read_latency;
  LatencyHistogram write_latency;
};

}  // namespace ztier::nbd

#endif  // ZTIER_NBD_NBD_COUNTERS_H_
