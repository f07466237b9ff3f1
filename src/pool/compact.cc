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
// zspage each class may keep (pool.cc), which compaction releases first.
// With a reserve the pages are freed for the pool (out of TotalBytes(), back
// in the reserve) but stay resident: Arena::Discard leaves them alone.
// Pages go back to the OS (madvise) only after the class lock is dropped.
//
// There is no reverse map (object -> handle) in steady state: it would cost
// 8 bytes per object. Compaction builds one for the non-full zspages only,
// by scanning the pool's handle table once without the class lock
// (temporary memory, freed on return), and only when an object will
// actually move. Since the scan runs unlocked and the lock is dropped between
// holds, the map may be stale: before each move the object's entry is read
// again under the lock, and the move is made only if it still names that
// zspage and index. A stale entry ends the hold; the map is built again (at
// most kMaxRebuilds times a class, then the class is left as it is: with
// other threads allocating and freeing, compaction is best effort). The
// map is the one allocation (with the list of its zspages, sized under
// the lock): a class whose map cannot be had (out of memory, when
// compaction is wanted most) is left as it is, nothing moved. Moves under
// the lock only update the map's entries, never add one.
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

// slot index -> handle-table index, per zspage id.
using OwnerMap = std::unordered_map<std::uint32_t, std::vector<std::uint64_t>>;

}  // namespace

// What one hold of the class lock leaves to do.
enum class Pool::Impl::CompactNext {
  kMore,     // hold the lock again
  kRebuild,  // the map is missing or stale: build it, then hold again
  kDiscard,  // discard the held tail, then hold again
  kDone,
};

// One class's compaction: its reverse map, and the move of one object that
// keeps the map current.
struct Pool::Impl::Compaction {
  // The pages of zspage id to discard, held exclusively (WriterLock).
  struct Tail {
    std::uint32_t id = ip::kNoId;
    ZspageDesc* z = nullptr;
    std::size_t first = 0;
    std::size_t count = 0;
  };

  Impl& m;
  OwnerMap owners;
  bool have_owners = false;
  int rebuilds = 0;
  // Holds left to each phase; with no other thread at work each round of
  // phase 1 takes at most objs / kMovesPerHold + 1 holds, and phase 2 as
  // many, so the budget only stops a class that others keep changing.
  std::size_t holds_left = 0;
  Tail tail;

  // Builds the map for the class's non-full zspages, their ids taken under
  // the lock, the table scanned without it. false once rebuilt too often.
  bool Rebuild(SizeClass& sc) ZT_EXCLUDES(sc.mu) {
    if (have_owners && ++rebuilds > kMaxRebuilds) return false;
    have_owners = true;
    const std::uint32_t objs = sc.geo.objs;
    owners.clear();
    std::vector<std::uint32_t> ids;
    try {
      {
        internal::MutexLock lock(sc.mu);
        ids.reserve(m.NonFullZspages(sc));
        for (int g = 1; g < ip::kGroupFull; ++g) {
          for (std::uint32_t id = sc.group_head[g]; id != ip::kNoId;
               id = m.descs.Get(id)->next) {
            ids.push_back(id);
          }
        }
      }
      m.SweepDeferred(sc);  // as every holder does after letting go
      for (std::uint32_t id : ids) owners[id].assign(objs, ip::kNoIndex);
    } catch (const std::bad_alloc&) {
      owners = OwnerMap();
      m.SweepDeferred(sc);
      return false;  // left as it is
    }
    // The table is the pool's, and other classes change their entries
    // meanwhile (this one too, now): what is found is checked before use
    // (Owner).
    const std::uint64_t n = m.handles.size();
    for (std::uint64_t i = 0; i < n; ++i) {
      const std::uint64_t e =
          m.handles.Entry(i).load(std::memory_order_relaxed);
      if (e & ip::kEntryFree) continue;
      auto it = owners.find(ip::EntryZspage(e));
      if (it != owners.end() && ip::EntryIdx(e) < objs) {
        it->second[ip::EntryIdx(e)] = i;
      }
    }
    return true;
  }

  // The handle-table index of object a of zspage sid, a zspage of this
  // class, or kNoIndex when the map does not know it. Checked against the
  // entry: under the lock, a live entry naming a zspage of this class is
  // this class's and stays as it is.
  std::uint64_t Owner(SizeClass& sc, std::uint32_t sid, std::uint32_t a) const
      ZT_REQUIRES(sc.mu) {
    (void)sc;  // (it names the lock the check needs)
    const auto it = owners.find(sid);
    if (it == owners.end()) return ip::kNoIndex;
    const std::uint64_t hidx = it->second[a];
    if (hidx == ip::kNoIndex) return ip::kNoIndex;
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
    m.Touch(sc, d, b);
    ip::WriterLock(s);
    std::memcpy(d->base + std::size_t{b} * stride,
                s->base + std::size_t{a} * stride, size);
    slot.store(ip::MakeEntry(did, b, size), std::memory_order_release);
    ip::WriterUnlock(s);
    s->Clear(sc.geo.objs, a);
    --s->inuse;
    d->Set(sc.geo.objs, b);
    ++d->inuse;
    if (auto it = owners.find(sid); it != owners.end()) {
      it->second[a] = ip::kNoIndex;
    }
    // A destination the map does not know (non-full only since the map
    // was built) stays unknown: its objects read as stale if it is ever a
    // source, and the map is built again then.
    if (auto it = owners.find(did); it != owners.end()) it->second[b] = hidx;
  }
};

std::size_t Pool::Impl::NonFullZspages(SizeClass& sc) {
  std::size_t nonfull = 0;
  for (int g = 1; g < ip::kGroupFull; ++g) nonfull += sc.group_count[g];
  return nonfull;
}

std::size_t Pool::Impl::CompactClass(SizeClass& sc) {
  Compaction c{*this};
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
  return freed;
}

Pool::Impl::CompactNext Pool::Impl::MergeNonFull(SizeClass& sc,
                                                 Compaction& c,
                                                 std::size_t* freed,
                                                 ip::RunReleases* later) {
  const std::uint32_t objs = sc.geo.objs;
  if (NonFullZspages(sc) < 2) return CompactNext::kDone;
  if (!c.have_owners) return CompactNext::kRebuild;
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
    c.owners.erase(sid);
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
    const std::uint64_t hidx = c.have_owners ? c.Owner(sc, zid, hi) : ip::kNoIndex;
    if (hidx == ip::kNoIndex) return CompactNext::kRebuild;
    c.Move(sc, hidx, zid, z, hi, zid, z, lo);
  }
  const std::size_t end = std::size_t{z->inuse} * sc.geo.size;
  const std::size_t needed = (end + ip::kPageSize - 1) / ip::kPageSize;
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
  for (auto& sc : impl_->classes) {
    if (sc != nullptr) compacted += impl_->CompactClass(*sc);
  }
  impl_->pages_compacted.fetch_add(freed + compacted,
                                   std::memory_order_relaxed);
  return freed + compacted;
}

}  // namespace ztier
