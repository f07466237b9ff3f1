// evict.cc: eviction of resident pages into the PageStore (region.h,
// "Eviction" steps 2-4), used by the reclaimer and by Pageout, and the pool
// limit check every store passes first.
//
// Victims go in chunks of at most kEvictChunk pages (1 MiB); a writer that
// hits a victim is woken when its chunk is done, but its retried access is
// a missing fault, and the handler serves it only once the whole pass
// (holding the region mutex) is over, as it does every other fault that
// meanwhile. For one chunk, under the region mutex:
//   0. Presence: /proc/self/pagemap says which victims still have a page or
//      a swap entry. One with neither was dropped by the application
//      (MADV_DONTNEED): it holds zeros, and reading it would raise a fault
//      nobody can answer (the handler may be the reader). It is forgotten:
//      untouched again, its next touch maps zeros.
//   1. UFFDIO_WRITEPROTECT each run of consecutive victims. From here a
//      write blocks in a WP fault; reads go on.
//   2. Store: each run is copied out through /proc/self/mem
//      (platform/own_memory.h), then, with batch_stores, its 16-page units
//      go through StoreBatch (all-or-nothing); a unit that fails is split
//      and stored page by page (swpout_fallback); the rest through Store.
//      Each store first passes PoolAccepts(). The copy never faults: a
//      page the application dropped after step 0 has no page to read, and
//      a plain read of it would raise a missing fault that waits for the
//      handler, which is this thread or waits for mu. Such a page is not
//      stored: it stays resident in the map, and its next touch maps zeros.
//   3. Stored runs: MADV_DONTNEED (which drops the WP bit with the PTE; the
//      next touch is a missing fault), then UFFDIO_WAKE for any writer
//      blocked in step 1: it retries and faults the page back in. Refused
//      runs: un-protect, which wakes their writers.
// Out of memory (std::bad_alloc) in steps 1-2 ends them as a refusal
// would, and step 3 runs as ever: no page stays protected.
// Without /proc (own_memory empty) the pages are read in place. Under TSan
// they are then copied out first with reads ignored: a writer's store
// racing our read is ordered by the write-protection, which TSan cannot
// see, and the parallel codec's lanes would read them too.
#include <unistd.h>

#include <algorithm>
#include <cassert>
#include <cstring>
#include <functional>
#include <new>
#include <vector>

#include "region_impl.h"

#if defined(__SANITIZE_THREAD__)
extern "C" void AnnotateIgnoreReadsBegin(const char* file, int line);
extern "C" void AnnotateIgnoreReadsEnd(const char* file, int line);
#endif

