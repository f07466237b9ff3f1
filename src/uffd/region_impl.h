// region_impl.h: a Region's state, shared by the files that implement it:
//   region.cc         Create, the destructor, Pageout, Stats
//   fault_handler.cc  the handler thread: missing and write-protect faults
//   evict.cc          eviction (write-protect, store, zap, wake) and the
//                     pool limit
//   reclaim.cc        the CLOCK reclaimer that keeps resident pages in budget
//   shrinker.cc       the FIFO shrinker that writes back stored pages
// Not part of the public API.
#ifndef ZTIER_UFFD_REGION_IMPL_H_
#define ZTIER_UFFD_REGION_IMPL_H_

#include <linux/userfaultfd.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <thread>
#include <vector>

#include "page_map.h"
#include "platform/event_fd.h"
#include "platform/mapping.h"
#include "platform/own_memory.h"
#include "platform/userfaultfd.h"
#include "ztier/page.h"
#include "ztier/page_store.h"
#include "ztier/region.h"

namespace ztier {

// Counters Stats() reads without the mutex (relaxed: each is exact, a set
// of them read together is not a snapshot).
struct RegionCounters {
  std::atomic<std::uint64_t> pool_limit_hit{0};
  std::atomic<std::uint64_t> reject_reclaim_fail{0};
  std::atomic<std::uint64_t> zswpin{0};
  std::atomic<std::uint64_t> zswpout{0};
  std::atomic<std::uint64_t> zswpwb{0};
  std::atomic<std::uint64_t> swap_ra{0};
  std::atomic<std::uint64_t> swap_ra_hit{0};
  std::atomic<std::uint64_t> resident{0};
  std::atomic<std::uint64_t> stored{0};        // pages in the pool now
  std::atomic<std::uint64_t> written_back{0};  // pages on the backing now
  std::atomic<std::uint64_t> faults{0};
  std::atomic<std::uint64_t> wp_faults{0};
  std::atomic<std::uint64_t> evictions{0};
  std::atomic<std::uint64_t> swpout_fallback{0};
};

inline void Bump(std::atomic<std::uint64_t>& c, std::uint64_t v = 1) {
  c.fetch_add(v, std::memory_order_relaxed);
}
inline void Drop(std::atomic<std::uint64_t>& c, std::uint64_t v = 1) {
  c.fetch_sub(v, std::memory_order_relaxed);
}
inline std::uint64_t Read(const std::atomic<std::uint64_t>& c) {
  return c.load(std::memory_order_relaxed);
}

struct Region::Impl {
  // Pages a fault-in window holds at most (page_cluster 5).
  static constexpr std::size_t kMaxWindow = 32;
  // The aligned window a first touch maps zeros over.
  static constexpr std::size_t kZeroWindow = 64;
  // Victims one eviction step write-protects, stores and zaps together: a
  // writer that hits one is woken at the end of its step, but its retried
  // access is a missing fault, which, as every other fault of the region,
  // waits for mu: for the whole pass (a reclaim, or a Pageout).
  static constexpr std::size_t kEvictChunk = 256;
  // Pages of one StoreBatch unit (a 64 KiB folio).
  static constexpr std::size_t kUnitPages = 16;
  // Victims one shrinker writeback pass takes.
  static constexpr std::size_t kShrinkBatch = 256;

  RegionOptions options;
  platform::Mapping mapping;  // the region's memory, `size` bytes
  std::byte* base = nullptr;  // mapping's
  std::size_t size = 0;  // bytes, a multiple of kPageSize
  std::size_t num_pages = 0;
  std::size_t budget_pages = 0;   // 0: no reclaimer
  std::uint64_t pool_limit = 0;   // bytes
  std::uint64_t pool_accept = 0;  // bytes: accept_threshold_percent of it

