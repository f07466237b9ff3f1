// page_store.cc: the PageStore (contract in include/ztier/page_store.h).
//
// Slot contents, by flags (slot_table.h has the bit layout):
//   empty       size 0, no SAME/WB           value unused
//   SAME        the page is one 8-byte word  value = the word
//   HUGE        stored raw, size 4096        value = pool handle
//   compressed  size = compressed bytes      value = pool handle
// Counters follow zram: orig_data_size counts every allocated slot,
// compr_data_size only pool objects (HUGE as 4096).
#include "ztier/page_store.h"

#include <time.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cassert>
#include <cstring>
#include <thread>
#include <vector>

#include "page_store_impl.h"
#include "page_store_test_peer.h"

namespace ztier {
namespace {

// Optimistic attempts of a StorePartial (compressing without the slot
// lock) before it takes the locked path.
constexpr int kPartialTries = 4;

}  // namespace

PageStore::PageStore() : impl_(std::make_unique<Impl>()) {}

internal::StreamPool& PageStoreTestPeer::Streams(PageStore& store) {
  return *store.impl_->streams;
}
void PageStoreTestPeer::WithSlotLocked(PageStore& store, std::uint64_t index,
                                       const std::function<void()>& fn) {
  SlotLock lock(store.impl_->slots[index]);
  fn();
}
bool PageStoreTestPeer::CorruptSlot(PageStore& store, std::uint64_t index) {
  PageStore::Impl& m = *store.impl_;
  if (index >= m.slots.size()) return false;
  Slot& s = m.slots[index];
  SlotLock lock(s);
  const std::uint32_t f = SlotTable::Flags(s);
  if (!Allocated(f) ||
      (f & (slot::kSame | slot::kHuge | slot::kWb | slot::kUnit))) {
    return false;
  }
  const Handle h = s.value.load(std::memory_order_relaxed);
  std::byte junk[64];
  std::memset(junk, 0xa5, sizeof(junk));
  m.pool->Write(h, std::span<const std::byte>(
                       junk, std::min(sizeof(junk), m.pool->ObjectSize(h))));
  return true;
}
bool PageStoreTestPeer::SlotHasWaiters(PageStore& store, std::uint64_t index) {
  return (store.impl_->slots[index].flags.load(std::memory_order_relaxed) &
          slot::kWaiters) != 0;
}
PageStore::~PageStore() {
  // Pool objects go away with the pool; blocks on the backing store, which
  // outlives the store, are given back one by one.
  Impl& m = *impl_;
  if (m.options.backing == nullptr) return;
  for (std::size_t i = 0; i < m.slots.size(); ++i) {
    Slot& s = m.slots[i];
    const std::uint32_t f = s.flags.load(std::memory_order_relaxed);
    if ((f & slot::kWb) && !(f & slot::kUnit)) {
      m.options.backing->Free(s.value.load(std::memory_order_relaxed));
    }
  }
  for (std::size_t u = 0; u < m.units.size(); ++u) {
    const internal::Unit& e = m.units[u];
    if (e.gen == 0 || !e.wb) continue;
    for (int k = 0; k < e.pieces; ++k) m.options.backing->Free(e.piece[k]);
  }
}

Result<std::unique_ptr<PageStore>> PageStore::Create(
    const PageStoreOptions& options) {
  if (options.num_pages == 0) {
    return Err(Status::InvalidArgument("num_pages must be at least 1"));
  }
  if (options.unit_pages > 1 && options.unit_pages != 4 &&
      options.unit_pages != 8 && options.unit_pages != 16) {
    return Err(Status::InvalidArgument("unit_pages must be 4, 8 or 16, not " +
                                       std::to_string(options.unit_pages)));
  }
  if (options.batch_size == 0 || options.batch_size > kMaxBatchSize) {
    return Err(Status::InvalidArgument("batch_size must be 1.." +
                                       std::to_string(kMaxBatchSize)));
  }
  std::unique_ptr<PageStore> store(new PageStore());
  Impl& m = *store->impl_;
  m.options = options;
  m.clock = options.clock;
  ZT_ASSIGN_OR_RETURN(m.codec,
                      MakeCodec(options.codec, options.algorithm_params));
  m.codecs[0] = m.codec;
  for (int p = 1; p < kMaxCodecPriorities; ++p) {
    const RecompCodec& rc = options.recomp[p - 1];
    if (rc.codec.empty()) continue;
    auto c = MakeCodec(rc.codec, rc.algorithm_params);
    if (!c.has_value()) {
      // A dict= file's errno kept (ENOENT, not kNotFound's ENODEV).
      return Err(Annotate(
          "recompression algorithm (priority " + std::to_string(p) + ")",
          c.error()));
    }
    m.codecs[p] = std::move(*c);
    m.top_priority = p;
  }
  PoolOptions pool_options = options.pool;
  if (options.prealloc) {
    if (options.mem_limit == 0) {
      return Err(Status::InvalidArgument(
          "preallocation needs a mem_limit (the size of the reserve)"));
    }
    pool_options.prealloc_bytes = options.mem_limit;
    // Objects live at once: one per slot, plus one a store in flight holds
    // before it frees the slot's old one.
    pool_options.prealloc_objects = options.num_pages + 1024;
  }
  ZT_ASSIGN_OR_RETURN(m.pool, Pool::Create(pool_options));
  m.huge_size = m.pool->HugeClassSize();
  ZT_ASSIGN_OR_RETURN(m.slots,
                      SlotTable::Create(options.num_pages, options.prealloc));
  if (options.unit_pages > 1) {
    m.unit_pages = options.unit_pages;
    ZT_ASSIGN_OR_RETURN(m.units,
                        internal::UnitTable::Create(options.num_pages,
                                                    options.unit_pages,
                                                    options.prealloc));
    const std::size_t count =
        (options.num_pages + options.unit_pages - 1) / options.unit_pages;
    m.reclaim_queue.reserve(count);
    m.reclaim_work.reserve(count);
  }

  const std::size_t cores =
      std::max<std::size_t>(1, std::thread::hardware_concurrency());
  BatchOptions bo;
  bo.backend = options.batch_backend;
  bo.max_batch = options.batch_size;
  if (options.batch_backend == BatchBackend::kParallel) {
    std::size_t w = options.parallel_workers != 0
                        ? options.parallel_workers
                        : std::max<std::size_t>(1, cores - 1);
    m.workers = std::make_unique<WorkerPool>(w);
    bo.pool = m.workers.get();
  }
  const std::size_t n = options.streams != 0 ? options.streams : cores;
  ZT_ASSIGN_OR_RETURN(m.streams,
                      internal::StreamPool::Create(m.codec, bo, n, 2 * n));
  m.stream_batch = bo;
  if (m.unit_pages > 1) {
    // Every stream compresses one unit now, so that whatever its codec
    // keeps for inputs of that size (zstd: a second context) is made here,
    // not on the store path of whichever stream a unit first meets.
    const std::size_t bytes = m.unit_pages * kPageSize;
    std::vector<std::byte> in(bytes), out(bytes);
    m.streams->VisitIdle([&](internal::Stream& s) {
      BatchItem item{in, out};
      s.batch->Compress(std::span<BatchItem>(&item, 1));
    });
  }
  auto none = std::make_shared<Impl::DictEntry>();
  for (int p = 0; p < kMaxCodecPriorities; ++p) {
    none->codecs[p] = m.codecs[p];
    m.codec_of[0][p].store(m.codecs[p].get(), std::memory_order_relaxed);
  }
  // A dictionary the codecs were given (dict=PATH) is held for the
  // store's life and counts as a trained one does (page_store.h).
  for (int p = 0; p < kMaxCodecPriorities; ++p) {
    if (m.codecs[p] != nullptr) none->memory += m.codecs[p]->dictionary_bytes();
  }
  m.dict_memory.store(none->memory, std::memory_order_relaxed);
  m.dicts[0] = std::move(none);
  m.SetMemLimitBytes(options.mem_limit);
  return store;
}

std::size_t PageStore::num_pages() const { return impl_->slots.size(); }
const Codec& PageStore::codec() const { return *impl_->codec; }
const Codec* PageStore::codec_at(int priority) const {
  if (priority < 0 || priority >= kMaxCodecPriorities) return nullptr;
  return impl_->codecs[priority].get();
}
std::size_t PageStore::batch_size() const {
  return impl_->streams->batch_size();
}
BatchBackend PageStore::batch_backend() const {
  return impl_->options.batch_backend;
}
const Pool& PageStore::pool() const { return *impl_->pool; }
std::size_t PageStore::unit_pages() const { return impl_->unit_pages; }
std::size_t PageStore::PoolBytes() const { return impl_->UsedBytes(); }

Status PageStore::Store(std::uint64_t index, ConstPage page) {
  Impl& m = *impl_;
  ZT_RETURN_IF_ERROR(m.CheckSlot(index));
  bool poor = false;
  Status st = m.StoreOne(index, page, &poor);
  ZT_RETURN_IF_ERROR(m.CountFailedWrite(std::move(st), poor));
  m.ReclaimUnits();
  return Status::Ok();
}

Status PageStore::Impl::StoreOne(std::uint64_t index, ConstPage page,
                                 bool* poor) {
  Pending p;
  ZT_RETURN_IF_ERROR(Prepare(page, &p, poor));
  Slot& s = slots[index];
  const std::uint32_t now = Now();
  {
    SlotLock lock(s);
    InstallLocked(s, p, now);
  }
  Add(stores);
  return Status::Ok();
}

Status PageStore::StorePartial(std::uint64_t index, std::size_t offset,
                               std::span<const std::byte> data) {
  Impl& m = *impl_;
  ZT_RETURN_IF_ERROR(m.CheckSlot(index));
  if (offset > kPageSize || data.size() > kPageSize - offset) {
    return Status::OutOfRange("partial write past the end of a page");
  }
  Slot& s = m.slots[index];
  alignas(8) std::byte page[kPageSize];
  // Lock order (docs/architecture.md): no stream is taken under a slot
  // lock. So the old page is read under the lock, merged and compressed
  // without it, and installed under it again only if the slot still holds
  // the content the merge started from; otherwise a concurrent write came
  // in between (a partial write of another part of the page, say), and the
  // merge is redone from the newer content so that neither write is lost.
  //
  // "Still holds" is decided soundly, not by the Version alone (its SEQ is
  // 5 bits, and a hot page's handle comes back as the pool reuses freed
  // indexes): an equal Version and, for a pool object, equal object bytes
  // mean equal content. A written-back page cannot be compared without
  // reading the disk again, and a page that keeps changing under us would
  // retry without end; both take the locked path instead, which holds a
  // stream first and then the slot lock from read to install (stream before
  // slot, as the lock order allows).
  alignas(8) std::byte seen_object[kPageSize];
  bool installed = false;
  for (int attempt = 0; attempt < kPartialTries; ++attempt) {
    Impl::SeenContent seen;
    {
      SlotLock lock(s);
      if (SlotTable::Flags(s) & slot::kWb) break;  // the locked path
      ZT_RETURN_IF_ERROR(m.LoadLocked(index, s, page, /*as_write=*/true));
      seen = m.SeeLocked(s, seen_object);
    }
    std::memcpy(page + offset, data.data(), data.size());
    Pending p;
    bool poor = false;
    Status st = m.Prepare(ConstPage(page, kPageSize), &p, &poor);
    ZT_RETURN_IF_ERROR(m.CountFailedWrite(std::move(st), poor));
    {
      SlotLock lock(s);
      if (m.StillSeesLocked(s, seen, seen_object)) {
        m.InstallLocked(s, p, m.Now());
        Add(m.stores);
        installed = true;
      }
    }
    if (installed) break;
    m.DropPending(p);
  }
  if (!installed) {
    // The locked path: a stream, then the slot lock from read to install.
    internal::StreamPool::Lease lease = m.streams->Acquire();
    m.StreamDict(*lease);  // a newer dictionary's codec, built unlocked
    SlotLock lock(s);
    ZT_RETURN_IF_ERROR(m.LoadLocked(index, s, page, /*as_write=*/true));
    std::memcpy(page + offset, data.data(), data.size());
    Pending p;
    bool poor = false;
    Status st = m.PrepareWith(lease, ConstPage(page, kPageSize), &p, &poor);
    ZT_RETURN_IF_ERROR(m.CountFailedWrite(std::move(st), poor));
    m.InstallLocked(s, p, m.Now());
    Add(m.stores);
  }
  m.ReclaimUnits();
  return Status::Ok();
}

Status PageStore::StoreBatch(std::uint64_t first,
                             std::span<const std::byte> pages,
                             BatchRefusal on_refusal) {
  Impl& m = *impl_;
  assert(pages.size() % kPageSize == 0);
  const std::size_t count = pages.size() / kPageSize;
  ZT_RETURN_IF_ERROR(m.CheckSlots(first, count));
  Impl::BatchWrite w{.now = m.Now()};
  Status st = m.StoreRange(first, pages, &w);
  if (st.ok()) {
    Add(m.stores, count);
    Add(m.huge_pages_since, w.huge);
  } else if (st.code() == StatusCode::kResourceExhausted && !w.poor &&
             on_refusal == BatchRefusal::kKeepPrefix) {
    // The range is empty now; its pages one at a time, as a block device
    // writes a request's, until one fails. One failure is counted.
    for (std::size_t i = 0; i < count; ++i) {
      w.poor = false;
      st = m.StoreOne(first + i,
                      ConstPage(pages.data() + i * kPageSize, kPageSize),
                      &w.poor);
      if (!st.ok()) break;
    }
  }
  m.ReclaimUnits();
  return m.CountFailedWrite(std::move(st), w.poor);
}

Status PageStore::Impl::StoreRange(std::uint64_t first,
                                   std::span<const std::byte> pages,
                                   BatchWrite* w) {
  Impl& m = *this;
  const std::size_t count = pages.size() / kPageSize;
  Status st;
  const std::uint64_t unit = m.unit_pages;
  // With units: the whole aligned runs in the range are units, the pages
  // before the first and after the last are stored one object each.
  const std::uint64_t a = unit == 0 ? 0 : (first + unit - 1) / unit * unit;
  const std::uint64_t b = unit == 0 ? 0 : (first + count) / unit * unit;
  auto sub = [&](std::uint64_t lo, std::uint64_t hi) {
    return pages.subspan((lo - first) * kPageSize, (hi - lo) * kPageSize);
  };
  // All or nothing, as StorePages is: each part installs its pages as it
  // goes, so a part that fails, or throws (std::bad_alloc: a thread's
  // first unit buffers, or StorePages' pending list, made before StorePages
  // can empty anything), empties the whole range, the parts before it
  // included; no page of the range keeps its old data.
  try {
    if (unit == 0 || a >= b) {
      st = m.StorePages(first, pages, w);
    } else {
      if (a > first) st = m.StorePages(first, sub(first, a), w);
      for (std::uint64_t u = a; st.ok() && u < b; u += unit) {
        st = m.StoreUnit(u, sub(u, u + unit).data(), w);
      }
      if (st.ok() && first + count > b) {
        st = m.StorePages(b, sub(b, first + count), w);
      }
    }
  } catch (...) {
    m.EmptyRange(first, count);
    throw;
  }
  if (!st.ok()) m.EmptyRange(first, count);
  return st;
}

void PageStore::Impl::EmptyRange(std::uint64_t first, std::size_t count) {
  for (std::size_t i = 0; i < count; ++i) {
    Slot& s = slots[first + i];
    SlotLock lock(s);
    FreeSlotLocked(s);
  }
}

Status PageStore::Impl::StorePages(std::uint64_t first,
                                   std::span<const std::byte> pages,
                                   BatchWrite* w) {
  Impl& m = *this;
  const std::uint32_t now = w->now;
  const std::size_t count = pages.size() / kPageSize;
  thread_local std::vector<Pending> pending;
  pending.assign(count, Pending{});
  const std::size_t bs = m.streams->batch_size();
  BatchItem items[kMaxBatchSize];
  std::size_t page_of[kMaxBatchSize];
  Status st;
  bool poor = false;
  // All or nothing: drop what this call allocated and empty the range
  // (pages already installed included), so that no older copy of any page
  // of the unit can be read later; on a failure, or on an exception (a
  // chunk's stream made on first use, out of memory) with earlier chunks
  // installed.
  auto abandon = [&] {
    for (const Pending& p : pending) m.DropPending(p);
    m.pool->ReleaseSpares();
    m.EmptyRange(first, count);
  };
  try {
    for (std::size_t c = 0; c < count && st.ok(); c += bs) {
      const std::size_t end = std::min(count, c + bs);
      auto lease = m.streams->Acquire();  // one stream per chunk
      const std::uint32_t dict = m.StreamDict(*lease);
      std::size_t n = 0;
      for (std::size_t i = c; i < end; ++i) {
        const std::byte* src = pages.data() + i * kPageSize;
        std::uint64_t fill;
        if (IsSameFilled(src, &fill)) {
          pending[i] = {fill, slot::kSame};
          continue;
        }
        items[n] = BatchItem{std::span<const std::byte>(src, kPageSize),
                             lease->buffer(n)};
        page_of[n++] = i;
      }
      if (n == 0) continue;
      // The lane that compressed a page also allocates its object, copies it
      // into the pool and installs it in the slot, so the parallel backend
      // spreads all of that, and the caller has no serial tail to run after
      // the batch. Installing early keeps all-or-nothing: a failed batch
      // empties its whole range below. (The sink captures one pointer so
      // std::function does not allocate; it must not name the thread_local
      // `pending`, which is per thread.)
      Status item_status[kMaxBatchSize];
      bool item_poor[kMaxBatchSize] = {};
      struct SinkContext {
        Impl* m;
        const std::byte* pages;
        BatchItem* items;
        std::size_t* page_of;
        Pending* pending;
        Status* status;
        bool* poor;
        internal::Stream* stream;
        Slot* slots;  // the slot of page i is slots[i]
        std::uint32_t now;
        std::uint32_t dict;
      } ctx{&m,          pages.data(), items,   page_of,         pending.data(),
            item_status, item_poor,    &*lease, &m.slots[first], now,
            dict};
      const BatchCompressor::ItemSink sink = [c = &ctx](std::size_t k) {
        const std::size_t i = c->page_of[k];
        Pending& p = c->pending[i];
        c->status[k] =
            c->m->MakeObject(ConstPage(c->pages + i * kPageSize, kPageSize),
                             c->stream->buffer(k).first(c->items[k].length),
                             c->dict, &p, &c->poor[k]);
        if (!c->status[k].ok()) return;
        SlotLock lock(c->slots[i]);
        c->m->InstallLocked(c->slots[i], p, c->now, /*count_since=*/false);
        p.installed = true;
      };
      lease->batch->Compress(std::span<BatchItem>(items, n), &sink);
      for (std::size_t k = 0; k < n; ++k) {
        if (!item_status[k].ok() && st.ok()) {
          st = item_status[k];
          poor = item_poor[k];
        }
      }
      // The chunk's objects are a peak even when a page of it failed
      // (zram's update_used_max() runs before its store may fail).
      if (st.ok()) {
        st = m.CheckLimitAfterAlloc();
      } else {
        m.NotePeak();
      }
    }
  } catch (...) {
    abandon();
    throw;
  }
  if (!st.ok()) {
    abandon();
    w->poor = poor;
    return st;
  }
  for (std::size_t i = 0; i < count; ++i) {
    if (pending[i].content & slot::kHuge) ++w->huge;
    if (pending[i].installed) continue;
    Slot& s = m.slots[first + i];
    SlotLock lock(s);
    m.InstallLocked(s, pending[i], now, /*count_since=*/false);
  }
  return Status::Ok();
}

Status PageStore::Load(std::uint64_t index, MutablePage out) {
  Impl& m = *impl_;
  ZT_RETURN_IF_ERROR(m.CheckSlot(index));
  Slot& s = m.slots[index];
  SlotLock lock(s);
  return m.LoadLocked(index, s, out.data());
}

Status PageStore::LoadBatch(std::uint64_t first, std::span<std::byte> out,
                            std::span<Status> statuses) {
  Impl& m = *impl_;
  assert(out.size() % kPageSize == 0);
  const std::size_t count = out.size() / kPageSize;
  assert(statuses.empty() || statuses.size() == count);
  ZT_RETURN_IF_ERROR(m.CheckSlots(first, count));
  Status first_error;
  auto report = [&](std::size_t i, Status st) {
    if (!st.ok() && first_error.ok()) first_error = st;
    if (!statuses.empty()) statuses[i] = std::move(st);
  };
  // A unit the batch covers whole is decompressed straight into `out`.
  auto unit_run = [&](std::size_t i) {
    Status st[internal::kMaxUnitPages];
    const std::size_t n =
        m.LoadUnitRun(first + i, out.data() + i * kPageSize, st);
    for (std::size_t k = 0; k < n; ++k) report(i + k, std::move(st[k]));
    return n;
  };
  if (m.workers == nullptr) {
    // Serial: decompressing straight from the pool, page by page, is the
    // batch; copying the objects out first would only add work.
    for (std::size_t i = 0; i < count;) {
      if (m.MayStartUnit(first + i, count - i)) {
        i += unit_run(i);
        continue;
      }
      Slot& s = m.slots[first + i];
      SlotLock lock(s);
      report(i, m.LoadLocked(first + i, s, out.data() + i * kPageSize));
      ++i;
    }
    return first_error;
  }
  const std::size_t bs = m.streams->batch_size();
  // Compressed objects are copied out under each slot's lock, then
  // decompressed together, so no slot stays locked for the whole batch;
  // each page that decompressed is then marked accessed under its lock.
  thread_local std::unique_ptr<std::byte[]> scratch(
      new std::byte[kMaxBatchSize * kPageSize]);
  BatchItem items[kMaxBatchSize];
  std::size_t page_of[kMaxBatchSize];
  internal::SlotVersion read_of[kMaxBatchSize];  // what each copy was of
  std::size_t loaded_to = 0;  // pages before it came with a unit run
  for (std::size_t c = 0; c < count; c += bs) {
    const std::size_t end = std::min(count, c + bs);
    std::size_t n = 0;
    // The chunk's codec: that of its first compressed page. Decompressing
    // outside the slot locks, it pins that page's dictionary id (counted
    // as an object) until done, so that the id keeps its codec.
    int dict = -1;
    // The pin goes on every way out of the chunk: an exception (a
    // thread's first decompressor, an error message) would otherwise keep
    // the id from ever being freed.
    struct Unpin {
      Impl& m;
      int& dict;
      ~Unpin() { Now(); }
      void Now() {
        if (dict >= 0) m.UncountDict(DictBits(dict));
        dict = -1;
      }
    } unpin{m, dict};
    for (std::size_t i = std::max(c, loaded_to); i < end; ++i) {
      if (m.MayStartUnit(first + i, count - i)) {
        loaded_to = i + unit_run(i);
        i = loaded_to - 1;
        continue;
      }
      Slot& s = m.slots[first + i];
      std::byte* dst = out.data() + i * kPageSize;
      SlotLock lock(s);
      const std::uint32_t f = SlotTable::Flags(s);
      // The batch is of the primary codec's objects with one dictionary; a
      // recompressed slot, or one of another dictionary, is decompressed
      // here with its own codec.
      const bool compressed = Allocated(f) && Priority(f) == 0 &&
                              !(f & (slot::kSame | slot::kHuge | slot::kWb |
                                     slot::kUnit)) &&
                              (dict < 0 || Dict(f) == dict);
      if (!compressed) {
        report(i, m.LoadLocked(first + i, s, dst));
        continue;
      }
      if (dict < 0) {
        dict = Dict(f);
        m.CountDict(f);  // the pin
      }
      std::span<std::byte> obj(scratch.get() + n * kPageSize, kPageSize);
      const std::size_t len =
          m.pool->ReadInto(s.value.load(std::memory_order_relaxed), obj);
      items[n] =
          BatchItem{obj.first(len), std::span<std::byte>(dst, kPageSize)};
      read_of[n] = SlotTable::Version(s);
      page_of[n++] = i;
    }
    if (n == 0) continue;
    DecompressBatch(m.CodecOf(DictBits(dict)), std::span<BatchItem>(items, n),
                    m.workers.get());
    unpin.Now();
    for (std::size_t k = 0; k < n; ++k) {
      Status st = items[k].status;
      if (st.ok()) {
        // Accessed once read, as LoadLocked(): a page that failed is no
        // access (zram_bio_read() calls zram_accessed() after a read that
        // succeeded). Only while the slot holds what was copied out (the
        // same SlotVersion): a page stored or discarded meanwhile was never
        // read. A pass that moved the page meanwhile changed the Version
        // too (its access is not marked), and a wrapped SEQ may let a mark
        // land on a newer page: a mark only, never data (StorePartial's
        // check compares the object's bytes too).
        Slot& s = m.slots[first + page_of[k]];
        SlotLock lock(s);
        if (SlotTable::Version(s) == read_of[k]) {
          m.LoadedLocked(s);
        } else {
          Add(m.loads);
        }
      } else {
        Add(m.failed_reads);
        st = m.DecompressError(std::move(st),
                               "slot " + std::to_string(first + page_of[k]));
      }
      report(page_of[k], std::move(st));
    }
  }
  return first_error;
}

Status PageStore::Discard(std::uint64_t index) {
  Impl& m = *impl_;
  ZT_RETURN_IF_ERROR(m.CheckSlot(index));
  Slot& s = m.slots[index];
  {
    SlotLock lock(s);
    m.FreeSlotLocked(s);
  }
  Add(m.notify_free);
  m.ReclaimUnits();
  return Status::Ok();
}

Status PageStore::TryDiscard(std::uint64_t index) {
  Impl& m = *impl_;
  ZT_RETURN_IF_ERROR(m.CheckSlot(index));
  Slot& s = m.slots[index];
  Add(m.notify_free);
  if (!SlotTable::TryLock(s)) {
    Add(m.miss_free);
    return Status::Ok();
  }
  m.FreeSlotLocked(s);
  SlotTable::Unlock(s);
  // No reclaim here: it may wait for a stream and locks. The next other
  // call does it.
  return Status::Ok();
}

namespace {
// Slots idle marking may touch: allocated, not SAME, not WB.
bool IdleEligible(std::uint32_t f) {
  return Allocated(f) && !(f & (slot::kSame | slot::kWb));
}
}  // namespace

void PageStore::MarkIdleAll() {
  Impl& m = *impl_;
  for (std::size_t i = 0; i < m.slots.size(); ++i) {
    Slot& s = m.slots[i];
    // A relaxed peek skips never-used slots without touching their lock.
    if (!Allocated(s.flags.load(std::memory_order_relaxed))) continue;
    SlotLock lock(s);
    if (IdleEligible(SlotTable::Flags(s))) SlotTable::SetFlags(s, slot::kIdle);
  }
}

void PageStore::MarkIdleOlderThan(std::uint32_t age_seconds) {
  Impl& m = *impl_;
  const std::uint32_t now = m.Now();
  for (std::size_t i = 0; i < m.slots.size(); ++i) {
    Slot& s = m.slots[i];
    if (!Allocated(s.flags.load(std::memory_order_relaxed))) continue;
    SlotLock lock(s);
    if (!IdleEligible(SlotTable::Flags(s))) continue;
    // Idle when the last access is more than age_seconds ago. zram's
    // idle_store() compares nanoseconds (cutoff = now - age, idle when
    // cutoff is after ac_time), so age 0 marks every slot accessed before
    // now, as "all" does; in whole seconds a slot accessed this second
    // would otherwise stay busy.
    if (age_seconds == 0 ||
        (now >= s.ac_time && now - s.ac_time > age_seconds)) {
      SlotTable::SetFlags(s, slot::kIdle);
    } else {
      SlotTable::ClearFlags(s, slot::kIdle);
    }
  }
}

std::size_t PageStore::Compact() { return impl_->pool->Compact(); }

std::size_t PageStore::CompactablePages() const {
  return impl_->pool->CompactablePages();
}

void PageStore::SetMemLimit(std::size_t bytes) {
  impl_->SetMemLimitBytes(bytes);
}

void PageStore::ResetMemUsedMax() {
  impl_->mem_used_max.store(impl_->UsedBytes(), std::memory_order_relaxed);
}

SlotInfo PageStore::Inspect(std::uint64_t index) const {
  SlotInfo info;
  if (index >= impl_->slots.size()) return info;
  Slot& s = impl_->slots[index];
  SlotLock lock(s);
  const std::uint32_t f = SlotTable::Flags(s);
  info.allocated = Allocated(f);
  info.same = f & slot::kSame;
  info.huge = f & slot::kHuge;
  info.idle = f & slot::kIdle;
  info.wb = f & slot::kWb;
  info.pp = f & slot::kPp;
  info.incompressible = f & slot::kIncompressible;
  info.priority = Priority(f);
  info.dict = Dict(f);
  info.size = f & slot::kSizeMask;
  if (f & slot::kUnit) {
    const internal::Unit& e = impl_->units[index / impl_->unit_pages];
    info.unit = true;
    info.dict = e.dict;
    info.unit_live = static_cast<std::size_t>(
        std::popcount(e.live.load(std::memory_order_relaxed)));
  }
  info.ac_time = s.ac_time;
  if (info.same) info.fill = s.value.load(std::memory_order_relaxed);
  return info;
}

bool PageStore::MayReadBacking(std::uint64_t first, std::size_t count) const {
  const Impl& m = *impl_;
  if (m.options.backing == nullptr || first >= m.slots.size()) return false;
  const std::uint64_t end =
      first + std::min<std::uint64_t>(count, m.slots.size() - first);
  for (std::uint64_t i = first; i < end; ++i) {
    // A unit's members carry WB too (slot_table.h).
    if ((m.slots[i].flags.load(std::memory_order_relaxed) & slot::kWb) != 0) {
      return true;
    }
  }
  return false;
}

Status PageStore::SlotStates(std::uint64_t first,
                             std::span<SlotState> out) const {
  const Impl& m = *impl_;
  ZT_RETURN_IF_ERROR(m.CheckSlots(first, out.size()));
  for (std::size_t i = 0; i < out.size(); ++i) {
    Slot& s = m.slots[first + i];
    // With LOCK clear, the word is what the last holder's release left: its
    // content bits are consistent (holders change them only while locked).
    std::uint32_t f = s.flags.load(std::memory_order_acquire);
    if ((f & slot::kLock) == 0 && (f & slot::kSame) == 0) {
      out[i] = Allocated(f) ? SlotState::kData : SlotState::kEmpty;
      continue;
    }
    // A written-back slot is data even while locked, and its holder may be
    // reading it from the backing store (LoadLocked, for up to the backing
    // store's timeout), so its lock is not waited for. WB is set only on a
    // slot that holds data (WritebackPass::Complete and WritebackUnits in
    // writeback.cc) and leaves only by a SetContent that frees or replaces
    // the content, one atomic write of all content bits (slot_table.h): a
    // holder's intermediate states (freed, not yet installed) never carry
    // it.
    if ((f & slot::kWb) != 0) {
      out[i] = SlotState::kData;
      continue;
    }
    SlotLock lock(s);
    f = SlotTable::Flags(s);
    if (!Allocated(f)) {
      out[i] = SlotState::kEmpty;
    } else if ((f & slot::kSame) != 0 &&
               s.value.load(std::memory_order_relaxed) == 0) {
      out[i] = SlotState::kZero;
    } else {
      out[i] = SlotState::kData;
    }
  }
  return Status::Ok();
}

PageStoreStats PageStore::Stats() const {
  const Impl& m = *impl_;
  PageStoreStats st;
  const PoolStats ps = m.pool->Stats();
  st.orig_data_size = Get(m.pages_stored) << kPageShift;
  st.compr_data_size = Get(m.compr_data_size);
  st.dict_memory = m.dict_memory.load(std::memory_order_relaxed);
  st.mem_used_total = m.UsedBytes();
  st.mem_limit = Get(m.mem_limit);
  st.mem_used_max = Get(m.mem_used_max);
  st.same_pages = Get(m.same_pages);
  st.pages_compacted = ps.pages_compacted;
  st.huge_pages = Get(m.huge_pages);
  st.huge_pages_since = Get(m.huge_pages_since);
  st.failed_reads = Get(m.failed_reads);
  st.failed_writes = Get(m.failed_writes);
  st.notify_free = Get(m.notify_free);
  st.miss_free = Get(m.miss_free);
  st.stored_pages = Get(m.pages_stored);
  st.pool_total_size = st.mem_used_total;
  st.reject_compress_poor = Get(m.reject_compress_poor);
  st.reject_compress_fail = Get(m.reject_compress_fail);
  st.reject_alloc_fail = Get(m.reject_alloc_fail);
  st.pool_limit_hit = Get(m.pool_limit_hit);
  st.same_filled_pages = st.same_pages;
  st.decompress_fail = Get(m.decompress_fail);
  st.bd_count = m.options.backing ? m.options.backing->blocks_used() : 0;
  st.bd_lost = m.options.backing ? m.options.backing->lost_blocks() : 0;
  st.bd_reads = Get(m.bd_reads);
  st.bd_writes = Get(m.bd_writes);
  st.stores = Get(m.stores);
  st.loads = Get(m.loads);
  // Pool objects are the allocated slots that are neither SAME nor WB; the
  // primary's share (HUGE pages, stored raw, included) is what the
  // secondary codecs do not hold. (Counters
  // read one by one: clamp a transient skew at 0.)
  std::uint64_t secondary = 0;
  for (int p = 1; p < kMaxCodecPriorities; ++p) {
    st.priority_pages[p] = Get(m.priority_pages[p]);
    secondary += st.priority_pages[p];
  }
  const std::uint64_t off_pool = st.same_pages + Get(m.wb_pages) + secondary;
  st.priority_pages[0] =
      st.stored_pages > off_pool ? st.stored_pages - off_pool : 0;
  st.incompressible_pages = Get(m.incompressible_pages);
  st.recompress_attempts = Get(m.recompress_attempts);
  st.recompressed_pages = Get(m.recompressed_pages);
  st.dict_id = m.dict_current.load(std::memory_order_relaxed);
  for (int d = 1; d < kDictIds; ++d) {
    st.dict_pages[d] = m.dict_objects[d].load(std::memory_order_relaxed);
  }
  st.units = Get(m.units_live);
  st.unit_pages = Get(m.unit_pages_live);
  st.units_reclaimed = Get(m.units_reclaimed);
  st.units_reclaim_refused = Get(m.units_reclaim_refused);
  return st;
}

std::size_t PageStore::MetadataBytes() const {
  return impl_->slots.bytes() + impl_->pool->Stats().metadata_bytes;
}

}  // namespace ztier
