// shrinker.cc: the Region's shrinker (zswap's, in mm/zswap.c): when
// the pool is full and a backing store is set, it writes back the oldest
// stored pages until the pool is under the accept threshold.
//
// Order: a FIFO of page indices in store order. A page is in it at most
// once (the in_lru bit); a page loaded and stored again keeps its old place
// but gets its lru_ref bit back. Popping from the front: an entry whose
// page is no longer stored, or is already written back, is stale and
// dropped; a page with lru_ref set loses it and goes to the back (second
// chance, as zswap's `referenced`); SAME pages hold no pool memory and are
// dropped; any other is a victim. kShrinkBatch victims go to one
// PageStore::Writeback pass (one scan per page, batched IO, 32 IOs of up to
// 32 pages in flight), then the pool is compacted: writeback frees objects,
// but their zspages stay until compaction empties them.
//
// The shrinker runs under the region mutex, inside the eviction that found
// the pool full (see the DESIGN NOTE in region.cc), so no load or store of
// the region races its pass: a victim becomes written back or, if its IO
// failed, goes back in the FIFO.
#include <vector>

#include "region_impl.h"

namespace ztier {

using internal::PageMap;
using internal::PageState;

void Region::Impl::NoteStored(std::size_t p) {
  if (options.backing == nullptr) return;
  pages.set(p, PageMap::kLruRef);
  if (pages.test(p, PageMap::kInLru)) return;
  lru.push_back(static_cast<std::uint32_t>(p));  // may throw: flag after
  pages.set(p, PageMap::kInLru);
}

bool Region::Impl::Shrink() {
  // Loads may have emptied the pool's objects but not its zspages: then
  // compaction is all it takes, with nothing written back (nor anything
  // left to write back once every page was loaded).
  if (CompactToAccept()) return true;
  // What may throw (std::bad_alloc) comes before a page leaves the list,
  // or puts it back: a page off the list and not written back would stay
  // in the pool for good.
  std::vector<std::uint32_t> victims;
  victims.reserve(kShrinkBatch);
  WritebackRequest req;
  req.in_flight = 32;
  req.max_io_pages = 32;
  req.scans.reserve(kShrinkBatch);
  while (store->PoolBytes() > pool_accept) {
    victims.clear();
    req.scans.clear();
    while (victims.size() < kShrinkBatch && !lru.empty()) {
      const std::uint32_t p = lru.front();
      if (!pages.is(p, PageState::kStored) ||
          pages.test(p, PageMap::kWrittenBack)) {
        lru.pop_front();
        pages.clear(p, PageMap::kInLru | PageMap::kLruRef);
        continue;
      }
      if (pages.test(p, PageMap::kLruRef)) {
        pages.clear(p, PageMap::kLruRef);
        lru.push_back(p);  // may throw: then it is still at the front
        lru.pop_front();
        continue;
      }
      lru.pop_front();
      pages.clear(p, PageMap::kInLru);
      if (store->Inspect(p).same) continue;
      victims.push_back(p);  // reserved
    }
    if (victims.empty()) break;
    for (const std::uint32_t p : victims) {
      // 64-bit: the last page of a 16 TiB region is 2^32 - 1.
      req.scans.push_back({0, p, std::uint64_t{p} + 1});  // reserved
    }
    Result<WritebackResult> r = WritebackResult{};
    try {
      r = store->Writeback(req);
    } catch (...) {
      for (const std::uint32_t p : victims) NoteStored(p);  // back on the list
      throw;
    }
    if (!r.has_value()) {
      LogError(r.error());
      for (const std::uint32_t p : victims) NoteStored(p);
      break;
    }
    std::uint64_t written = 0;
    for (const std::uint32_t p : victims) {
      if (store->Inspect(p).wb) {
        pages.set(p, PageMap::kWrittenBack);
        ++written;
      } else {
        NoteStored(p);  // its IO failed: try it again later
      }
    }
    Drop(c.stored, written);
    Bump(c.written_back, written);
    Bump(c.zswpwb, written);
    store->Compact();
    if (written == 0) break;  // the backing store is full or failing
  }
  return store->PoolBytes() <= pool_accept;
}

}  // namespace ztier