  std::unique_ptr<internal::Userfaultfd> uffd;  // set once Init opens it
  bool registered = false;
  // The process that made the region. A fork()ed child's copy of this
  // object shares its fds (the userfaultfd and `stop`) and names the
  // parent's registration and thread: it must touch none of them
  // (Region::~Region, PageRange).
  pid_t owner = 0;
  platform::EventFd stop;  // the handler stops when it is readable
  std::atomic<bool> stop_requested{false};  // set with stop, for the spin
  // How long the handler polls the userfaultfd before it sleeps in poll().
  static constexpr std::chrono::microseconds kHandlerSpin{50};
  int pagemap_fd = -1;  // /proc/self/pagemap, or -1 (see evict.cc)
  platform::OwnMemory own_memory;  // eviction's reads; empty without /proc
  std::unique_ptr<PageStore> store;
  std::thread handler;
  RegionCounters c;

  // Everything below is guarded by mu. The handler holds it while it
  // handles one batch of fault messages and runs the reclaimer; Pageout
  // holds it for its whole eviction.
  std::mutex mu;
  internal::PageMap pages{0};
  std::size_t clock_hand = 0;
  // After a reclaim pass that evicted under half its victims (they do not
  // compress and there is no backing store, the pool is full, or they are
  // mlocked): the next pass waits until resident pages reach this, and
  // takes fewer victims (see reclaim.cc). 0: no such pass.
  std::size_t reclaim_retry_at = 0;
  bool reached_full = false;  // zswap's zswap_pool_reached_full
  std::deque<std::uint32_t> lru;         // the shrinker's FIFO, in store order
  std::unique_ptr<std::byte[]> staging;  // kMaxWindow pages, for fault-in
  std::unique_ptr<std::byte[]> zeros;    // kZeroWindow zeroed pages
  bool logged_load_error = false;
  bool logged_error = false;
  // min(kEvictChunk, num_pages) pages: a chunk's runs (see evict.cc).
  std::unique_ptr<std::byte[]> evict_copy;

  Impl() = default;
  ~Impl();

  // region.cc. Region::Create's work on a new Region: checks `given` and
  // sets everything up from it, opening the userfaultfd and passing it through `wrap`
  // when that is set (tests: a FaultyUserfaultfd). Errors as Create's.
  using UffdWrap = std::function<std::unique_ptr<internal::Userfaultfd>(
      std::unique_ptr<internal::Userfaultfd>)>;
  Status Init(const RegionOptions& given, const UffdWrap& wrap);

  std::uintptr_t Addr(std::size_t page) const {
    return reinterpret_cast<std::uintptr_t>(base) + page * kPageSize;
  }
  // Logs the first unexpected error (a failed ioctl, madvise or writeback)
  // of this region to stderr; the rest are not logged. Allocates nothing.
  void LogError(const Status& st) noexcept;
  // The same for a std::bad_alloc caught in the eviction or the reclaimer
  // (`what`).
  void LogOutOfMemory(const char* what) noexcept;
  // A resolving ioctl (UFFDIO_ZEROPAGE, _POISON, _WRITEPROTECT) on
  // [addr, addr + len) failed: logs st and wakes the faulting threads,
  // which a failed ioctl leaves asleep; they fault again and are served
  // anew (or get the signal of a range no longer mapped).
  void ResolveFailed(std::uintptr_t addr, std::size_t len, const Status& st);
  // uffd->Copy that does not throw: a failure whose message could not be
  // made (std::bad_alloc) is still a failure, with *done set, so that the
  // caller's undo of its bookkeeping for the pages not copied always runs.
  Status CopyPages(std::uintptr_t dst, const std::byte* src, std::size_t len,
                   bool wp, std::size_t* done) noexcept;
  // f(), a call that returns a Status, without throwing: a std::bad_alloc
  // while it made its error message is that error, named `what` (at most
  // 15 characters: no allocation). For the steps whose bookkeeping must go
  // on whatever happens (the end of an eviction, a wake).
  template <typename F>
  static Status NoThrow(const char* what, F&& f) noexcept {
    try {
      return f();
    } catch (const std::bad_alloc&) {
      return Status::IoError(what);
    }
  }
  // Frees the slot of page p, stored or written back, and takes it out of
  // those counters; the caller gives p its new state. REQUIRES: mu
  void ForgetStored(std::size_t p);
  // The pages [*first, *last) that [addr, addr + len) covers, rounded out;
  // kOutOfRange, naming `what`, if the range is not inside the region.
  Status PageRange(const void* addr, std::size_t len, const char* what,
                   std::size_t* first, std::size_t* last) const;

