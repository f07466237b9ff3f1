// File: pool/compact.cc
//
// Compaction, one class at a time under its lock (Malloc and Free of that
// class wait; Read and Write of other zspages go on):
//  1. As zsmalloc's __zs_compact: take the sparsest non-full zspage as the
//     source and the fullest other non-full one as the destination, move
//     objects until the source is empty (then free it) or the destination
//     is full; repeat until at most one non-full zspage is left. Each round
//     removes one non-full zspage, so this ends.
//  2. Slide the objects of that last partial zspage down to its lowest free
//     indices and discard the pages past its last object.
// Every page freed counts in pages_compacted, as do the pages of the spare
// zspage each class may keep (pool.cc), which compaction releases first.
// With a reserve the pages are freed for the pool (out of TotalBytes(), back
// in the reserve) but stay resident: Arena::Discard leaves them alone.
//
// There is no reverse map (object -> handle) in steady state: it would cost
// 8 bytes per object. Compaction builds one for the non-full zspages only,
// by scanning the class's handle table once (temporary memory, freed on
// return), and only when an object will actually move.
//
// CompactClass runs phase 1 (MergeNonFull) then phase 2 (PackLast).
//
// Moving one object: hold the source zspage exclusively (WriterLock waits
// for pinned readers and writers), copy, publish the new location (release),
// unlock. The destination slot is free, so nobody reads it meanwhile.
#include <cstring>
#include <unordered_map>
#include <vector>

#include "pool_internal.h"

namespace ztier {

namespace ip = internal_pool;
using internal_pool::SizeClass;
using internal_pool::ZspageDesc;

namespace {

// slot index -> handle-table index, per non-full zspage id.
using OwnerMap = std::unordered_map<std::uint32_t, std::vector<std::uint64_t>>;

}  // namespace

// The reverse map of one class's compaction, built on first need, and the
// move of one object that keeps it current.
struct Pool::Impl::Compaction {
  Impl& m;
  OwnerMap owners;
  bool have_owners = false;

  void EnsureOwners(SizeClass& sc) ZT_REQUIRES(sc.mu) {
    if (have_owners) return;
    have_owners = true;
    for (int g = 1; g < ip::kGroupFull; ++g) {
      for (std::uint32_t id = sc.group_head[g]; id != ip::kNoId;
           id = m.descs.Get(id)->next) {
        owners[id].assign(sc.geo.objs, ip::kNoIndex);
      }
    }
    // The table is the pool's: entries of other classes are skipped by
    // their zspage ids (no live entry of another class names a zspage of
    // this one, and this class's entries do not change while we hold its
    // lock).
    const std::uint64_t n = m.handles.size();
    for (std::uint64_t i = 0; i < n; ++i) {
      const std::uint64_t e =
          m.handles.Entry(i).load(std::memory_order_relaxed);
      if (e & ip::kEntryFree) continue;
      auto it = owners.find(ip::EntryZspage(e));
      if (it != owners.end()) it->second[ip::EntryIdx(e)] = i;
    }
  }

  // Moves object a of zspage sid (s) to the free index b of did (d).
  void Move(SizeClass& sc, std::uint32_t sid, ZspageDesc* s, std::uint32_t a,
            std::uint32_t did, ZspageDesc* d, std::uint32_t b)
      ZT_REQUIRES(sc.mu) {
    const std::size_t stride = sc.geo.size;
    std::vector<std::uint64_t>& src_owners = owners[sid];
    const std::uint64_t hidx = src_owners[a];
    assert(hidx != ip::kNoIndex);
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
    src_owners[a] = ip::kNoIndex;
    owners[did][b] = hidx;
  }
};

std::size_t Pool::Impl::CompactClass(SizeClass& sc) {
  std::size_t nonfull = 0;
  for (int g = 1; g < ip::kGroupFull; ++g) nonfull += sc.group_count[g];
  if (nonfull == 0) return 0;
  Compaction c{*this, {}};
  const std::size_t freed = MergeNonFull(sc, c, nonfull);
  return freed + PackLast(sc, c);
}

std::size_t Pool::Impl::MergeNonFull(SizeClass& sc, Compaction& c,
                                     std::size_t nonfull) {
  const std::uint32_t objs = sc.geo.objs;
  std::size_t freed = 0;
  while (nonfull >= 2) {
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
    c.EnsureOwners(sc);
    ZspageDesc* s = descs.Get(sid);
    ZspageDesc* d = descs.Get(did);
    GroupRemove(sc, s);
    GroupRemove(sc, d);
    while (s->inuse > 0 && d->inuse < objs) {
      c.Move(sc, sid, s, s->HighestUsed(objs), did, d, d->LowestFree(objs));
    }
    nonfull -= (s->inuse == 0) + (d->inuse == objs);
    if (s->inuse == 0) {
      freed += FreeZspage(sc, sid, s);
      c.owners.erase(sid);
    } else {
      GroupInsert(sc, sid, s);
    }
    GroupInsert(sc, did, d);
  }
  return freed;
}

std::size_t Pool::Impl::PackLast(SizeClass& sc, Compaction& c) {
  const std::uint32_t objs = sc.geo.objs;
  std::uint32_t zid = ip::kNoId;
  for (int g = 1; g < ip::kGroupFull && zid == ip::kNoId; ++g) {
    zid = sc.group_head[g];
  }
  if (zid == ip::kNoId) return 0;
  ZspageDesc* z = descs.Get(zid);
  for (;;) {
    const std::uint32_t hi = z->HighestUsed(objs);
    const std::uint32_t lo = z->LowestFree(objs);
    if (lo > hi) break;
    c.EnsureOwners(sc);
    c.Move(sc, zid, z, hi, zid, z, lo);
  }
  const std::size_t end = std::size_t{z->inuse} * sc.geo.size;
  const std::size_t needed = (end + ip::kPageSize - 1) / ip::kPageSize;
  if (needed >= z->touched_pages) return 0;
  const std::size_t drop = z->touched_pages - needed;
  arena.Discard(z->base, needed, drop);
  z->touched_pages = static_cast<std::uint8_t>(needed);
  sc.touched_pages -= drop;
  touched_pages.fetch_sub(drop, std::memory_order_relaxed);
  return drop;
}

std::size_t Pool::Impl::ReleaseSpare(SizeClass& sc) {
  if (sc.spare == ip::kNoId) return 0;
  const std::uint32_t id = sc.spare;
  sc.spare = ip::kNoId;
  return FreeZspage(sc, id, descs.Get(id));
}

std::size_t Pool::ReleaseSpares() {
  std::size_t freed = 0;
  for (auto& sc : impl_->classes) {
    if (sc == nullptr) continue;
    {
      internal::MutexLock lock(sc->mu);
      impl_->DrainDeferredFrees(*sc);
      freed += impl_->ReleaseSpare(*sc);
    }
    impl_->SweepDeferred(*sc);
  }
  return freed;
}

std::size_t Pool::Compact() {
  std::size_t freed = 0;
  for (auto& sc : impl_->classes) {
    if (sc == nullptr) continue;
    {
      internal::MutexLock lock(sc->mu);
      impl_->DrainDeferredFrees(*sc);
      freed += impl_->ReleaseSpare(*sc);
      freed += impl_->CompactClass(*sc);
    }
    impl_->SweepDeferred(*sc);
  }
  impl_->pages_compacted.fetch_add(freed, std::memory_order_relaxed);
  return freed;
}

}  // namespace ztier
