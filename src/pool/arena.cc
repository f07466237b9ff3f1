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
#include <sys/mman.h>

#include <cassert>
#include <cstring>

#include "pool/pool_internal.h"

namespace ztier::internal_pool {

Arena::Arena(std::size_t arena_bytes) : arena_bytes_(arena_bytes) {}

Arena::~Arena() {
  for (auto& [base, bytes] : arenas_) munmap(base, bytes);
}

std::byte* Arena::AllocateRun(std::size_t pages) {
  assert(pages >= 1 && pages <= kMaxPagesPerZspage);
  std::lock_guard<std::mutex> lock(mu_);
  if (reserve_ != nullptr) return reserve_->Allocate(pages);
  if (!free_runs_[pages].empty()) {
    std::byte* run = free_runs_[pages].back();
    free_runs_[pages].pop_back();
    return run;
  }
  const std::size_t bytes = pages * kPageSize;
  if (bump_ == nullptr || static_cast<std::size_t>(bump_end_ - bump_) < bytes) {
    // The tail of the old arena (< 16 pages) is left unused.
    void* p = mmap(nullptr, arena_bytes_, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) return nullptr;
    arenas_.emplace_back(static_cast<std::byte*>(p), arena_bytes_);
    bump_ = static_cast<std::byte*>(p);
    bump_end_ = bump_ + arena_bytes_;
  }
  std::byte* run = bump_;
  bump_ += bytes;
  return run;
}

void Arena::ReleaseRun(std::byte* run, std::size_t pages) {
  std::lock_guard<std::mutex> lock(mu_);
  if (reserve_ != nullptr) {
    reserve_->Release(run, pages);
    return;
  }
  free_runs_[pages].push_back(run);
}

void Arena::Discard(std::byte* base, std::size_t first,
                    std::size_t count) const {
  if (count == 0 || reserve_ != nullptr) return;
  const int rc = madvise(base + first * kPageSize, count * kPageSize,
                         MADV_DONTNEED);
  assert(rc == 0);
  (void)rc;
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
