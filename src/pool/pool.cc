// File: pool/pool.cc
//
// Pool::Create, Malloc, Free, Read, Write: see ztier/pool.h for the contract
// and pool_internal.h for the handle and location-entry layouts.
//
// Malloc (class lock): take the fullest non-full zspage (fullness groups
// 10..1, as zsmalloc's find_get_zspage), or carve a new one from the arena;
// place the object at the lowest free index and raise the zspage's touched
// pages to cover it; take a handle-table slot and publish the location
// (release). O(groups + bitmap words), no per-object allocation.
//
// Deferred frees (Free finding the class locked) sit in the class's slots
// until drained under the lock. No free is stranded: every lock holder
// sweeps after it unlocks, and a Free that deferred sweeps after deferring,
// so whichever of the two comes last sees the other's work (seq_cst on the
// slot count).
//
// Free (class lock): clear the bit; a zspage whose last object goes becomes
// the class's spare if it has none, else it is discarded (MADV_DONTNEED on
// its touched pages), its run and id recycled. The spare exists for churn:
// a device that overwrites pages frees and allocates objects of the same
// classes all the time, and giving a page back to the OS only to fault a
// fresh one in a moment later costs about 1.5 us per page on a VM (plus a
// TLB shootdown to every other CPU running the process). At most one spare
// per class; it is counted in TotalBytes() like any held page, and
// Compact() releases every spare.
//
// Read/Write take no lock: Pin() loads the location (acquire), adds a reader
// to that zspage's pin word unless a mover holds or waits for it, and
// re-checks that the location did not change meanwhile (else unpin, retry).
// A mover stores the new location while holding the zspage exclusively, so
// a pinned, re-checked location stays valid until Unpin().
#include <sys/mman.h>

#include <algorithm>
#include <cassert>
#include <cstring>
#include <thread>

#include "platform/cpu_relax.h"
#include "pool_internal.h"

