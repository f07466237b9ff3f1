// File: pool/compact.cc
//
// Compaction, one class at a time, in short holds of its lock: each hold
// moves at most kMovesPerHold objects, then drops the lock (Malloc, Free and
// Read of the class go on between holds; Read and Write of zspages other
// than the one being moved from go on during them too). Two phases:
//  1. As zsmalloc's __zs_compact: take the sparsest non-full zspage as the
//     source and the fullest other non-full one as the destination, move
//     objects until the source is empty (then free it) or the destination
//     is full; repeat until at most one non-full zspage is left. Each hold
//     picks the pair again; a hold that ends mid-round puts the source
//     back ahead of the destination, so that without other threads the
//     next hold picks the same pair and the moves are zsmalloc's.
//  2. Slide the objects of that last partial zspage down to its lowest free
//     indices and discard the pages past its last object.
// Every page freed counts in pages_compacted, as do the pages of the spare
// zspage each class may keep (pool.cc), which compaction releases first;
// less the pages that moves into a destination's untouched tail touched
// (zsmalloc's zspages are whole, so its moves touch none): the count is
// what the pool's held pages fell by.
// With a reserve the pages are freed for the pool (out of TotalBytes(); a
// freed zspage's run back in the reserve, a discarded tail's pages kept in
// their zspage's run for its next objects) but stay resident:
// Arena::Discard leaves them alone.
// Pages go back to the OS (madvise) only after the class lock is dropped.
//
// There is no reverse map (object -> handle) in steady state: it would cost
// 8 bytes per object. Compaction builds one for the non-full zspages only
// (OwnerMap), by scanning the pool's handle table without any class lock
// (temporary memory, freed as each batch of classes is done). One scan
// serves as many classes as fit kMapEntries objects together, so a pool
// of millions of handles is scanned a few times per Compact(), not once per
// class; a bitmap of the wanted zspage ids skips the other entries without
// a hash lookup. Since the scan runs unlocked and the lock is dropped
// between holds, the map may be stale: before each move the object's entry
// is read again under the lock, and the move is made only if it still
// names that zspage and index. A stale entry ends the hold; the class's map
// is built again, for that class alone (at most kMaxRebuilds times a class,
// then the class is left as it is: with other threads allocating and
// freeing, compaction is best effort). The map is the one allocation (with
// the list of its zspages, sized under the lock): a class whose map cannot
// be had (out of memory, when compaction is wanted most) is left as it is,
// nothing moved. Moves under the lock only update the map's entries, never
// add one.
//
// Moving one object: hold the source zspage exclusively (WriterLock waits
// for pinned readers and writers), copy, publish the new location (release),
// unlock. The destination slot is free, so nobody reads it meanwhile.
//
// Discarding the tail of the last zspage (phase 2) happens without the class
// lock, with that zspage held exclusively: a Malloc may place an object in
// the tail meanwhile, but its owner's Write pins the zspage and so waits
// until the madvise is done. SizeClass::discarding keeps a Free that empties
// the zspage meanwhile from freeing it (its run must not change hands
// before the madvise); the compactor frees it after.
//
// One Compact() at a time per pool (compact_mu): the zspage held through the
// discard must have one writer only.
#include <algorithm>
#include <cstring>
#include <new>
#include <unordered_map>
#include <vector>

#include "pool_internal.h"

