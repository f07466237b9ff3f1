// File: pool/arena.cc
//
// Arenas: big anonymous mappings (MAP_NORESERVE, so only touched pages cost
// memory) cut into runs of 1..16 pages by a bump pointer. Returned runs are
// kept in one stack per run length and reused first; runs are never split
// or coalesced (address space is cheap, RAM is not: a returned run holds no
// RAM because its pages were discarded). Arenas are unmapped only by the
// destructor.
//
// With a reserve (PoolOptions::prealloc_bytes) none of that happens: every
// run comes from the PageReserve (reserve.cc), which is already resident,
// and its pages are never discarded. The reserve is the pool's whole
// memory: when it has no run long enough, AllocateRun fails rather than map
// memory the kernel would have to find later, possibly under the very
// memory pressure the pool is there to relieve.
#include <algorithm>
#include <cassert>
#include <cstdint>
#include <cstring>
#include <new>
#include <utility>
#include <vector>

#include "pool_internal.h"

namespace ztier::internal_pool {
namespace {

// Whether the advice took. platform::Advise reports a failure as a Status
// whose message is made on the heap; the callers here run under a class
// lock that Malloc releases by hand, or in Pool::Impl::ReleaseOnExit's
// destructor, where a std::bad_alloc from that message must not escape:
// with no heap left, the advice failed is all they need to know.
bool Advised(void* addr, std::size_t bytes, platform::Advice advice) noexcept {
  try {
    return platform::Advise(addr, bytes, advice).ok();
  } catch (const std::bad_alloc&) {
    return false;
  }
}

}  // namespace

Arena::Arena(std::size_t arena_bytes, bool huge_pages)
    : arena_bytes_(arena_bytes), huge_pages_(huge_pages) {}

Arena::~Arena() = default;  // unmaps the arenas

std::byte* Arena::AllocateRun(std::size_t pages, bool* populate) {
  assert(pages >= 1 && pages <= kMaxPagesPerZspage);
  internal::MutexLock lock(mu_);
  if (reserve_ != nullptr) return reserve_->Allocate(pages);
  if (!free_runs_[pages].empty()) {
    std::byte* run = free_runs_[pages].back();
    free_runs_[pages].pop_back();
    return run;
  }
  const std::size_t bytes = pages * kPageSize;
  const bool new_arena =
      bump_ == nullptr || static_cast<std::size_t>(bump_end_ - bump_) < bytes;
  // The vectors' room first: out of memory is a null run here, never an
  // exception later (ReleaseRun) or a mapping lost on the way.
  try {
    std::vector<std::byte*>& runs = free_runs_[pages];
    if (runs.capacity() <= carved_[pages]) {
      runs.reserve(std::max<std::size_t>(16, 2 * carved_[pages]));
    }
    if (new_arena) arenas_.reserve(arenas_.size() + 1);
  } catch (const std::bad_alloc&) {
    return nullptr;
  }
  if (new_arena) {
    // The tail of the old arena (< 16 pages) is left unused. kUnlocked:
    // under the process's mlockall(MCL_FUTURE) a locked arena would be
    // faulted in whole at mmap (1 GiB, under the class lock) and none of
    // it given back (madvise cannot drop locked pages). A preallocated
    // pool (reserve.cc) is the one to use where pages must stay locked.
    // A failed mmap's error message is made on the heap: with none left,
    // a null run as well (Malloc holds a class lock it releases by hand).
    platform::Mapping m;
    try {
      Result<platform::Mapping> r = platform::Mapping::Anonymous(
          arena_bytes_, platform::Commit::kUnlocked, "mmap arena");
      if (!r.has_value()) return nullptr;
      m = std::move(*r);
    } catch (const std::bad_alloc&) {
      return nullptr;
    }
    if (huge_pages_) {
      // Advice only: without THP the kernel ignores it.
      Advised(m.data(), m.size(), platform::Advice::kHugePages);
    }
    arenas_.push_back(std::move(m));  // room reserved above
    bump_ = arenas_.back().data();
    bump_end_ = bump_ + arena_bytes_;
    populated_ = bump_;
  }
  ++carved_[pages];
  std::byte* run = bump_;
  bump_ += bytes;
  if (huge_pages_ && populate != nullptr && !populating_ &&
      bump_ > populated_) {
    populating_ = true;
    *populate = true;
  }
  return run;
}

// A fresh run's pages would each take a page fault on first touch (about
// 1.5 us on a VM, a third of compressing the page with lz4). Instead the
// arena is faulted in ahead of use, 2 MiB aligned at a time, with
// madvise(MADV_POPULATE_WRITE); with huge pages (the arena is
// MADV_HUGEPAGE) each is one huge page, allocated and zeroed at a fraction
// of the cost of 512 small ones. Measured with `ztier bench engine` (lz4,
// anon-python, fresh store / compress): 0.74-0.76 with a fault per page,
// 0.76-0.81 populating small pages, 0.87-0.88 with huge pages
// (docs/benchmarks.md).
//
// A populate takes about 250 us on this VM, so no lock is held meanwhile:
// the thread whose run reaches past the populated end does it after
// Pool::Malloc has dropped its locks (before it writes its object), and
// other threads go on taking runs (one that reaches memory not yet
// populated faults it in on touch). Done under the arena's and the class's
// lock, as it once was, it put the other lane of a parallel batch to sleep
// on those locks. Populating further ahead cost a fresh fill the pages it
// never used: 5% of single-thread store throughput. At most 2 MiB are
// resident ahead of use (in RSS, not in mem_used_total). When the kernel
// has no huge page at hand it falls back to small pages; a kernel before
// 5.14 refuses the advice, and the pages then fault in on first touch.
void Arena::PopulateAhead() {
  std::byte* from;
  std::byte* end;
  std::byte* arena_end;
  {
    internal::MutexLock lock(mu_);
    assert(populating_);
    from = populated_;
    arena_end = bump_end_;
    // Up to the next 2 MiB boundary, and past the runs handed out.
    const auto align = [](const std::byte* p) {
      return reinterpret_cast<std::byte*>(
          (reinterpret_cast<std::uintptr_t>(p) + kPopulateBytes) &
          ~(std::uintptr_t{kPopulateBytes} - 1));
    };
    end = std::min(arena_end, std::max(align(from), align(bump_)));
  }
  // On failure (out of memory now, or an old kernel) the pages fault in on
  // touch.
  Advised(from, static_cast<std::size_t>(end - from),
          platform::Advice::kPopulateWrite);
  internal::MutexLock lock(mu_);
  // A new arena may have been mapped meanwhile: its populated_ is its own.
  if (bump_end_ == arena_end) populated_ = std::max(populated_, end);
  populating_ = false;
}

void Arena::ReleaseRun(std::byte* run, std::size_t pages) {
  internal::MutexLock lock(mu_);
  if (reserve_ != nullptr) {
    reserve_->Release(run, pages);
    return;
  }
  free_runs_[pages].push_back(run);  // within the room AllocateRun made
}

void Arena::Discard(std::byte* base, std::size_t first,
                    std::size_t count) const {
  if (count == 0 || reserve_ != nullptr) return;
  std::byte* const p = base + first * kPageSize;
  // EINVAL for locked pages (the process called mlockall): they stay, as
  // locked memory does, and are zeroed by hand, as a reused run must be.
  if (!Advised(p, count * kPageSize, platform::Advice::kDiscard)) {
    std::memset(p, 0, count * kPageSize);
  }
}

std::uint64_t* Arena::ReserveBitmap(const std::byte* run, std::uint32_t objs) {
  if (reserve_ == nullptr || objs <= 64) return nullptr;  // lazy, or inline
  // Each page of the run owns 2 words; the run is ours (the caller holds
  // it), so its words are too, without the lock.
  std::uint64_t* bits = reserve_->Bitmap(run);
  std::memset(bits, 0, (objs + 63) / 64 * sizeof(std::uint64_t));
  return bits;
}

}  // namespace ztier::internal_pool