namespace ztier {

using internal_pool::ClassGeometry;
using internal_pool::SizeClass;
using internal_pool::ZspageDesc;
namespace ip = internal_pool;

Pool::Impl::Impl(const PoolOptions& opts)
    : options(opts),
      table(ip::BuildClassTable(opts.max_pages_per_zspage)),
      arena(opts.arena_bytes, opts.huge_pages) {
  for (int i = 0; i < ip::kNumClasses; ++i) {
    if (table.merged[i] != i) continue;
    classes[i] = std::make_unique<SizeClass>();
    classes[i]->index = i;
    classes[i]->geo = table.geometry[i];
  }
  const auto pages = static_cast<std::uint32_t>(opts.max_pages_per_zspage);
  classes[ip::kPackedClass] = std::make_unique<SizeClass>();
  classes[ip::kPackedClass]->index = ip::kPackedClass;
  classes[ip::kPackedClass]->geo = {static_cast<std::uint32_t>(ip::kPageSize),
                                    pages, pages};
}

Pool::Impl::~Impl() {
  // Every live zspage sits in one fullness list, or is its class's spare;
  // free their heap bitmaps. The arenas go with `arena`.
  for (auto& sc : classes) {
    if (sc == nullptr) continue;
    if (sc->spare != ip::kNoId) FreeDesc(*sc, sc->spare);
    for (std::uint32_t id = sc->TakeShell(); id != ip::kNoId;
         id = sc->TakeShell()) {
      FreeDesc(*sc, id);
    }
    for (int g = 1; g < ip::kNumGroups; ++g) {
      for (std::uint32_t id = sc->group_head[g]; id != ip::kNoId;) {
        const std::uint32_t next = descs.Get(id)->next;
        FreeDesc(*sc, id);
        id = next;
      }
    }
  }
}

void Pool::Impl::GroupInsert(SizeClass& sc, std::uint32_t id, ZspageDesc* d) {
  const int g = ip::GroupFor(d->inuse, sc.geo.objs);
  d->group = static_cast<std::uint8_t>(g);
  d->prev = ip::kNoId;
  d->next = sc.group_head[g];
  if (d->next != ip::kNoId) descs.Get(d->next)->prev = id;
  sc.group_head[g] = id;
  ++sc.group_count[g];
}

void Pool::Impl::GroupRemove(SizeClass& sc, ZspageDesc* d) {
  const int g = d->group;
  if (d->prev != ip::kNoId) {
    descs.Get(d->prev)->next = d->next;
  } else {
    sc.group_head[g] = d->next;
  }
  if (d->next != ip::kNoId) descs.Get(d->next)->prev = d->prev;
  d->prev = d->next = ip::kNoId;
  --sc.group_count[g];
}

void Pool::Impl::Regroup(SizeClass& sc, std::uint32_t id, ZspageDesc* d) {
  if (ip::GroupFor(d->inuse, sc.geo.objs) == d->group) return;
  GroupRemove(sc, d);
  GroupInsert(sc, id, d);
}

std::size_t Pool::Impl::Touch(SizeClass& sc, ZspageDesc* d, std::uint32_t idx) {
  const std::size_t pages = sc.geo.PagesFor(std::size_t{idx} + 1);
  if (pages <= d->touched_pages) return 0;
  const std::size_t grow = pages - d->touched_pages;
  d->touched_pages = static_cast<std::uint8_t>(pages);
  sc.touched_pages += grow;
  touched_pages.fetch_add(grow, std::memory_order_relaxed);
  return grow;
}

std::size_t Pool::Impl::FreeZspage(SizeClass& sc, std::uint32_t id,
                                   ZspageDesc* d, ip::RunReleases* later) {
  assert(d->inuse == 0);
  const std::size_t pages = d->touched_pages;
  sc.touched_pages -= pages;
  touched_pages.fetch_sub(pages, std::memory_order_relaxed);
  --sc.zspages;
  d->touched_pages = 0;
  if (later != nullptr) {
    // Discarded after the lock is dropped, then kept as a shell if there
    // is room (DoReleases).
    later->Add({d->base, pages, sc.geo.pages, id, &sc});
  } else {
    std::byte* const run = d->base;
    arena.Discard(run, 0, pages);
    // The descriptor goes before the run: with a reserve its bitmap is the
    // run's, and ids in use must never outnumber runs held (DescTable is
    // sized for the reserve's runs).
    FreeDesc(sc, id);
    arena.ReleaseRun(run, sc.geo.pages);
  }
  return pages;
}

ZspageDesc* Pool::Impl::Pin(Handle h, std::uint64_t* entry) const {
  std::atomic<std::uint64_t>& slot = handles.Entry(ip::HandleIndex(h));
  for (int spins = 0;; ++spins) {
    if (spins > 16) std::this_thread::yield();
    const std::uint64_t e = slot.load(std::memory_order_acquire);
    assert((e & ip::kEntryFree) == 0 && "use of a freed handle");
    ZspageDesc* d = descs.Get(ip::EntryZspage(e));
    std::int32_t c = d->pin.load(std::memory_order_relaxed);
    if (c < 0 || (c & ip::kPinPending) != 0) continue;
    if (!d->pin.compare_exchange_weak(c, c + 1, std::memory_order_acquire,
                                      std::memory_order_relaxed)) {
      continue;
    }
    if (slot.load(std::memory_order_acquire) == e) {
      *entry = e;
      return d;
    }
    Unpin(d);  // moved between the load and the pin: try again
  }
}

Result<std::unique_ptr<Pool>> Pool::Create(const PoolOptions& options) {
  if (options.max_pages_per_zspage < 1 ||
      options.max_pages_per_zspage > ip::kMaxPagesPerZspage) {
    return Err(Status::InvalidArgument(
        "pool: max_pages_per_zspage must be 1..16"));
  }
  if (options.arena_bytes < ip::kMaxPagesPerZspage * ip::kPageSize ||
      options.arena_bytes % ip::kPageSize != 0) {
    return Err(Status::InvalidArgument(
        "pool: arena_bytes must be a multiple of 4096 and >= 64 KiB"));
  }
  std::unique_ptr<Pool> pool(new Pool());
  pool->impl_ = std::make_unique<Impl>(options);
  if (options.prealloc_bytes > 0) {
    Impl& m = *pool->impl_;
    // Room for the objects' pages, plus the untouched tail of the newest
    // zspage of each class (a zspage's run is taken whole, its pages are
    // counted as objects reach them): so that a full pool meets its
    // owner's limit on pages before it meets the end of the reserve.
    std::size_t pages = options.prealloc_bytes / ip::kPageSize +
                        (options.prealloc_bytes % ip::kPageSize != 0);
    for (const auto& sc : m.classes) {
      if (sc != nullptr) pages += sc->geo.pages - 1;
    }
    ZT_ASSIGN_OR_RETURN(auto reserve, ip::PageReserve::Create(pages));
    m.arena.SetReserve(std::move(reserve));
    // Every zspage (live or spare) holds its own run of the reserve, so
    // descriptors in use are at most its pages, plus the shells (4 a
    // class) and those a releasing thread holds for a moment; and there
    // are never more live objects than the reserve holds at 32 bytes each.
    std::uint64_t objects = pages * (ip::kPageSize / ip::kMinAllocSize);
    if (options.prealloc_objects != 0) {
      objects = std::min<std::uint64_t>(objects, options.prealloc_objects);
    }
    if (!m.descs.Reserve(pages + 4 * ip::kNumClassSlots + 1024) ||
        !m.handles.Reserve(objects +
                           std::uint64_t{ip::kNumClassSlots} *
                               ip::HandleTable::kCacheHigh +
                           ip::HandleTable::kFreshBatch)) {
      return Err(Status::ResourceExhausted("pool: preallocating metadata"));
    }
  }
  return pool;
}

Pool::Pool() = default;
Pool::~Pool() = default;

Handle Pool::Malloc(std::size_t size) {
  assert(size >= 1 && size <= ip::kPageSize);
  if (size < 1 || size > ip::kPageSize) return kInvalidHandle;
  SizeClass& sc = impl_->LockClassFor(size);
  sc.mu.AssertHeld();
  return impl_->AllocateAndUnlock(sc, size);
}

Handle Pool::MallocWholePage() {
  SizeClass& sc = *impl_->classes[ip::kPackedClass];
  sc.mu.Lock();
  const Handle h = impl_->AllocateAndUnlock(sc, ip::kPageSize);
  // A reserve whose free pages are scattered may have no run as long as
  // a packed zspage: then a page of the huge class (its handle names its
  // class, so Free and Read need not know).
  return h != kInvalidHandle ? h : Malloc(ip::kPageSize);
}

Handle Pool::Impl::AllocateAndUnlock(SizeClass& sc, std::size_t size) {
  // Declared before the allocation, so that zspages emptied by deferred
  // frees drained below give their pages back after the lock is dropped
  // (see Free).
  ReleaseOnExit later{this, {}};
  DrainDeferredFrees(sc, &later.runs);
  const Handle h = AllocateLocked(sc, size, &later);
  // The one exit, failed or not: frees deferred while the lock was held
  // are swept now, so none is stranded until the class's next locker.
  sc.mu.Unlock();
  SweepDeferred(sc);
  return h;
}

// The class is locked: by a thread on another CPU for a moment, or by one
// that was preempted holding it. Rather than sleep until that thread runs
// again, try the next larger classes (the object fits there too, at a
// little more memory), and go round again for a few microseconds, which
// outlasts any holder that is running. Only then sleep on the lock.
// A larger class is taken only where it has room in a zspage it holds (a
// partly used one or its spare): opening a zspage in another class for
// the object would spend pages (from the reserve too, sized for one newest
// zspage per class) because of a contended lock, and fail where the own
// class has room. (Which lock it returns holding is decided at run time:
// beyond the analysis, so the caller asserts it.)
SizeClass& Pool::Impl::LockClassFor(std::size_t size)
    ZT_NO_THREAD_SAFETY_ANALYSIS {
  const int ci = table.MergedClassFor(size);
  SizeClass& own = *classes[ci];
  if (own.mu.TryLock()) return own;
  const auto try_other = [this](SizeClass& c) ZT_NO_THREAD_SAFETY_ANALYSIS {
    if (!c.mu.TryLock()) return false;
    if (c.spare != ip::kNoId || NonFullZspages(c) != 0) return true;
    c.mu.Unlock();
    SweepDeferred(c);  // as every holder does after letting go
    return false;
  };
  for (int round = 0; round < 64; ++round) {
    if (round > 0) {
      platform::CpuRelax();
      if (own.mu.TryLock()) return own;
    }
    int tries = 0;
    static_assert(ip::kHugeClass < ip::kPackedClass);  // never handed out
    for (int k = ci + 1; k < ip::kHugeClass && tries < ip::kMallocAlternatives;
         ++k) {
      if (classes[k] == nullptr) continue;
      ++tries;
      if (try_other(*classes[k])) return *classes[k];
    }
  }
  // Last, any larger class at all, the huge class included: an object in a
  // class far too big wastes memory, but only while locks are contended.
  for (int k = ci + 1; k <= ip::kHugeClass; ++k) {
    if (classes[k] != nullptr && try_other(*classes[k])) return *classes[k];
  }
  own.mu.Lock();
  return own;
}

Handle Pool::Impl::AllocateLocked(SizeClass& sc, std::size_t size,
                                  ReleaseOnExit* later) {
  Impl& m = *this;
  // The zspage first: the fullest non-full one, the spare, else a new one
  // (a shell, or a new descriptor) with its run, which the arena or the
  // reserve may refuse. The handle-table index only then: a refused Malloc
  // must take none, as fresh indexes would put a table chunk in the
  // metadata bill (and, without a reserve, make it) for no object.
  std::uint32_t id = ip::kNoId;
  for (int g = ip::kGroupFull - 1; g >= 1 && id == ip::kNoId; --g) {
    id = sc.group_head[g];
  }
  const bool in_group = id != ip::kNoId;
  const bool spare = !in_group && sc.spare != ip::kNoId;
  bool shell = false;
  std::byte* run = nullptr;  // taken for a new zspage
  if (spare) {
    id = sc.spare;
  } else if (!in_group) {
    id = sc.TakeShell();
    shell = id != ip::kNoId;
    // A shell keeps its run, but not in the reserve (DoReleases).
    if (!shell || m.arena.reserve() != nullptr) {
      run = m.arena.AllocateRun(sc.geo.pages, &later->populate);
      if (run == nullptr) {
        if (shell && !sc.StashShell(id)) m.FreeDesc(sc, id);
        return kInvalidHandle;
      }
    }
    if (!shell) {
      if (m.descs.Allocate(sc.geo.objs, &id,
                           m.arena.ReserveBitmap(run, sc.geo.objs)) ==
          nullptr) {
        m.arena.ReleaseRun(run, sc.geo.pages);
        return kInvalidHandle;
      }
    }
  }
  const std::uint64_t hidx = m.handles.Allocate(&sc.handle_cache);
  if (hidx == ip::kNoIndex) {
    // A new zspage goes back: a shell again (with its own run, or none in
    // the reserve), else freed, its descriptor before its run as in
    // FreeZspage.
    if (shell && sc.StashShell(id)) {
      if (run != nullptr) m.arena.ReleaseRun(run, sc.geo.pages);
    } else if (shell || run != nullptr) {
      std::byte* const own = run != nullptr ? run : m.descs.Get(id)->base;
      m.FreeDesc(sc, id);
      m.arena.ReleaseRun(own, sc.geo.pages);
    }
    return kInvalidHandle;
  }
  ZspageDesc* d = m.descs.Get(id);
  if (in_group) {
    m.GroupRemove(sc, d);
  } else if (spare) {
    sc.spare = ip::kNoId;
  } else {
    // A shell is empty and untouched, its run still its own unless it
    // has a new one from the reserve.
    if (run != nullptr) {
      d->base = run;
      if (shell) {
        if (std::uint64_t* bits = m.arena.ReserveBitmap(run, sc.geo.objs)) {
          d->heap_bits = bits;
        }
      }
    }
    ++sc.zspages;
  }
  const std::uint32_t idx = d->LowestFree(sc.geo.objs);
  d->Set(sc.geo.objs, idx);
  ++d->inuse;
  m.Touch(sc, d, idx);
  m.GroupInsert(sc, id, d);
  ++sc.obj_used;
  m.objects.Add(1);
  m.object_bytes.Add(size);
  m.handles.Entry(hidx).store(
      ip::MakeEntry(id, idx, static_cast<std::uint32_t>(size)),
      std::memory_order_release);
  return ip::MakeHandle(sc.index, hidx);
}

void Pool::Free(Handle h) {
  assert(h != kInvalidHandle);
  Impl& m = *impl_;
  SizeClass& sc = m.ClassOf(h);
  if (!sc.mu.TryLock()) {
    // Held, perhaps by a preempted thread: leave the handle for the holder
    // (or the next locker) to free, rather than sleep behind it.
    if (sc.DeferFree(h)) {
      m.SweepDeferred(sc);  // in case the holder let go meanwhile
      return;
    }
    sc.mu.Lock();
  }
  // Emptied zspages are unlinked under the lock but their pages go back to
  // the OS after it: madvise can take tens of microseconds (and sleep), and
  // no one should wait for that behind the class lock.
  ip::RunReleases later;
  m.FreeLocked(sc, h, &later);
  m.DrainDeferredFrees(sc, &later);
  sc.mu.Unlock();
  m.DoReleases(later);
  m.SweepDeferred(sc);
}

// deferred_count lags its slots: DeferFree fills a slot and only then
// counts it, so a drain in between takes the handle before its count and
// leaves the count below the slots' for a moment, negative even. A count
// above 0 always means an undrained handle; one of 0 or less may not (a
// handle not yet counted is swept by its own Free once it is counted).
void Pool::Impl::SweepDeferred(SizeClass& sc) {
  while (sc.deferred_count.load(std::memory_order_seq_cst) > 0) {
    if (!sc.mu.TryLock()) return;  // its holder sweeps after letting go
    ip::RunReleases later;
    DrainDeferredFrees(sc, &later);
    sc.mu.Unlock();
    DoReleases(later);
  }
}

void Pool::Impl::DrainDeferredFrees(SizeClass& sc, ip::RunReleases* later) {
  if (sc.deferred_count.load(std::memory_order_acquire) <= 0) return;
  for (auto& slot : sc.deferred) {
    const Handle h = slot.exchange(kInvalidHandle, std::memory_order_acquire);
    if (h == kInvalidHandle) continue;
    sc.deferred_count.fetch_sub(1, std::memory_order_relaxed);
    FreeLocked(sc, h, later);
  }
}

Pool::Impl::ReleaseOnExit::~ReleaseOnExit() {
  m->DoReleases(runs);
  if (populate) m->arena.PopulateAhead();
}

void Pool::Impl::DoReleases(const ip::RunReleases& r) {
  for (std::size_t i = 0; i < r.n; ++i) {
    const ip::RunRelease& x = r.items[i];
    arena.Discard(x.base, 0, x.touched);
    if (arena.reserve() != nullptr) {
      // With a reserve a shell keeps only its descriptor: a run kept by one
      // class would be kept from all the others, so it goes back now and
      // Malloc takes a new one for the shell. The descriptor is settled
      // before the run goes, as in FreeZspage: a thread that takes the run
      // at once must not need an id beyond the table's.
      descs.Get(x.id)->base = nullptr;
      if (!x.sc->StashShell(x.id)) FreeDesc(*x.sc, x.id);
      arena.ReleaseRun(x.base, x.run_pages);
      continue;
    }
    if (x.sc->StashShell(x.id)) continue;
    FreeDesc(*x.sc, x.id);  // before the run: see FreeZspage
    arena.ReleaseRun(x.base, x.run_pages);
  }
}

void Pool::Impl::FreeLocked(SizeClass& sc, Handle h, ip::RunReleases* later) {
  Impl& m = *this;
  const std::uint64_t hidx = ip::HandleIndex(h);
  const std::uint64_t e = m.handles.Entry(hidx).load(std::memory_order_relaxed);
  assert((e & ip::kEntryFree) == 0 && "double free");
  const std::uint32_t id = ip::EntryZspage(e);
  const std::uint32_t idx = ip::EntryIdx(e);
  ZspageDesc* d = m.descs.Get(id);
  assert(d->Used(sc.geo.objs, idx));
  d->Clear(sc.geo.objs, idx);
  --d->inuse;
  --sc.obj_used;
  m.objects.Sub(1);
  m.object_bytes.Sub(ip::EntrySize(e));
  m.handles.Free(&sc.handle_cache, hidx);
  if (d->inuse == 0 && id != sc.discarding) {
    m.GroupRemove(sc, d);
    m.ReleaseEmpty(sc, id, d, later);
  } else {
    m.Regroup(sc, id, d);  // (an emptied zspage being discarded: group 0)
  }
}

void Pool::Impl::ReleaseEmpty(SizeClass& sc, std::uint32_t id, ZspageDesc* d,
                              ip::RunReleases* later) {
  if (sc.spare == ip::kNoId) {
    sc.spare = id;
  } else {
    FreeZspage(sc, id, d, later);
  }
}

void Pool::Write(Handle h, std::span<const std::byte> data) {
  std::uint64_t e;
  ZspageDesc* d = impl_->Pin(h, &e);
  assert(data.size() <= ip::EntrySize(e));
  const std::size_t stride = impl_->ClassOf(h).geo.size;
  std::memcpy(d->base + std::size_t{ip::EntryIdx(e)} * stride, data.data(),
              data.size());
  Impl::Unpin(d);
}

void Pool::Read(Handle h,
                const std::function<void(std::span<const std::byte>)>& fn) const {
  std::uint64_t e;
  // Unpinned on the way out, an exception from fn included: a zspage left
  // pinned would keep its next mover (Compact, holding the class lock)
  // waiting forever.
  struct Pinned {
    ZspageDesc* d;
    ~Pinned() { Impl::Unpin(d); }
  } pinned{impl_->Pin(h, &e)};
  const std::size_t stride = impl_->ClassOf(h).geo.size;
  fn(std::span<const std::byte>(
      pinned.d->base + std::size_t{ip::EntryIdx(e)} * stride,
      ip::EntrySize(e)));
}

std::size_t Pool::ReadInto(Handle h, std::span<std::byte> out) const {
  std::uint64_t e;
  ZspageDesc* d = impl_->Pin(h, &e);
  const std::size_t size = ip::EntrySize(e);
  assert(out.size() >= size);
  const std::size_t stride = impl_->ClassOf(h).geo.size;
  std::memcpy(out.data(), d->base + std::size_t{ip::EntryIdx(e)} * stride,
              size);
  Impl::Unpin(d);
  return size;
}

std::size_t Pool::ObjectSize(Handle h) const {
  const std::uint64_t e =
      impl_->handles.Entry(ip::HandleIndex(h)).load(std::memory_order_acquire);
  assert((e & ip::kEntryFree) == 0);
  return ip::EntrySize(e);
}

std::size_t Pool::ClassSizeFor(std::size_t size) const {
  return impl_->table.geometry[impl_->table.MergedClassFor(size)].size;
}

std::size_t Pool::HugeClassSize() const { return impl_->table.huge_size; }

std::size_t Pool::TotalBytes() const {
  return impl_->touched_pages.load(std::memory_order_relaxed) * ip::kPageSize +
         impl_->metadata_bytes.load(std::memory_order_relaxed);
}

}  // namespace ztier