namespace ztier {

namespace ip = internal_pool;
using internal_pool::SizeClass;
using internal_pool::ZspageDesc;

namespace {

// Objects moved per hold of the class lock.
constexpr std::uint32_t kMovesPerHold = 32;
// Times one class's reverse map may be rebuilt after it went stale.
constexpr int kMaxRebuilds = 4;
// Objects of non-full zspages one scan of the handle table maps at most,
// unless one class alone has more (8 bytes each, 8 MiB).
constexpr std::uint64_t kMapEntries = std::uint64_t{1} << 20;

}  // namespace

// zspage id -> the handle-table index of each of its objects (kNoIndex: not
// known), for the zspages added. Plain data of one thread (the compactor).
class Pool::Impl::OwnerMap {
 public:
  bool empty() const { return owners_.empty(); }
  void Clear() {
    owners_.clear();
    wanted_.clear();
  }
  // Adds zspage `id` of `objs` objects, none known. May throw
  // std::bad_alloc.
  void Add(std::uint32_t id, std::uint32_t objs) {
    if (id / 64 >= wanted_.size()) wanted_.resize(id / 64 + 1);
    owners_[id].assign(objs, ip::kNoIndex);
    wanted_[id / 64] |= std::uint64_t{1} << (id % 64);
  }
  // Fills the entries of the zspages added from the table, read without any
  // lock: an entry may be stale as soon as it is read (Compaction::Owner).
  void Scan(const ip::HandleTable& entries) {
    const std::uint64_t n = entries.size();
    const std::size_t words = wanted_.size();
    for (std::uint64_t i = 0; i < n; ++i) {
      const std::uint64_t e = entries.Entry(i).load(std::memory_order_relaxed);
      if (e & ip::kEntryFree) continue;
      const std::uint32_t id = ip::EntryZspage(e);
      if (id / 64 >= words || ((wanted_[id / 64] >> (id % 64)) & 1) == 0) {
        continue;
      }
      std::vector<std::uint64_t>& objs = owners_.find(id)->second;
      if (ip::EntryIdx(e) < objs.size()) objs[ip::EntryIdx(e)] = i;
    }
  }
  // The entry of object a of zspage id, or nullptr when the map has none
  // (a zspage added with fewer objects: its id since went to another
  // class).
  std::uint64_t* Find(std::uint32_t id, std::uint32_t a) {
    const auto it = owners_.find(id);
    if (it == owners_.end() || a >= it->second.size()) return nullptr;
    return &it->second[a];
  }
  // Drops a freed zspage (its id may come back in another class).
  void Forget(std::uint32_t id) { owners_.erase(id); }

 private:
  std::unordered_map<std::uint32_t, std::vector<std::uint64_t>> owners_;
  std::vector<std::uint64_t> wanted_;  // a bit per zspage id added
};

// What one hold of the class lock leaves to do.
enum class Pool::Impl::CompactNext {
  kMore,     // hold the lock again
  kRebuild,  // the map is missing or stale: build it, then hold again
  kDiscard,  // discard the held tail, then hold again
  kDone,
};

// One class's compaction: its reverse map (its batch's, until that went
// stale; then its own), and the move of one object that keeps the map
// current.
struct Pool::Impl::Compaction {
  // The pages of zspage id to discard, held exclusively (WriterLock).
  struct Tail {
    std::uint32_t id = ip::kNoId;
    ZspageDesc* z = nullptr;
    std::size_t first = 0;
    std::size_t count = 0;
  };

  Impl& m;
  OwnerMap* map = nullptr;  // batch's or &own; nullptr: none yet
  OwnerMap own;
  int rebuilds = 0;
  // Holds left to each phase; with no other thread at work each round of
  // phase 1 takes at most objs / kMovesPerHold + 1 holds, and phase 2 as
  // many, so the budget only stops a class that others keep changing.
  std::size_t holds_left = 0;
  Tail tail;
  // Pages the moves touched in destinations' untouched tails (a page only
  // touched holds no memory): they come off the pages freed, so that
  // Compact() returns what the pool's held pages fell by.
  std::size_t touched = 0;

  // Builds the class's own map of its non-full zspages, their ids taken
  // under the lock, the table scanned without it. false once rebuilt too
  // often, or when memory runs out.
  bool Rebuild(SizeClass& sc) ZT_EXCLUDES(sc.mu) {
    if (map != nullptr && ++rebuilds > kMaxRebuilds) return false;
    map = &own;
    own.Clear();
    try {
      std::vector<std::uint32_t> ids;
      m.NonFullIds(sc, &ids);
      for (std::uint32_t id : ids) own.Add(id, sc.geo.objs);
    } catch (const std::bad_alloc&) {
      own = OwnerMap();
      return false;  // left as it is
    }
    own.Scan(m.handles);
    return true;
  }

