// units.cc: the PageStore's multi-page objects (contract in
// include/ztier/page_store.h, unit_pages; the table's rules in
// unit_table.h): storing a run as a unit, reading a page of one, a page
// leaving one, and reclaiming a unit that lost most of its pages.
#include <algorithm>
#include <bit>
#include <cstring>
#include <memory>
#include <new>
#include <vector>

#include "page_store_impl.h"
#include "page_store_test_peer.h"

namespace ztier {
namespace {

constexpr std::size_t kUnitBytes = internal::kMaxUnitPages * kPageSize;

// Per-thread buffers of kUnitBytes: compression input and output, and a
// unit's object gathered from its pieces.
std::byte* UnitBuffer(int which) {
  thread_local std::unique_ptr<std::byte[]> buffers[3];
  std::unique_ptr<std::byte[]>& b = buffers[which];
  if (b == nullptr) b.reset(new std::byte[kUnitBytes]);
  return b.get();
}

// This thread's copy of the last unit it decompressed: its pages (the
// members, in order) and the generation they belong to. Generations are
// never reused (unit_table.h), so a matching one is always current.
struct UnitCache {
  std::uint64_t gen = 0;
  std::unique_ptr<std::byte[]> pages{new std::byte[kUnitBytes]};
};
UnitCache& LocalUnitCache() {
  thread_local UnitCache cache;
  return cache;
}

std::uint32_t Bit(std::uint64_t index, std::size_t unit_pages) {
  return 1u << (index % unit_pages);
}

}  // namespace

bool PageStoreTestPeer::CorruptUnit(PageStore& store, std::uint64_t index) {
  PageStore::Impl& m = *store.impl_;
  if (m.unit_pages == 0 || index >= m.slots.size()) return false;
  Slot& s = m.slots[index];
  SlotLock lock(s);
  const internal::Unit& e = m.units[index / m.unit_pages];
  if (!(SlotTable::Flags(s) & slot::kUnit) || e.wb) return false;
  std::byte junk[64];
  std::memset(junk, 0xa5, sizeof(junk));
  m.pool->Write(
      e.piece[0],
      std::span<const std::byte>(
          junk, std::min(sizeof(junk), m.pool->ObjectSize(e.piece[0]))));
  return true;
}

void PageStoreTestPeer::QueueReclaim(PageStore& store, std::uint64_t unit,
                                     std::uint64_t gen) {
  PageStore::Impl& m = *store.impl_;
  std::lock_guard l(m.reclaim_mu);
  m.QueueReclaimLocked(unit, gen);
}

std::vector<std::pair<std::uint64_t, std::uint64_t>>
PageStoreTestPeer::ReclaimQueue(PageStore& store, std::size_t* capacity) {
  PageStore::Impl& m = *store.impl_;
  std::lock_guard l(m.reclaim_mu);
  *capacity = m.reclaim_queue.capacity();
  return m.reclaim_queue;
}

void PageStore::Impl::LockUnit(std::uint64_t u) ZT_NO_THREAD_SAFETY_ANALYSIS {
  const std::uint64_t first = u * unit_pages;
  for (std::size_t k = 0; k < unit_pages; ++k) SlotTable::Lock(slots[first + k]);
}

void PageStore::Impl::UnlockUnit(std::uint64_t u)
    ZT_NO_THREAD_SAFETY_ANALYSIS {
  const std::uint64_t first = u * unit_pages;
  for (std::size_t k = unit_pages; k-- > 0;) SlotTable::Unlock(slots[first + k]);
}

Status PageStore::Impl::StoreUnit(std::uint64_t first, const std::byte* pages,
                                  BatchWrite* w) {
  const std::uint32_t now = w->now;
  const std::uint64_t u = first / unit_pages;
  // Same-filled pages stay SAME; the others are the unit's members.
  // (A failure below changes nothing of the run; StoreBatch then empties
  // the whole range, all or nothing.)
  std::uint64_t fill[internal::kMaxUnitPages];
  std::uint32_t members = 0;
  std::size_t n = 0;
  for (std::size_t k = 0; k < unit_pages; ++k) {
    if (IsSameFilled(pages + k * kPageSize, &fill[k])) continue;
    members |= 1u << k;
    ++n;
  }
  // The members, in order: the caller's pages as they are when none is
  // same-filled, else gathered.
  const std::byte* in = pages;
  if (n != unit_pages) {
    std::byte* gathered = UnitBuffer(0);
    std::size_t at = 0;
    for (std::size_t k = 0; k < unit_pages; ++k) {
      if (!(members & (1u << k))) continue;
      std::memcpy(gathered + at++ * kPageSize, pages + k * kPageSize,
                  kPageSize);
    }
    in = gathered;
  }
  std::byte* out = UnitBuffer(1);
  std::size_t len = 0;
  std::uint32_t dict = 0;
  Handle piece[internal::kMaxUnitPieces];
  std::size_t pieces = 0;
  if (n >= 2) {
    internal::StreamPool::Lease lease = streams->Acquire();
    dict = StreamDict(*lease);
    BatchItem item{std::span<const std::byte>(in, n * kPageSize),
                   std::span<std::byte>(out, n * kPageSize)};
    lease->batch->Compress(std::span<BatchItem>(&item, 1));
    len = item.length;
    // Counted while the stream still holds the dictionary's entry, so that
    // its id is never free between the two (dictionary.cc frees an id
    // that neither an object nor a stream holds); uncounted below if the
    // unit is not made.
    CountDict(dict);
  }
  // Worth it only below the pages' raw size; else page by page.
  if (len == 0 || len >= n * kPageSize) {
    UncountDict(dict);
    return StorePages(
        first, std::span<const std::byte>(pages, unit_pages * kPageSize), w);
  }
  std::size_t sizes[internal::kMaxUnitPieces];
  pieces = internal::UnitPieceSizes(len, sizes);
  for (std::size_t k = 0, at = 0; k < pieces; at += sizes[k++]) {
    piece[k] = sizes[k] == kPageSize ? pool->MallocWholePage()
                                     : pool->Malloc(sizes[k]);
    if (piece[k] == kInvalidHandle) {
      for (std::size_t j = 0; j < k; ++j) pool->Free(piece[j]);
      pool->ReleaseSpares();
      UncountDict(dict);
      Add(reject_alloc_fail);
      return Status::ResourceExhausted("pool is full");
    }
    pool->Write(piece[k], std::span<const std::byte>(out + at, sizes[k]));
  }
  Add(units_live);  // counted before the limit check, as its entry is
  if (Status st = CheckLimitAfterAlloc(); !st.ok()) {
    Sub(units_live);
    for (std::size_t k = 0; k < pieces; ++k) pool->Free(piece[k]);
    pool->ReleaseSpares();
    UncountDict(dict);
    return st;
  }
  const UnitLock run(*this, u);
  // The run's old unit, if any, goes whole with this loop: marked queued,
  // its members' frees do not queue it on the way (an entry only a pass
  // could skip, which took a place in the queue meant for one per unit).
  units[u].queued.store(internal::kUnitQueued, std::memory_order_relaxed);
  for (std::size_t k = 0; k < unit_pages; ++k) {
    Slot& s = slots[first + k];
    SlotTable::AssertHeld(s);
    FreeSlotLocked(s);  // the run's old unit, if any, goes with its last page
  }
  internal::Unit& e = units[u];
  e.members = members;
  e.bytes = static_cast<std::uint32_t>(len);
  e.pieces = static_cast<std::uint8_t>(pieces);
  e.dict = static_cast<std::uint8_t>(Dict(dict));
  e.wb = 0;
  e.queued.store(0, std::memory_order_relaxed);
  e.gen = internal::UnitTable::NewGen();
  for (std::size_t k = 0; k < pieces; ++k) e.piece[k] = piece[k];
  e.live.store(members, std::memory_order_relaxed);
  // Each member's size bits: its share of the object (at least 1, so the
  // slot reads as allocated).
  const auto share = static_cast<std::uint32_t>(
      std::clamp<std::size_t>((len + n - 1) / n, 1, kPageSize));
  for (std::size_t k = 0; k < unit_pages; ++k) {
    Slot& s = slots[first + k];
    SlotTable::AssertHeld(s);
    if (!(members & (1u << k))) {
      InstallLocked(s, Pending{fill[k], slot::kSame, false}, now);
      continue;
    }
    s.value.store(e.gen, std::memory_order_relaxed);
    SlotTable::SetContent(s, slot::kUnit | share);
    s.ac_time = now;
    Add(pages_stored);
  }
  Add(compr_data_size, len);
  Add(unit_pages_live, n);
  return Status::Ok();
}

void PageStore::Impl::FreeUnitMemberLocked(std::uint64_t index,
                                           std::uint32_t f) {
  const std::uint64_t u = index / unit_pages;
  internal::Unit& e = units[u];
  const std::uint32_t bit = Bit(index, unit_pages);
  // Read while this page pins the entry: once its bit is cleared, another
  // page's last free may empty the entry.
  const std::uint64_t gen = e.gen;
  const bool wb = e.wb != 0;
  const int members = std::popcount(e.members);
  const std::uint32_t old = e.live.fetch_and(~bit, std::memory_order_acq_rel);
  Sub(unit_pages_live);
  if (f & slot::kWb) Sub(wb_pages);
  if (old == bit) {  // the last page: the object goes
    for (int k = 0; k < e.pieces; ++k) {
      if (wb) {
        options.backing->Free(e.piece[k]);
      } else {
        pool->Free(e.piece[k]);
      }
    }
    if (!wb) Sub(compr_data_size, e.bytes);
    UncountDict(DictBits(e.dict));
    e.gen = 0;
    Sub(units_live);
    return;
  }
  // Not a unit given up (queued, or poor alone), unless this page is the
  // one it was given up for: the survivors left may all compress alone.
  // (The mark is written under the run's locks, this page's among them.)
  const std::uint8_t poor_here =
      internal::UnitPoorAlone(index % unit_pages);
  std::uint8_t unqueued =
      e.queued.load(std::memory_order_relaxed) == poor_here ? poor_here : 0;
  if (!wb && 2 * std::popcount(old & ~bit) < members &&
      e.queued.compare_exchange_strong(unqueued, internal::kUnitQueued,
                                       std::memory_order_relaxed)) {
    std::lock_guard l(reclaim_mu);
    QueueReclaimLocked(u, gen);
    reclaim_pending.store(true, std::memory_order_relaxed);
  }
}

void PageStore::Impl::QueueReclaimLocked(std::uint64_t u, std::uint64_t gen) {
  auto& q = reclaim_queue;
  if (q.size() == q.capacity()) {
    std::sort(q.begin(), q.end());  // by run, then gen: in place
    // Of each run's entries, the last (its newest gen) stays.
    std::size_t kept = 0;
    for (std::size_t i = 0; i < q.size(); ++i) {
      if (i + 1 < q.size() && q[i + 1].first == q[i].first) continue;
      q[kept++] = q[i];
    }
    q.resize(kept);  // shrinks: no allocation
  }
  if (q.size() < q.capacity()) {
    q.emplace_back(u, gen);
    return;
  }
  // Every unit has an entry (capacity is one per unit), u's among them.
  const auto it = std::lower_bound(
      q.begin(), q.end(), std::pair<std::uint64_t, std::uint64_t>(u, 0));
  if (it != q.end() && it->first == u) it->second = std::max(it->second, gen);
}

std::size_t PageStore::Impl::GatherUnitLocked(const internal::Unit& e,
                                              std::byte* out) const {
  std::size_t at = 0;
  for (int k = 0; k < e.pieces; ++k) {
    at += pool->ReadInto(e.piece[k],
                         std::span<std::byte>(out + at, kUnitBytes - at));
  }
  return at;
}

Status PageStore::Impl::DecompressUnitLocked(std::uint64_t index,
                                             std::byte* out) {
  const std::uint64_t u = index / unit_pages;
  const internal::Unit& e = units[u];
  std::byte* obj = UnitBuffer(2);
  Status st;
  if (!e.wb) GatherUnitLocked(e, obj);
  for (int k = 0; e.wb && k < e.pieces && st.ok(); ++k) {
    Add(bd_reads);
    alignas(kPageSize) thread_local std::byte block[kPageSize];
    st = options.backing->ReadBlock(e.piece[k], MutablePage(block, kPageSize));
    if (st.ok()) std::memcpy(obj + k * kPageSize, block, kPageSize);
  }
  if (!st.ok()) return st;
  const std::size_t n = static_cast<std::size_t>(std::popcount(e.members));
  st = LocalDecompressor(*codec_of[e.dict][0].load(std::memory_order_acquire))
           .Decompress(std::span<const std::byte>(obj, e.bytes),
                       std::span<std::byte>(out, n * kPageSize));
  if (!st.ok()) {
    st = DecompressError(std::move(st), "slot " + std::to_string(index) +
                                            " (unit " + std::to_string(u) +
                                            ")");
  }
  return st;
}

Status PageStore::Impl::LoadUnitLocked(std::uint64_t index, std::byte* out) {
  const internal::Unit& e = units[index / unit_pages];
  UnitCache& cache = LocalUnitCache();
  if (cache.gen != e.gen) {
    cache.gen = 0;
    ZT_RETURN_IF_ERROR(DecompressUnitLocked(index, cache.pages.get()));
    cache.gen = e.gen;
  }
  const std::uint32_t bit = Bit(index, unit_pages);
  const int pos = std::popcount(e.members & (bit - 1));
  std::memcpy(out, cache.pages.get() + pos * kPageSize, kPageSize);
  return Status::Ok();
}

std::size_t PageStore::Impl::LoadUnitRun(std::uint64_t first, std::byte* out,
                                         Status* statuses) {
  const std::uint64_t u = first / unit_pages;
  const internal::Unit& e = units[u];
  const std::uint32_t all = (1u << unit_pages) - 1;
  std::uint64_t gen = 0;
  {
    Slot& s = slots[first];
    SlotLock lock(s);
    if (!(SlotTable::Flags(s) & slot::kUnit) || e.members != all) {
      statuses[0] = LoadLocked(first, s, out);
      return 1;
    }
    Status st = DecompressUnitLocked(first, out);
    if (!st.ok()) {
      Add(failed_reads);
      statuses[0] = std::move(st);
      return 1;
    }
    gen = e.gen;
    LoadedLocked(s);
    statuses[0] = Status::Ok();
  }
  // Each other page: its copy in `out` is its data while it is still a
  // member of the same generation (the object of a generation never
  // changes, unit_table.h); else it is loaded on its own.
  for (std::size_t k = 1; k < unit_pages; ++k) {
    Slot& s = slots[first + k];
    SlotLock lock(s);
    if ((SlotTable::Flags(s) & slot::kUnit) && e.gen == gen) {
      LoadedLocked(s);
      statuses[k] = Status::Ok();
    } else {
      statuses[k] = LoadLocked(first + k, s, out + k * kPageSize);
    }
  }
  return unit_pages;
}

void PageStore::Impl::ReclaimQueued() {
  // One pass at a time (reclaim_running). A unit queued while a pass runs
  // is taken by that pass: before it ends it looks at the queue again,
  // under the lock the queuer took, so that no unit is left queued once
  // the calls that queued them have returned. Except after a refusal by
  // the pool or a std::bad_alloc (ReclaimPass): what is queued then waits
  // for the next call, so that while memory is short a call makes two
  // failed tries at most.
  {
    std::lock_guard l(reclaim_mu);
    if (reclaim_running) return;
    reclaim_running = true;
  }
  // The pass ends in the same hold of reclaim_mu that finds the queue
  // empty; only an exception ends it otherwise.
  struct Running {
    Impl& m;
    bool ended = false;
    ~Running() {
      if (ended) return;
      std::lock_guard l(m.reclaim_mu);
      m.reclaim_running = false;
    }
  } running{*this};
  bool refused = false;
  for (;;) {
    {
      std::lock_guard l(reclaim_mu);
      if (reclaim_queue.empty() || refused) {
        reclaim_pending.store(!reclaim_queue.empty(),
                              std::memory_order_relaxed);
        reclaim_running = false;
        running.ended = true;
        return;
      }
      reclaim_pending.store(false, std::memory_order_relaxed);
      reclaim_work.clear();  // keeps its capacity
      reclaim_work.swap(reclaim_queue);
    }
    refused = !ReclaimPass();
  }
}

bool PageStore::Impl::ReclaimPass() {
  // A unit loses its `queued` mark, so that the next free of one of its
  // pages queues it again (rather than none ever). (gen is read under the
  // run's locks, as unit_table.h requires; locking allocates nothing.)
  const auto unqueue = [&](std::pair<std::uint64_t, std::uint64_t> w) {
    const UnitLock run(*this, w.first);
    internal::Unit& e = units[w.first];
    if (e.gen == w.second) e.queued.store(0, std::memory_order_relaxed);
  };
  std::size_t k = 0;
  const auto unqueue_rest = [&] {
    for (; k < reclaim_work.size(); ++k) unqueue(reclaim_work[k]);
  };
  // The units the pool refused: the pass goes on past the first, so that
  // a unit that stays refused (its class full) holds up no other, whose
  // reclaim may succeed and make room; it stops at the second, so that a
  // call makes two refused tries at most while the pool stays full.
  std::pair<std::uint64_t, std::uint64_t> refused[2];
  std::size_t refusals = 0;
  // On an exception other than std::bad_alloc: every unit not reclaimed,
  // tried or not, is unqueued.
  const auto unqueue_all = [&] {
    unqueue_rest();
    for (std::size_t i = 0; i < refusals; ++i) unqueue(refused[i]);
    refusals = 0;
  };
  // After a refusal: the units not tried, then the refused ones, go back
  // on the queue, still marked queued, for the next call (a current entry
  // always finds its place, QueueReclaimLocked; within the queue's
  // capacity, pushing allocates nothing).
  const auto requeue_rest = [&] {
    std::lock_guard l(reclaim_mu);
    for (; k < reclaim_work.size(); ++k) {
      QueueReclaimLocked(reclaim_work[k].first, reclaim_work[k].second);
    }
    for (std::size_t i = 0; i < refusals; ++i) {
      QueueReclaimLocked(refused[i].first, refused[i].second);
    }
  };
  try {
    for (; k < reclaim_work.size() && refusals < 2; ++k) {
      const auto [u, gen] = reclaim_work[k];
      // Stream before slots (the lock order): the survivors are compressed
      // under the run's locks, so that nothing changes between read and
      // install.
      internal::StreamPool::Lease lease = streams->Acquire();
      // A newer dictionary's codec is built before the run is locked, not
      // while readers of its pages wait.
      StreamDict(*lease);
      const UnitLock run(*this, u);
      internal::Unit& e = units[u];
      if (e.gen == gen && !e.wb && !ReclaimLocked(u, *lease)) {
        refused[refusals++] = reclaim_work[k];
      }
    }
  } catch (const std::bad_alloc&) {
    // Out of memory (a thread's first unit cache, an error message, a new
    // dictionary's codec): one rule with the pool's refusal, as both are
    // memory that a later call may find. The unit being tried counts as
    // refused (refusals < 2 inside the loop), and it and the units not
    // tried go back on the queue for the next call; the call that ran the
    // pass did its own work, and does not fail for them.
    if (k < reclaim_work.size()) refused[refusals++] = reclaim_work[k++];
  } catch (...) {
    unqueue_all();
    pool->ReleaseSpares();
    throw;
  }
  if (refusals > 0) requeue_rest();
  pool->ReleaseSpares();
  return refusals == 0;
}

// All or nothing: every survivor is made into its own object first, and
// only then installed (the last install frees the unit). The new objects
// are not held to mem_limit: they replace a larger object, and a unit
// must not stay whole for one page because memory is tight. A survivor
// that cannot be its own object leaves the unit as it is. Where no retry
// would do better (the unit is corrupt, or, without
// store_incompressible, a page compresses poorly alone), the unit stays
// marked queued (`queued` set) and off the queue, so that it is not tried
// again with every later free: it goes with its last page, or, for a page
// poor alone, is tried again after that page's free (FreeUnitMemberLocked)
// or a new dictionary (RetryPoorUnits).
// Where the pool had no room, memory for a decompressor was short, or a
// page poor alone was tried with an older dictionary than the current one
// (its stream could not take up the new one), this returns false, and the
// pass puts the unit back on the queue for a later call, when objects
// freed meanwhile may have made room (a std::bad_alloc
// thrown from here is retried the same way, ReclaimPass). No failure here
// is a client's failed write.
bool PageStore::Impl::ReclaimLocked(std::uint64_t u, internal::Stream& stream) {
  const std::uint64_t first = u * unit_pages;
  Pending made[internal::kMaxUnitPages];
  alignas(8) std::byte page[kPageSize];
  const std::uint32_t dict = StreamDict(stream);
  // The survivors made so far go back to the pool unless installed: on a
  // refusal below, and on an exception (a later member's load, out of
  // memory for its error message).
  struct DropMade {
    Impl& m;
    Pending* made;
    std::size_t n;
    bool installing = false;
    ~DropMade() {
      if (installing) return;
      for (std::size_t k = 0; k < n; ++k) {
        if (made[k].content != 0) m.DropPending(made[k]);
      }
    }
  } drop{*this, made, unit_pages};
  bool ok = true;
  bool refused = false;  // by the pool
  for (std::size_t k = 0; k < unit_pages && ok; ++k) {
    Slot& s = slots[first + k];
    SlotTable::AssertHeld(s);
    if (!(SlotTable::Flags(s) & slot::kUnit)) continue;
    if (Status st = LoadUnitLocked(first + k, page); !st.ok()) {
      // Out of memory for a decompressor is retried as a refusal is; a
      // unit that does not decompress (kCorruption) is given up.
      refused = st.code() == StatusCode::kResourceExhausted;
      ok = false;
      break;
    }
    std::uint64_t fill;
    if (IsSameFilled(page, &fill)) {
      made[k] = {fill, slot::kSame, false};
      continue;
    }
    BatchItem item{ConstPage(page, kPageSize), stream.buffer(0)};
    stream.batch->Compress(std::span<BatchItem>(&item, 1));
    const bool poor = item.length == 0 || item.length >= huge_size;
    if (poor && !options.store_incompressible) {
      // Given up until a new dictionary may let the page compress
      // (RetryPoorUnits), if the page was tried with the current one. Else
      // (the stream could not take up a newer one, out of memory for its
      // compressor, RefreshStream; or a training published one meanwhile,
      // whose RetryPoorUnits may have passed this unit, still marked
      // queued) the try says nothing of the new dictionary: the unit is
      // tried again by a later call, as on a refusal. The mark's store and
      // the generation's load are seq_cst, as are TrainDictionary's
      // increment and RetryPoorUnits' look at the mark: either this sees
      // the new generation, or that sees the mark. (Not fences: GCC's
      // TSan does not support them.)
      internal::Unit& e = units[u];
      e.queued.store(internal::UnitPoorAlone(k), std::memory_order_seq_cst);
      if (stream.dict_generation !=
          dict_generation.load(std::memory_order_seq_cst)) {
        e.queued.store(internal::kUnitQueued, std::memory_order_relaxed);
        refused = true;
      }
      ok = false;
      break;
    }
    const std::span<const std::byte> obj =
        poor ? std::span<const std::byte>(page, kPageSize)
             : stream.buffer(0).first(item.length);
    const Handle h = pool->Malloc(obj.size());
    if (h == kInvalidHandle) {
      Add(units_reclaim_refused);  // no store refused: reject_alloc_fail not
      refused = true;
      ok = false;
      break;
    }
    pool->Write(h, obj);
    made[k] = {h, poor ? slot::kHuge | static_cast<std::uint32_t>(kPageSize)
                       : dict | static_cast<std::uint32_t>(item.length),
               false};
    CountDict(made[k].content);  // as MakeObject does
  }
  if (!ok) return !refused;  // `queued` stays set; DropMade frees what was made
  drop.installing = true;  // nothing below throws
  for (std::size_t k = 0; k < unit_pages; ++k) {
    if (made[k].content == 0) continue;
    Slot& s = slots[first + k];
    SlotTable::AssertHeld(s);
    const std::uint32_t ac_time = s.ac_time;
    const std::uint32_t idle = SlotTable::Flags(s) & slot::kIdle;
    // The last one frees the unit. A survivor kept raw is a huge page
    // now, but no huge page stored: huge_pages_since counts the clients'
    // stores, as zram counts its writes (recompression adds none either).
    InstallLocked(s, made[k], ac_time, /*count_since=*/false);
    if (idle) SlotTable::SetFlags(s, slot::kIdle);
    Add(units_reclaimed);
  }
  return true;
}

void PageStore::Impl::RetryPoorUnits() {
  // A look at every entry, without a lock first: training is rare, and an
  // entry never made is the mapping's zero page (unit_table.h). The run's
  // locks are taken only for a unit given up, and its `queued` is read
  // again under them (StoreUnit and reclaims change it under them).
  bool queued_any = false;
  for (std::uint64_t u = 0; unit_pages != 0 && u < units.size(); ++u) {
    internal::Unit& e = units[u];
    // seq_cst, with TrainDictionary's increment of dict_generation: a unit
    // given up after this look, with an older dictionary, sees the new
    // generation and is queued again by its reclaim (ReclaimLocked).
    if (!internal::IsUnitPoorAlone(e.queued.load(std::memory_order_seq_cst))) {
      continue;
    }
    const UnitLock run(*this, u);
    if (!internal::IsUnitPoorAlone(e.queued.load(std::memory_order_relaxed))) {
      continue;
    }
    if (e.gen == 0 || e.wb) {  // gone (a new unit resets the mark), or on disk
      if (e.gen == 0) e.queued.store(0, std::memory_order_relaxed);
      continue;
    }
    std::lock_guard l(reclaim_mu);
    QueueReclaimLocked(u, e.gen);
    e.queued.store(internal::kUnitQueued, std::memory_order_relaxed);
    queued_any = true;
  }
  if (queued_any) reclaim_pending.store(true, std::memory_order_relaxed);
}

}  // namespace ztier