  // fault_handler.cc
  void HandlerLoop();
  // Reads up to `max` fault messages for up to kHandlerSpin; 0 if none
  // came, or the userfaultfd could not be read.
  std::size_t SpinRead(uffd_msg* msgs, std::size_t max);
  void Handle(const uffd_msg* msgs, std::size_t n);  // takes mu
  void HandleFault(const uffd_msg& msg);             // REQUIRES: mu
  void HandleMissing(std::size_t p);                 // REQUIRES: mu
  void HandleWriteProtect(std::size_t p);            // REQUIRES: mu
  void MapZeros(std::size_t p);                      // REQUIRES: mu
  void FaultIn(std::size_t p);                       // REQUIRES: mu
  // The state and counters of a stored page that is installed (sign +1),
  // or the undoing of that when its copy failed (-1). REQUIRES: mu
  void MarkLoaded(std::size_t p, bool read_ahead, bool wb, int sign);
  void LoadFailed(std::size_t p, const Status& st);  // REQUIRES: mu

  // evict.cc. Evicts `victims` (resident pages, ascending). Returns false
  // when the pool limit stopped it (the rest stay resident). REQUIRES: mu
  bool Evict(std::span<const std::uint32_t> victims);
  // One chunk of at most kEvictChunk victims, through the steps of
  // evict.cc. REQUIRES: mu
  bool EvictChunk(std::span<const std::uint32_t> victims);
  // Step 0: appends to `kept` the victims that still have a page or a swap
  // entry; forgets the others (untouched again). REQUIRES: mu
  void KeepPresent(std::span<const std::uint32_t> chunk,
                   std::vector<std::uint32_t>* kept);
  // Step 2: stores each run of `v` whose `guarded` is set, marking the pages
  // stored in `stored`. False when the pool limit refused a store (the
  // rest of the chunk is not stored). REQUIRES: mu
  bool StoreGuarded(std::span<const std::uint32_t> v,
                    std::span<const std::uint8_t> guarded,
                    std::span<std::uint8_t> stored);
  // Step 2's read of the n consecutive victims from page `first`: returns
  // where their bytes are, and sets readable[q] for each page q that was
  // read (one the application dropped after step 0 is not). REQUIRES: mu
  const std::byte* CopyOut(std::uint32_t first, std::size_t n,
                           std::uint8_t* readable);
  // Step 3 for one run of n consecutive victims: zap and wake when `stored`,
  // else (or if the zap fails) keep the pages and un-protect. REQUIRES: mu
  void FinishRun(const std::uint32_t* run, std::size_t n, bool stored);
  // FinishRun's end for pages the zap did or did not drop. REQUIRES: mu
  void FinishPages(const std::uint32_t* run, std::size_t n, bool zapped);
  // zswap_check_limits plus the synchronous shrinker: true if a store may
  // go ahead. REQUIRES: mu
  bool PoolAccepts();
  // Compacts the pool if that alone brings it to pool_accept; true if the
  // pool is there now. REQUIRES: mu
  bool CompactToAccept();

  // fault_handler.cc. Ends the process with `why` on stderr: the handler
  // can no longer read or wait for faults, and no other thread can.
  [[noreturn]] static void Abandon(const std::string& why);

  // reclaim.cc. Runs the CLOCK when resident pages exceed the budget,
  // backing off after a pass that evicted little (reclaim_retry_at).
  void Reclaim();  // REQUIRES: mu

  // shrinker.cc
  void NoteStored(std::size_t p);  // REQUIRES: mu
  // Writes back the oldest stored pages until the pool is at most
  // pool_accept; false if it could not get there. REQUIRES: mu
  bool Shrink();
};

}  // namespace ztier

#endif  // ZTIER_UFFD_REGION_IMPL_H_