  // The handle-table index of object a of zspage sid, a zspage of this
  // class, or kNoIndex when the map does not know it. Checked against the
  // entry: under the lock, a live entry naming a zspage of this class is
  // this class's and stays as it is.
  std::uint64_t Owner(SizeClass& sc, std::uint32_t sid, std::uint32_t a) const
      ZT_REQUIRES(sc.mu) {
    (void)sc;  // (it names the lock the check needs)
    const std::uint64_t* known = map == nullptr ? nullptr : map->Find(sid, a);
    if (known == nullptr || *known == ip::kNoIndex) return ip::kNoIndex;
    const std::uint64_t hidx = *known;
    const std::uint64_t e =
        m.handles.Entry(hidx).load(std::memory_order_relaxed);
    if ((e & ip::kEntryFree) != 0 || ip::EntryZspage(e) != sid ||
        ip::EntryIdx(e) != a) {
      return ip::kNoIndex;
    }
    return hidx;
  }

  // Moves object a of zspage sid (s), owned by handle-table index hidx, to
  // the free index b of did (d).
  void Move(SizeClass& sc, std::uint64_t hidx, std::uint32_t sid, ZspageDesc* s,
            std::uint32_t a, std::uint32_t did, ZspageDesc* d,
            std::uint32_t b) ZT_REQUIRES(sc.mu) {
    const std::size_t stride = sc.geo.size;
    std::atomic<std::uint64_t>& slot = m.handles.Entry(hidx);
    const std::uint64_t e = slot.load(std::memory_order_relaxed);
    const std::uint32_t size = ip::EntrySize(e);
    touched += m.Touch(sc, d, b);
    ip::WriterLock(s);
    std::memcpy(d->base + std::size_t{b} * stride,
                s->base + std::size_t{a} * stride, size);
    slot.store(ip::MakeEntry(did, b, size), std::memory_order_release);
    ip::WriterUnlock(s);
    s->Clear(sc.geo.objs, a);
    --s->inuse;
    d->Set(sc.geo.objs, b);
    ++d->inuse;
    if (std::uint64_t* known = map->Find(sid, a)) *known = ip::kNoIndex;
    // A destination the map does not know (non-full only since the map
    // was built) stays unknown: its objects read as stale if it is ever a
    // source, and the map is built again then.
    if (std::uint64_t* known = map->Find(did, b)) *known = hidx;
  }
};

std::size_t Pool::Impl::NonFullZspages(SizeClass& sc) {
  std::size_t nonfull = 0;
  for (int g = 1; g < ip::kGroupFull; ++g) nonfull += sc.group_count[g];
  return nonfull;
}

void Pool::Impl::NonFullIds(SizeClass& sc, std::vector<std::uint32_t>* ids) {
  // Every lock holder sweeps after it unlocks (pool.cc), on every way out.
  struct SweepOnExit {
    Impl& m;
    SizeClass& sc;
    ~SweepOnExit() { m.SweepDeferred(sc); }
  } sweep{*this, sc};
  internal::MutexLock lock(sc.mu);
  const std::size_t nonfull = NonFullZspages(sc);
  if (nonfull == 1) {
    // Nothing to move if its one partial zspage is packed already.
    std::uint32_t id = ip::kNoId;
    for (int g = 1; g < ip::kGroupFull && id == ip::kNoId; ++g) {
      id = sc.group_head[g];
    }
    const ZspageDesc* z = descs.Get(id);
    if (z->LowestFree(sc.geo.objs) > z->HighestUsed(sc.geo.objs)) return;
  }
  ids->reserve(ids->size() + nonfull);
  for (int g = 1; g < ip::kGroupFull; ++g) {
    for (std::uint32_t id = sc.group_head[g]; id != ip::kNoId;
         id = descs.Get(id)->next) {
      ids->push_back(id);
    }
  }
}

std::size_t Pool::Impl::MapClasses(std::size_t first, OwnerMap* map) {
  map->Clear();
  std::size_t next = first;
  std::uint64_t entries = 0;
  try {
    std::vector<std::uint32_t> ids;
    for (; next < classes.size(); ++next) {
      SizeClass* sc = classes[next].get();
      if (sc == nullptr) continue;
      ids.clear();
      NonFullIds(*sc, &ids);
      // Alone, a class may go over the budget: it needs its map anyway.
      const std::uint64_t more = ids.size() * std::uint64_t{sc->geo.objs};
      if (entries != 0 && entries + more > kMapEntries) break;
      entries += more;
      for (std::uint32_t id : ids) map->Add(id, sc->geo.objs);
    }
  } catch (const std::bad_alloc&) {
    *map = OwnerMap();  // each class tries its own, smaller map
    return std::max(next, first + 1);
  }
  if (!map->empty()) map->Scan(handles);
  return std::max(next, first + 1);
}

std::size_t Pool::Impl::CompactClass(SizeClass& sc, OwnerMap& batch) {
  Compaction c{*this};
  if (!batch.empty()) c.map = &batch;
  std::size_t nonfull = 0;
  {
    internal::MutexLock lock(sc.mu);
    nonfull = NonFullZspages(sc);
    c.holds_left = nonfull * (sc.geo.objs / kMovesPerHold + 2);
  }
  // Every lock holder sweeps after it unlocks (pool.cc): a Free deferred
  // during that hold would otherwise wait for the class's next user.
  SweepDeferred(sc);
  if (nonfull == 0) return 0;
  std::size_t freed = 0;
  // Phase 1, then (its budget set afresh) phase 2.
  for (int phase = 1; phase <= 2; ++phase) {
    for (;;) {
      ip::RunReleases later;
      CompactNext next;
      {
        internal::MutexLock lock(sc.mu);
        DrainDeferredFrees(sc, &later);
        if (c.holds_left == 0) {
          next = CompactNext::kDone;
        } else {
          --c.holds_left;
          next = phase == 1 ? MergeNonFull(sc, c, &freed, &later)
                            : PackLast(sc, c, &freed);
        }
      }
      DoReleases(later);
      SweepDeferred(sc);
      if (next == CompactNext::kDone) break;
      if (next == CompactNext::kRebuild && !c.Rebuild(sc)) break;
      if (next == CompactNext::kDiscard) FinishDiscard(sc, c);
    }
    c.holds_left = sc.geo.objs / kMovesPerHold + 2;
  }
  // Net of what the moves touched; a class left mid-round (its budget
  // spent, or others changing it) may have touched more than it freed.
  return freed > c.touched ? freed - c.touched : 0;
}

Pool::Impl::CompactNext Pool::Impl::MergeNonFull(SizeClass& sc,
                                                 Compaction& c,
                                                 std::size_t* freed,
                                                 ip::RunReleases* later) {
  const std::uint32_t objs = sc.geo.objs;
  if (NonFullZspages(sc) < 2) return CompactNext::kDone;
  if (c.map == nullptr) return CompactNext::kRebuild;
  std::uint32_t sid = ip::kNoId;
  for (int g = 1; g < ip::kGroupFull && sid == ip::kNoId; ++g) {
    sid = sc.group_head[g];
  }
  std::uint32_t did = ip::kNoId;
  for (int g = ip::kGroupFull - 1; g >= 1 && did == ip::kNoId; --g) {
    for (std::uint32_t id = sc.group_head[g]; id != ip::kNoId;
         id = descs.Get(id)->next) {
      if (id != sid) {
        did = id;
        break;
      }
    }
  }
  assert(sid != ip::kNoId && did != ip::kNoId);
  ZspageDesc* s = descs.Get(sid);
  ZspageDesc* d = descs.Get(did);
  GroupRemove(sc, s);
  GroupRemove(sc, d);
  bool stale = false;
  for (std::uint32_t moved = 0;
       moved < kMovesPerHold && s->inuse > 0 && d->inuse < objs; ++moved) {
    const std::uint32_t a = s->HighestUsed(objs);
    const std::uint64_t hidx = c.Owner(sc, sid, a);
    if (hidx == ip::kNoIndex) {
      stale = true;
      break;
    }
    c.Move(sc, hidx, sid, s, a, did, d, d->LowestFree(objs));
  }
  if (s->inuse == 0) {
    *freed += FreeZspage(sc, sid, s, later);
    c.map->Forget(sid);
    GroupInsert(sc, did, d);
  } else if (d->inuse == objs) {
    GroupInsert(sc, sid, s);
    GroupInsert(sc, did, d);
  } else {
    // Mid-round: the source first in its group, so that it is picked again.
    GroupInsert(sc, did, d);
    GroupInsert(sc, sid, s);
  }
  return stale ? CompactNext::kRebuild : CompactNext::kMore;
}

Pool::Impl::CompactNext Pool::Impl::PackLast(SizeClass& sc, Compaction& c,
                                             std::size_t* freed) {
  const std::uint32_t objs = sc.geo.objs;
  std::uint32_t zid = ip::kNoId;
  for (int g = 1; g < ip::kGroupFull && zid == ip::kNoId; ++g) {
    zid = sc.group_head[g];
  }
  if (zid == ip::kNoId) return CompactNext::kDone;
  ZspageDesc* z = descs.Get(zid);
  for (std::uint32_t moved = 0;; ++moved) {
    const std::uint32_t hi = z->HighestUsed(objs);
    const std::uint32_t lo = z->LowestFree(objs);
    if (lo > hi) break;
    if (moved == kMovesPerHold) return CompactNext::kMore;
    const std::uint64_t hidx = c.Owner(sc, zid, hi);
    if (hidx == ip::kNoIndex) return CompactNext::kRebuild;
    c.Move(sc, hidx, zid, z, hi, zid, z, lo);
  }
  const std::size_t needed = sc.geo.PagesFor(z->inuse);
  if (needed >= z->touched_pages) return CompactNext::kDone;
  const std::size_t drop = z->touched_pages - needed;
  z->touched_pages = static_cast<std::uint8_t>(needed);
  sc.touched_pages -= drop;
  touched_pages.fetch_sub(drop, std::memory_order_relaxed);
  *freed += drop;
  ip::WriterLock(z);
  sc.discarding = zid;
  c.tail = {zid, z, needed, drop};
  return CompactNext::kDiscard;
}

void Pool::Impl::FinishDiscard(SizeClass& sc, Compaction& c) {
  const Compaction::Tail t = c.tail;
  arena.Discard(t.z->base, t.first, t.count);
  ip::WriterUnlock(t.z);
  ip::RunReleases later;
  {
    internal::MutexLock lock(sc.mu);
    sc.discarding = ip::kNoId;
    // A Free emptied it meanwhile and left it to us (FreeLocked).
    if (t.z->inuse == 0) {
      GroupRemove(sc, t.z);
      ReleaseEmpty(sc, t.id, t.z, &later);
    }
  }
  DoReleases(later);
  SweepDeferred(sc);
}

std::size_t Pool::Impl::ReleaseSpare(SizeClass& sc, ip::RunReleases* later) {
  if (sc.spare == ip::kNoId) return 0;
  const std::uint32_t id = sc.spare;
  sc.spare = ip::kNoId;
  return FreeZspage(sc, id, descs.Get(id), later);
}

std::size_t Pool::ReleaseSpares() {
  std::size_t freed = 0;
  for (auto& sc : impl_->classes) {
    if (sc == nullptr) continue;
    // 16 deferred frees and the spare: RunReleases holds 17.
    ip::RunReleases later;
    {
      internal::MutexLock lock(sc->mu);
      impl_->DrainDeferredFrees(*sc, &later);
      freed += impl_->ReleaseSpare(*sc, &later);
    }
    impl_->DoReleases(later);
    impl_->SweepDeferred(*sc);
  }
  return freed;
}

std::size_t Pool::Compact() {
  internal::MutexLock serial(impl_->compact_mu);
  const std::size_t freed = ReleaseSpares();
  std::size_t compacted = 0;
  Impl::OwnerMap batch;
  for (std::size_t i = 0; i < impl_->classes.size();) {
    const std::size_t end = impl_->MapClasses(i, &batch);
    for (; i < end; ++i) {
      SizeClass* sc = impl_->classes[i].get();
      if (sc != nullptr) compacted += impl_->CompactClass(*sc, batch);
    }
  }
  impl_->pages_compacted.fetch_add(freed + compacted,
                                   std::memory_order_relaxed);
  return freed + compacted;
}

}  // namespace ztier
