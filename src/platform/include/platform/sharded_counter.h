// sharded_counter.h: a statistics counter that threads on different CPUs
// update without passing one cache line between them.
//
//   ShardedCounter stored;
//   stored.Add(1);            // on any thread, lock-free
//   stored.Sub(1);
//   std::uint64_t n = stored.Sum();
//
// A plain std::atomic counter updated by every stored page moves its cache
// line to whichever CPU stores next; where two CPUs share no cache (two
// cores of different CCXs, or a VM's two vCPUs placed so) that costs a few
// hundred nanoseconds per update, and a batch that two lanes store together
// updates several such counters per page. Here each CPU adds to its own
// cell (chosen by sched_getcpu(), a few ns through glibc's rseq area), and a
// reader sums the cells, like the kernel's percpu_counter.
//
// Sum() is exact once writers are quiet; while they run it may miss updates
// in flight. A page stored on one CPU and freed on another leaves one cell
// above and another below: the sum wraps back to the right value, but a
// single cell means nothing, and a reader that sees the subtraction and not
// yet the addition would sum to "minus one", near 2^64. Sum() returns 0
// then, as the kernel's percpu_counter_sum_positive() does: these counters
// never truly go below zero (nor reach 2^63).
//
// Thread safety: all methods may be called from any thread.
#ifndef ZTIER_PLATFORM_SHARDED_COUNTER_H_
#define ZTIER_PLATFORM_SHARDED_COUNTER_H_

#include <sched.h>

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace ztier::internal {

class ShardedCounter {
 public:
  ShardedCounter() = default;
  ShardedCounter(const ShardedCounter&) = delete;
  ShardedCounter& operator=(const ShardedCounter&) = delete;

  void Add(std::uint64_t v) { Cell().fetch_add(v, std::memory_order_relaxed); }
  void Sub(std::uint64_t v) { Cell().fetch_sub(v, std::memory_order_relaxed); }
  std::uint64_t Sum() const {
    std::uint64_t sum = 0;  // modulo 2^64: cells may be "negative"
    for (const Padded& c : cells_) sum += c.v.load(std::memory_order_relaxed);
    return static_cast<std::int64_t>(sum) < 0 ? 0 : sum;
  }

 private:
  // More cells than CPUs only costs memory (64 bytes each); fewer makes CPUs
  // i and i + kCells share a line again.
  static constexpr std::size_t kCells = 16;
  struct alignas(64) Padded {
    std::atomic<std::uint64_t> v{0};
  };

  std::atomic<std::uint64_t>& Cell() {
    const int cpu = sched_getcpu();  // -1 where the kernel cannot say
    return cells_[static_cast<unsigned>(cpu < 0 ? 0 : cpu) % kCells].v;
  }

  Padded cells_[kCells];
};

}  // namespace ztier::internal

#endif  // ZTIER_PLATFORM_SHARDED_COUNTER_H_