namespace ztier {

using internal::PageMap;
using internal::PageState;

namespace {

// Calls fn(k, n) for each run v[k..k+n) of consecutive page indices whose
// `same(k)` value is equal throughout.
template <typename Same, typename Fn>
void ForEachRun(std::span<const std::uint32_t> v, Same same, Fn fn) {
  for (std::size_t k = 0; k < v.size();) {
    std::size_t e = k + 1;
    while (e < v.size() && v[e] == v[e - 1] + 1 && same(e) == same(k)) ++e;
    fn(k, e - k);
    k = e;
  }
}

// ForEachRun's `same` for runs split only where the pages are not
// consecutive.
constexpr int NoSplit(std::size_t) { return 0; }

constexpr std::uint64_t kPagemapPresent = std::uint64_t{1} << 63;
constexpr std::uint64_t kPagemapSwapped = std::uint64_t{1} << 62;

}  // namespace

bool Region::Impl::Evict(std::span<const std::uint32_t> victims) {
  // A page twice in one eviction would be stored, then emptied by a failed
  // StoreBatch of a unit that holds it again, and zapped: lost.
  assert(std::adjacent_find(victims.begin(), victims.end(),
                            std::greater_equal<>()) == victims.end());
  std::size_t i = 0;
  while (i < victims.size()) {
    std::size_t j = std::min(i + kEvictChunk, victims.size());
    // Cut between runs where possible, so runs keep their 16-page units.
    if (j < victims.size() && victims[j] == victims[j - 1] + 1) {
      std::size_t r = j - 1;
      while (r > i && victims[r] == victims[r - 1] + 1) --r;
      if (r > i) j = r;
    }
    bool done = false;
    try {
      done = EvictChunk(victims.subspan(i, j - i));
    } catch (const std::bad_alloc&) {
      // A chunk's vectors, made before anything of it changed (its steps
      // 1-2 catch their own, and step 3 does not throw): the rest stays
      // resident, as if the pool had refused it.
      LogOutOfMemory("eviction");
    }
    if (!done) return false;
    i = j;
  }
  return true;
}

bool Region::Impl::EvictChunk(std::span<const std::uint32_t> chunk) {
  if (!PoolAccepts()) return false;
  std::vector<std::uint32_t> v;
  v.reserve(chunk.size());
  KeepPresent(chunk, &v);  // 0. Presence.
  std::vector<std::uint8_t> guarded(v.size(), 1);
  std::vector<std::uint8_t> stored(v.size(), 0);
  bool refused = false;
  try {
    // 1. Write-protect. A run that could not be protected is not stored: a
    // write after our read would be lost.
    ForEachRun(v, NoSplit, [&](std::size_t k, std::size_t n) {
      Status st = uffd->WriteProtect(Addr(v[k]), n * kPageSize, /*wp=*/true);
      if (st.ok()) return;
      LogError(st);
      std::fill_n(&guarded[k], n, 0);
    });
    refused = !StoreGuarded(v, guarded, stored);  // 2. Store.
  } catch (const std::bad_alloc&) {
    // Step 3 must run whatever happened: a page left protected and counted
    // stored while still mapped would block its writers for good (each WP
    // fault finds it "evicted" and wakes them to fault again). The pages
    // not stored yet stay resident, as if the pool had refused them.
    LogOutOfMemory("eviction");
    refused = true;
  }
  // 3. Zap and wake, or un-protect (which wakes). Counted before the
  // wake: a woken writer may look at Stats() at once.
  ForEachRun(
      v, [&](std::size_t k) { return stored[k]; },
      [&](std::size_t k, std::size_t n) {
        FinishRun(v.data() + k, n, stored[k] != 0);
      });
  return !refused;
}

void Region::Impl::KeepPresent(std::span<const std::uint32_t> chunk,
                               std::vector<std::uint32_t>* kept) {
  ForEachRun(chunk, NoSplit, [&](std::size_t k, std::size_t n) {
    std::uint64_t entries[kEvictChunk];
    const off_t at = static_cast<off_t>((Addr(chunk[k]) / kPageSize) * 8);
    const std::size_t bytes = n * sizeof(std::uint64_t);
    const bool known =
        pagemap_fd >= 0 &&
        ::pread(pagemap_fd, entries, bytes, at) == static_cast<ssize_t>(bytes);
    for (std::size_t q = 0; q < n; ++q) {
      const std::uint32_t p = chunk[k + q];
      if (!known || (entries[q] & (kPagemapPresent | kPagemapSwapped))) {
        kept->push_back(p);
        continue;
      }
      pages.set_state(p, PageState::kUntouched);
      pages.clear(p, PageMap::kRef | PageMap::kReadAhead | PageMap::kRefused);
      Drop(c.resident);
    }
  });
}

const std::byte* Region::Impl::CopyOut(std::uint32_t first, std::size_t n,
                                      std::uint8_t* readable) {
  std::byte* out = evict_copy.get();
  if (own_memory.empty()) {
    std::fill_n(readable, n, 1);
    const std::byte* src = base + std::size_t{first} * kPageSize;
#if defined(__SANITIZE_THREAD__)
    AnnotateIgnoreReadsBegin(__FILE__, __LINE__);
    std::memcpy(out, src, n * kPageSize);
    AnnotateIgnoreReadsEnd(__FILE__, __LINE__);
    return out;
#else
    return src;
#endif
  }
  for (std::size_t q = 0; q < n;) {
    const std::size_t got =
        own_memory.ReadPages(Addr(first + q), n - q, out + q * kPageSize);
    std::fill_n(readable + q, got, 1);
    q += got;
    if (q < n) readable[q++] = 0;  // dropped: no page to read
  }
  return out;
}

bool Region::Impl::StoreGuarded(std::span<const std::uint32_t> v,
                                std::span<const std::uint8_t> guarded,
                                std::span<std::uint8_t> stored) {
  // A stored page is entered as such at once (still mapped and
  // write-protected), so that a shrink later in this chunk can write it
  // back to make room.
  // The shrinker's list comes last: its push may throw (EvictChunk), and
  // every page the store took must be marked stored by then.
  auto entered = [&](std::size_t k, std::size_t n) {
    for (std::size_t q = k; q < k + n; ++q) {
      stored[q] = 1;
      pages.set_state(v[q], PageState::kStored);
      pages.clear(v[q],
                  PageMap::kRef | PageMap::kReadAhead | PageMap::kRefused);
      Bump(c.stored);
    }
    for (std::size_t q = k; q < k + n; ++q) NoteStored(v[q]);
  };
  bool refused = false;
  // Stores the n pages of v[k..k+n), whose bytes are at src.
  const auto store_run = [&](std::size_t k, std::size_t n,
                             const std::byte* src) {
    const auto store_one = [&](std::size_t q) {
      Status st =
          store->Store(v[k] + q, ConstPage(src + q * kPageSize, kPageSize));
      if (st.ok()) {
        entered(k + q, 1);
      } else {
        pages.set(v[k + q], PageMap::kRefused);  // tried, and refused
      }
    };
    for (std::size_t off = 0; off < n && !refused;) {
      if (!PoolAccepts()) {
        refused = true;
        break;
      }
      if (!options.batch_stores || n - off < kUnitPages) {
        store_one(off++);
        continue;
      }
      Status st = store->StoreBatch(
          v[k] + off, std::span<const std::byte>(src + off * kPageSize,
                                                 kUnitPages * kPageSize));
      if (st.ok()) {
        entered(k + off, kUnitPages);
        off += kUnitPages;
        continue;
      }
      // The unit failed as a whole (its slots are empty again): split it,
      // as the kernel falls back to base pages for a large folio.
      Bump(c.swpout_fallback);
      const std::size_t end = off + kUnitPages;
      for (; off < end && !refused; ++off) {
        if (!PoolAccepts()) {
          refused = true;
          break;
        }
        store_one(off);
      }
    }
  };
  std::uint8_t readable[kEvictChunk];
  ForEachRun(v, NoSplit, [&](std::size_t k, std::size_t n) {
    if (!guarded[k] || refused) return;
    const std::byte* src = CopyOut(v[k], n, readable);
    // Each stretch of pages that could be read, as one run.
    for (std::size_t a = 0; a < n && !refused;) {
      std::size_t b = a;
      while (b < n && readable[b]) ++b;
      if (b > a) store_run(k + a, b - a, src + a * kPageSize);
      a = b + 1;
    }
  });
  return !refused;
}

void Region::Impl::FinishRun(const std::uint32_t* run, std::size_t n,
                             bool stored) {
  const std::uintptr_t addr = Addr(run[0]);
  const std::size_t len = n * kPageSize;
  if (stored) {
    // Step 3 must not throw (see EvictChunk): errors whose message cannot
    // be made are still errors (NoThrow).
    const Status zap = NoThrow("madvise", [&] {
      return platform::Advise(reinterpret_cast<void*>(addr), len,
                              platform::Advice::kDiscard);
    });
    if (zap.ok()) {
      FinishPages(run, n, /*zapped=*/true);
      return;
    }
    // madvise stops at the first mapping it cannot advise (one the
    // application mlocked splits the region, say: EINVAL) after dropping
    // the pages before it, so the run is part zapped. Page by page, each
    // page learns which it is: zapping a dropped page again succeeds.
    LogError(zap);
    for (std::size_t q = 0; q < n; ++q) {
      const bool zapped = NoThrow("madvise", [&] {
                            return platform::Advise(
                                reinterpret_cast<void*>(Addr(run[q])),
                                kPageSize, platform::Advice::kDiscard);
                          }).ok();
      FinishPages(run + q, 1, zapped);
      if (!zapped) pages.set(run[q], PageMap::kRefused);  // locked, say
    }
    return;
  }
  FinishPages(run, n, /*zapped=*/false);
}

// Pages run[0..n) (consecutive, stored when `zapped` or not): a zapped page
// stays stored and its faulters wake; one not zapped is still mapped, so
// its stored copy (which would go stale) is dropped and it stays resident,
// unprotected, with a second chance.
void Region::Impl::FinishPages(const std::uint32_t* run, std::size_t n,
                               bool zapped) {
  const std::uintptr_t addr = Addr(run[0]);
  const std::size_t len = n * kPageSize;
  for (std::size_t q = 0; q < n; ++q) {
    pages.clear(run[q], PageMap::kReadAhead);
    if (zapped) continue;
    if (pages.is(run[q], PageState::kStored)) {
      ForgetStored(run[q]);
      pages.set_state(run[q], PageState::kResident);
    }
    // Not evicted: a second chance (and a third when it was tried and
    // refused, kRefused, set by the caller: so that the CLOCK tries pages
    // it has not tried before this one again).
    pages.set(run[q], PageMap::kRef);
  }
  if (zapped) {
    Drop(c.resident, n);
    Bump(c.zswpout, n);
  }
  if (zapped) {
    Status st = NoThrow("UFFDIO_WAKE", [&] { return uffd->Wake(addr, len); });
    if (!st.ok()) LogError(st);
  } else if (Status st = NoThrow("UFFDIO_WP", [&] {
               return uffd->WriteProtect(addr, len, /*wp=*/false);
             });
             !st.ok()) {
    ResolveFailed(addr, len, st);
  }
}

bool Region::Impl::PoolAccepts() {
  std::uint64_t cur = store->PoolBytes();
  if (cur >= pool_limit) {
    Bump(c.pool_limit_hit);
    reached_full = true;
  } else if (reached_full && cur <= pool_accept) {
    reached_full = false;
  }
  if (!reached_full) return true;
  if (options.backing != nullptr) {
    if (Shrink()) {
      reached_full = false;
      return true;
    }
    Bump(c.reject_reclaim_fail);
    return false;
  }
  // No backing store: only loads shrink the pool.
  if (CompactToAccept()) {
    reached_full = false;
    return true;
  }
  return false;
}

bool Region::Impl::CompactToAccept() {
  // What loads freed may sit in partly used zspages, and the pool's size
  // does not fall until compaction gives it back: so the size alone cannot
  // tell whether a compaction would help. It runs when the pages it could
  // free (CompactablePages, a look at each class) would bring the pool to
  // the accept threshold, and not for less, which would cost a compaction
  // per store while the pool stays full.
  const std::uint64_t cur = store->PoolBytes();
  const std::uint64_t slack =
      std::uint64_t{store->CompactablePages()} * kPageSize;
  if (slack == 0 || cur - std::min(cur, slack) > pool_accept) return false;
  store->Compact();
  return store->PoolBytes() <= pool_accept;
}

}  // namespace ztier
