// page_store_impl.h: the PageStore's state, shared by the files that
// implement it (page_store.cc: stores, loads, discards, idle marking;
// writeback.cc: the writeback pass; recompress.cc: the recompression
// pass). Not part of the public API.
#ifndef ZTIER_STORE_PAGE_STORE_IMPL_H_
#define ZTIER_STORE_PAGE_STORE_IMPL_H_

#include <atomic>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "platform/clock.h"
#include "platform/sharded_counter.h"
#include "slot_table.h"
#include "stream_pool.h"
#include "unit_table.h"
#include "ztier/page_store.h"
#include "ztier/worker_pool.h"

namespace ztier {

using internal::Slot;
using internal::SlotLock;
using internal::SlotTable;
namespace slot = internal::slot;

namespace store_detail {
inline std::uint64_t LoadWord(const std::byte* p) {
  std::uint64_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

// zram's page_same_filled(): every 8-byte word equals the first; the last
// word is checked first because most pages differ there early.
inline bool IsSameFilled(const std::byte* page, std::uint64_t* fill) {
  constexpr std::size_t kWords = kPageSize / sizeof(std::uint64_t);
  const std::uint64_t v = LoadWord(page);
  if (LoadWord(page + (kWords - 1) * 8) != v) return false;
  for (std::size_t i = 1; i < kWords - 1; ++i) {
    if (LoadWord(page + i * 8) != v) return false;
  }
  *fill = v;
  return true;
}

inline void FillWords(std::byte* out, std::uint64_t v) {
  if (v == 0) {
    std::memset(out, 0, kPageSize);
    return;
  }
  for (std::size_t i = 0; i < kPageSize; i += 8) std::memcpy(out + i, &v, 8);
}

inline void Add(std::atomic<std::uint64_t>& c, std::uint64_t v = 1) {
  c.fetch_add(v, std::memory_order_relaxed);
}
inline void Sub(std::atomic<std::uint64_t>& c, std::uint64_t v = 1) {
  c.fetch_sub(v, std::memory_order_relaxed);
}
inline std::uint64_t Get(const std::atomic<std::uint64_t>& c) {
  return c.load(std::memory_order_relaxed);
}
inline void Add(internal::ShardedCounter& c, std::uint64_t v = 1) { c.Add(v); }
inline void Sub(internal::ShardedCounter& c, std::uint64_t v = 1) { c.Sub(v); }
inline std::uint64_t Get(const internal::ShardedCounter& c) { return c.Sum(); }

inline bool Allocated(std::uint32_t f) {
  return (f & slot::kSizeMask) != 0 || (f & (slot::kSame | slot::kWb)) != 0;
}

// The codec priority a slot's flags record (0: the primary).
inline int Priority(std::uint32_t f) {
  return static_cast<int>((f & slot::kPrioMask) >> slot::kPrioShift);
}
inline std::uint32_t PriorityBits(int priority) {
  return static_cast<std::uint32_t>(priority) << slot::kPrioShift;
}

// The dictionary id a slot's flags record (0: none).
inline int Dict(std::uint32_t f) {
  return static_cast<int>((f & slot::kDictMask) >> slot::kDictShift);
}
inline std::uint32_t DictBits(int id) {
  return static_cast<std::uint32_t>(id) << slot::kDictShift;
}
inline constexpr int kDictIds = 4;  // 0 (none) and 1..3

// Post-processing candidates (writeback, recompression) in the order zram's
// select_pp_slot() takes them: largest object first, by 64-byte buckets of
// size, in the order they were added within a bucket (a counting sort).
class LargestFirst {
 public:
  void Add(std::uint64_t index, std::uint32_t flags) {
    const auto bucket =
        static_cast<std::uint16_t>((flags & slot::kSizeMask) / kBucketBytes);
    picked_.emplace_back(index, bucket);
    ++count_[bucket];
  }
  std::vector<std::uint64_t> Order() const {
    std::vector<std::size_t> start(kBuckets, 0);
    std::size_t at = 0;
    for (std::size_t b = kBuckets; b-- > 0;) {
      start[b] = at;
      at += count_[b];
    }
    std::vector<std::uint64_t> order(picked_.size());
    for (const auto& [index, bucket] : picked_) order[start[bucket]++] = index;
    return order;
  }

 private:
  static constexpr std::size_t kBucketBytes = 64;
  static constexpr std::size_t kBuckets = kPageSize / kBucketBytes + 1;
  std::vector<std::uint32_t> count_ = std::vector<std::uint32_t>(kBuckets, 0);
  std::vector<std::pair<std::uint64_t, std::uint16_t>> picked_;
};

// A page on its way into a slot: what StoreBatch holds until the whole batch
// has succeeded.
struct Pending {
  std::uint64_t value = 0;
  std::uint32_t content = 0;  // size | SAME | HUGE
  bool installed = false;     // already in its slot (StoreBatch's lanes)
};

}  // namespace store_detail

// The store's own files use these unqualified.
using store_detail::Add;
using store_detail::Allocated;
using store_detail::Dict;
using store_detail::DictBits;
using store_detail::kDictIds;
using store_detail::FillWords;
using store_detail::Get;
using store_detail::IsSameFilled;
using platform::BootSeconds;
using store_detail::Pending;
using store_detail::Priority;
using store_detail::PriorityBits;
using store_detail::Sub;

struct PageStore::Impl {
  PageStoreOptions options;
  std::shared_ptr<const Codec> codec;
  // codecs[p]: the codec of priority p (codecs[0] == codec); null where
  // none is set. A slot records its priority only if that codec exists.
  std::shared_ptr<const Codec> codecs[kMaxCodecPriorities];
  int top_priority = 0;  // the highest priority with a codec
  std::unique_ptr<Pool> pool;
  std::unique_ptr<WorkerPool> workers;  // parallel backend only
  std::unique_ptr<internal::StreamPool> streams;
  BatchOptions stream_batch;  // what the streams' compressors are made with
  SlotTable slots;
  std::size_t huge_size = 0;
  std::function<std::uint32_t()> clock;

  std::atomic<std::uint64_t> mem_limit{0};
  std::atomic<std::uint64_t> mem_used_max{0};
  // Updated by every page stored or freed, from as many threads as store at
  // once: sharded, so that they do not pass one cache line around.
  internal::ShardedCounter pages_stored;
  internal::ShardedCounter compr_data_size;
  internal::ShardedCounter same_pages;
  internal::ShardedCounter huge_pages;
  internal::ShardedCounter huge_pages_since;
  std::atomic<std::uint64_t> failed_reads{0};
  std::atomic<std::uint64_t> failed_writes{0};
  std::atomic<std::uint64_t> notify_free{0};
  std::atomic<std::uint64_t> miss_free{0};
  std::atomic<std::uint64_t> reject_compress_poor{0};
  std::atomic<std::uint64_t> reject_compress_fail{0};
  std::atomic<std::uint64_t> reject_alloc_fail{0};
  std::atomic<std::uint64_t> pool_limit_hit{0};
  std::atomic<std::uint64_t> decompress_fail{0};
  internal::ShardedCounter stores;
  internal::ShardedCounter loads;
  // bd_stat (reads and writes in pages; bd_count is the backing store's).
  std::atomic<std::uint64_t> bd_reads{0};
  std::atomic<std::uint64_t> bd_writes{0};
  // Recompression: pool objects at priorities 1..3 (index 0 unused; the
  // primary's count is derived in Stats()), INCOMPRESSIBLE slots, WB slots.
  std::atomic<std::uint64_t> priority_pages[kMaxCodecPriorities] = {};
  std::atomic<std::uint64_t> incompressible_pages{0};
  std::atomic<std::uint64_t> wb_pages{0};
  std::atomic<std::uint64_t> recompress_attempts{0};
  std::atomic<std::uint64_t> recompressed_pages{0};
  // One post-processing pass (writeback or recompression) at a time; it
  // guards recomp_batch too.
  std::mutex writeback_mu;
  // The recompression pass's batch compressors, by priority, made on first
  // use.
  std::unique_ptr<BatchCompressor> recomp_batch[kMaxCodecPriorities];

  // ---- dictionaries (page_store.h; dictionary.cc) ----
  // What an id stands for: the dictionary and, per priority, the codec
  // that objects of that id and priority were made with (the base codec
  // where the algorithm takes no dictionary, or for id 0).
  struct DictEntry {
    std::shared_ptr<const Codec> codecs[kMaxCodecPriorities];
    std::size_t memory = 0;  // counted in dict_memory
  };
  // An id is given a new entry only when no object uses it (dict_objects
  // is 0), no stream holds it (the entry's use_count is 1) and it is not
  // the current one, under writeback_mu and dict_mu; so the codec a
  // locked slot's id names cannot change under its reader.
  std::mutex dict_mu;  // guards dicts; streams copy entries under it
  std::shared_ptr<const DictEntry> dicts[kDictIds];
  std::atomic<const Codec*> codec_of[kDictIds][kMaxCodecPriorities] = {};
  std::atomic<int> dict_current{0};
  // Advanced (release) after a new current entry is in place; a stream
  // whose compressor is older remakes it (RefreshStream).
  std::atomic<std::uint64_t> dict_generation{0};
  // Objects made with each id, in RAM or written back compressed, plus
  // pins of LoadBatch decompressing outside the slot lock. Decrements
  // release and the trainer's read acquires, so that every use of an
  // entry happens before the entry is replaced.
  std::atomic<std::uint64_t> dict_objects[kDictIds] = {};
  std::atomic<std::uint64_t> dict_memory{0};

  // The codec slot flags f were stored with. REQUIRES: the slot is locked
  // (or its id pinned), so that its entry stays.
  const Codec& CodecOf(std::uint32_t f) const {
    return *codec_of[Dict(f)][Priority(f)].load(std::memory_order_acquire);
  }
  void CountDict(std::uint32_t f) {
    if (const int d = Dict(f)) {
      dict_objects[d].fetch_add(1, std::memory_order_relaxed);
    }
  }
  void UncountDict(std::uint32_t f) {
    if (const int d = Dict(f)) {
      dict_objects[d].fetch_sub(1, std::memory_order_release);
    }
  }
  // The current entry and its id, for a pass (under writeback_mu).
  std::pair<std::shared_ptr<const DictEntry>, int> CurrentDict() {
    std::lock_guard l(dict_mu);
    const int id = dict_current.load(std::memory_order_relaxed);
    return {dicts[id], id};
  }
  // The dictionary bits for what stream s compresses, after bringing its
  // compressor up to the current dictionary if a newer one was trained.
  std::uint32_t StreamDict(internal::Stream& s) {
    if (s.dict_generation != dict_generation.load(std::memory_order_acquire)) {
      RefreshStream(s);
    }
    return DictBits(s.dict_id);
  }
  void RefreshStream(internal::Stream& s);  // dictionary.cc
  // mem_used_total: the pool and the dictionaries held.
  std::uint64_t UsedBytes() const {
    return pool->TotalBytes() + dict_memory.load(std::memory_order_relaxed) +
           units_live.load(std::memory_order_relaxed) *
               internal::UnitTable::kEntryBytes;
  }

  // What one StoreBatch carries through StoreRange: the time it stamps,
  // whether its failure was an incompressible page refused, and the HUGE
  // pages it installed, counted in huge_pages_since only if it succeeds
  // (a batch that fails stored none of them).
  struct BatchWrite {
    std::uint32_t now = 0;
    bool poor = false;
    std::uint64_t huge = 0;
  };

  // ---- units (page_store.h, unit_pages; units.cc) ----
  std::size_t unit_pages = 0;  // 0: off
  internal::UnitTable units;
  std::atomic<std::uint64_t> units_live{0};
  std::atomic<std::uint64_t> unit_pages_live{0};
  std::atomic<std::uint64_t> units_reclaimed{0};
  std::atomic<std::uint64_t> units_reclaim_refused{0};
  // Units below half their members, to be reclaimed (u, gen) by the next
  // public call that returns; reclaim_mu is a leaf lock, taken under a
  // slot lock. Both vectors hold one entry per unit of capacity from the
  // start, and ReclaimQueued swaps them, so queueing (on the IO path,
  // under slot locks) never allocates. A unit rewritten while queued
  // leaves a stale entry (an older gen of its run), so the queue can fill;
  // QueueReclaimLocked then drops the stale ones, and a current entry
  // always finds its place. reclaim_running (under reclaim_mu): one
  // ReclaimQueued pass at a time, which owns reclaim_work.
  std::mutex reclaim_mu;
  std::vector<std::pair<std::uint64_t, std::uint64_t>> reclaim_queue;
  std::atomic<bool> reclaim_pending{false};
  bool reclaim_running = false;
  std::vector<std::pair<std::uint64_t, std::uint64_t>> reclaim_work;

  // Stores the aligned run [first, first + unit_pages) from `pages` as one
  // unit (with the same-filled pages as SAME), or, if it does not pay,
  // page by page. On failure the run is as it was, or, if it was being
  // stored page by page, empty. REQUIRES: no slot lock and no stream held.
  Status StoreUnit(std::uint64_t first, const std::byte* pages, BatchWrite* w)
      ZT_EXCLUDES(*streams);
  // Stores consecutive pages one object each (StoreBatch without units).
  // All-or-nothing over its range, as StoreBatch.
  Status StorePages(std::uint64_t first, std::span<const std::byte> pages,
                    BatchWrite* w) ZT_EXCLUDES(*streams);
  // StoreBatch's all-or-nothing store of the range, counting neither its
  // stores nor a failure.
  Status StoreRange(std::uint64_t first, std::span<const std::byte> pages,
                    BatchWrite* w) ZT_EXCLUDES(*streams);
  // Frees the `count` slots from `first`, each under its lock: a failed
  // batch store's range, so that no older copy of its pages is read later.
  void EmptyRange(std::uint64_t first, std::size_t count);
  // Store() of a valid index, counting no failure.
  Status StoreOne(std::uint64_t index, ConstPage page, bool* poor)
      ZT_EXCLUDES(*streams);
  // Counts a store that failed (zram's failed_writes), unless the page was
  // refused as incompressible (reject_compress_poor counted that). Returns
  // st.
  Status CountFailedWrite(Status st, bool poor) {
    if (!st.ok() && !poor) Add(failed_writes);
    return st;
  }
  // The parts of FreeSlotLocked and LoadLocked for a UNIT slot.
  void FreeUnitMemberLocked(std::uint64_t index, std::uint32_t f);
  Status LoadUnitLocked(std::uint64_t index, std::byte* out);
  // Copies the object of unit `e`, held in the pool (not written back),
  // from its pieces into out (room for kMaxUnitPages pages); returns its
  // length (e.bytes). REQUIRES: a live member's slot locked (unit_table.h).
  std::size_t GatherUnitLocked(const internal::Unit& e, std::byte* out) const;
  // Decompresses the unit of UNIT slot `index` (its members, in order) into
  // out. REQUIRES: slot index locked.
  Status DecompressUnitLocked(std::uint64_t index, std::byte* out);
  // Loads the aligned run [first, first + unit_pages) into out, statuses[k]
  // for page k, each page under its own lock (never two at once), and
  // returns unit_pages; or, when `first` is not a UNIT slot of a unit that
  // holds every page of the run, loads `first` alone and returns 1. A whole
  // unit is decompressed once, straight into out: no copy through the
  // thread's unit cache. REQUIRES: no slot lock held; first % unit_pages ==
  // 0.
  std::size_t LoadUnitRun(std::uint64_t first, std::byte* out,
                          Status* statuses);
  // True when the aligned run at `first` is worth a LoadUnitRun: a peek
  // without the lock (LoadUnitRun checks again under it).
  bool MayStartUnit(std::uint64_t first, std::size_t left) const {
    return unit_pages != 0 && first % unit_pages == 0 && left >= unit_pages &&
           (slots[first].flags.load(std::memory_order_relaxed) & slot::kUnit);
  }
  // Reclaims the queued units; a no-op when none is. REQUIRES: no slot lock
  // and no stream held.
  void ReclaimUnits() ZT_EXCLUDES(*streams) {
    if (reclaim_pending.load(std::memory_order_relaxed)) ReclaimQueued();
  }
  void ReclaimQueued() ZT_EXCLUDES(*streams);
  // Puts (u, gen) on reclaim_queue, within its capacity. A full queue is
  // first compacted: of the entries of one run only the newest generation
  // is kept (gens grow, unit_table.h, so the others are stale, and the
  // current one of a run is its newest), which leaves at most one entry
  // per unit; if every unit then has one, (u, gen) takes the place of its
  // run's (newer of the two kept). Compacting sorts the queue (by run), in
  // place: O(n log n) under reclaim_mu, only when it is full.
  // REQUIRES: reclaim_mu held.
  void QueueReclaimLocked(std::uint64_t u, std::uint64_t gen);
  // One pass of ReclaimQueued over reclaim_work; false if the pool refused
  // a unit or a reclaim threw std::bad_alloc (caught here): the units not
  // tried, then the refused ones (two at most: the pass stops at the
  // second, or at the one that threw), are then queued again.
  // REQUIRES: the running pass (reclaim_running), no slot lock and no
  // stream.
  bool ReclaimPass() ZT_EXCLUDES(*streams);
  // Queues again the units given up because a page did not compress alone
  // (Unit::queued UnitPoorAlone), for the next call that returns: called
  // once a new dictionary is in use, which may let that page compress.
  // REQUIRES: no slot lock and no stream held.
  void RetryPoorUnits() ZT_EXCLUDES(*streams);
  // Reclaims unit u with `stream`; false if the pool had no room for its
  // survivors, memory for a decompressor was short, or a page did not
  // compress alone with a stream behind the current dictionary (the unit
  // is left as it was, to be tried again). REQUIRES: the run locked, u
  // live in RAM.
  bool ReclaimLocked(std::uint64_t u, internal::Stream& stream);
  // Writes back the units the scans cover (writeback.cc).
  void WritebackUnits(const WritebackRequest& req, BlockWriter& writer,
                      WritebackResult* result);
  // Clears PP on every slot of [lo, hi) that has it (a pass that ended
  // early: writeback.cc, recompress.cc). REQUIRES: writeback_mu (so that
  // every PP is the caller's pass's).
  void ClearPassMarks(std::uint64_t lo, std::uint64_t hi) {
    for (std::uint64_t i = lo; i < hi; ++i) {
      Slot& s = slots[i];
      if (!(s.flags.load(std::memory_order_relaxed) & slot::kPp)) continue;
      SlotLock lock(s);
      SlotTable::ClearFlags(s, slot::kPp);
    }
  }
  // Locks / unlocks every slot of unit u, in ascending order.
  void LockUnit(std::uint64_t u);
  void UnlockUnit(std::uint64_t u);
  // Every slot lock of unit u held for a scope: an exception under the
  // locks (a std::bad_alloc from an error message or a thread's first
  // buffer) leaves none held, where a slot left locked would hang every
  // later access to the run.
  class UnitLock {
   public:
    UnitLock(Impl& m, std::uint64_t u) : m_(m), u_(u) { m_.LockUnit(u_); }
    ~UnitLock() { m_.UnlockUnit(u_); }
    UnitLock(const UnitLock&) = delete;
    UnitLock& operator=(const UnitLock&) = delete;

   private:
    Impl& m_;
    const std::uint64_t u_;
  };
  std::uint64_t SlotIndex(const Slot& s) const {
    return static_cast<std::uint64_t>(&s - &slots[0]);
  }

  // kOutOfRange unless slot `index` / slots [first, first + count) exist.
  Status CheckSlot(std::uint64_t index) const {
    if (index < slots.size()) return Status::Ok();
    return Status::OutOfRange("slot " + std::to_string(index));
  }
  Status CheckSlots(std::uint64_t first, std::size_t count) const {
    if (first <= slots.size() && count <= slots.size() - first) {
      return Status::Ok();
    }
    return Status::OutOfRange("slots " + std::to_string(first) + "+" +
                              std::to_string(count));
  }

  void SetMemLimitBytes(std::size_t bytes) {
    mem_limit.store((bytes + kPageSize - 1) & ~(kPageSize - 1),
                    std::memory_order_relaxed);
  }

  std::uint32_t Now() const { return clock ? clock() : BootSeconds(); }

  // Frees whatever slot s holds. REQUIRES: s locked.
  void FreeSlotLocked(Slot& s) ZT_REQUIRES(s) {
    const std::uint32_t f = SlotTable::Flags(s);
    if (!Allocated(f)) return;
    if (f & slot::kUnit) {
      FreeUnitMemberLocked(SlotIndex(s), f);
      Sub(pages_stored);
      s.value.store(0, std::memory_order_relaxed);
      SlotTable::SetContent(s, 0);
      return;
    }
    UncountDict(f);
    if (f & slot::kHuge) Sub(huge_pages);
    if (f & slot::kIncompressible) Sub(incompressible_pages);
    if (f & slot::kSame) {
      Sub(same_pages);
    } else if (f & slot::kWb) {
      options.backing->Free(s.value.load(std::memory_order_relaxed));
      Sub(wb_pages);
    } else {
      pool->Free(s.value.load(std::memory_order_relaxed));
      Sub(compr_data_size, f & slot::kSizeMask);
      if (Priority(f) != 0) Sub(priority_pages[Priority(f)]);
    }
    Sub(pages_stored);
    s.value.store(0, std::memory_order_relaxed);
    SlotTable::SetContent(s, 0);
  }

  // Puts p into slot s, freeing the old content; without `count_since`,
  // a HUGE page is left for the caller to count in huge_pages_since.
  // REQUIRES: s locked.
  void InstallLocked(Slot& s, const Pending& p, std::uint32_t now,
                     bool count_since = true) ZT_REQUIRES(s) {
    FreeSlotLocked(s);
    s.value.store(p.value, std::memory_order_relaxed);
    SlotTable::SetContent(s, p.content);  // its dictionary is counted
    s.ac_time = now;
    if (p.content & slot::kSame) {
      Add(same_pages);
    } else {
      Add(compr_data_size, p.content & slot::kSizeMask);
      if (p.content & slot::kHuge) {
        Add(huge_pages);
        if (count_since) Add(huge_pages_since);
      }
    }
    Add(pages_stored);
  }

  // Raises mem_used_max to mem_used_total now, if that is higher; returns
  // mem_used_total. After anything that may have raised it: a store's
  // allocations (refused ones too), a dictionary made current.
  std::uint64_t NotePeak() {
    const std::uint64_t used = UsedBytes();
    std::uint64_t peak = mem_used_max.load(std::memory_order_relaxed);
    while (used > peak && !mem_used_max.compare_exchange_weak(
                              peak, used, std::memory_order_relaxed)) {
    }
    return used;
  }

  // After an allocation: zram tracks the peak here, then checks mem_limit
  // (zram_can_store_page(): update_used_max() comes first, so a refused
  // allocation's peak is recorded too).
  Status CheckLimitAfterAlloc() {
    const std::uint64_t used = NotePeak();
    const std::uint64_t limit = mem_limit.load(std::memory_order_relaxed);
    if (limit != 0 && used > limit) {
      Add(pool_limit_hit);
      // Refusals keep their messages within std::string's inline buffer
      // (15 bytes): a full swap device refuses stores all the time, and
      // must not allocate to do so.
      return Status::ResourceExhausted("over mem_limit");
    }
    return Status::Ok();
  }

  // Turns one page into a pool object: `compressed` is the codec's output
  // (empty: it did not fit), made with dictionary `dict_bits`. A page zswap
  // would reject as poorly compressed sets *poor; that is a refusal, not a
  // failed write.
  Status MakeObject(ConstPage page, std::span<const std::byte> compressed,
                    std::uint32_t dict_bits, Pending* out, bool* poor) {
    std::span<const std::byte> obj = compressed;
    std::uint32_t content = dict_bits;
    if (compressed.empty() || compressed.size() >= huge_size) {
      if (!options.store_incompressible) {
        Add(reject_compress_poor);
        *poor = true;
        return Status::ResourceExhausted("incompressible");  // see above
      }
      obj = page;
      content = slot::kHuge;  // raw: no dictionary
    }
    const Handle h = pool->Malloc(obj.size());
    if (h == kInvalidHandle) {
      Add(reject_alloc_fail);
      return Status::ResourceExhausted("pool is full");  // see above
    }
    pool->Write(h, obj);
    out->value = h;
    out->content = content | static_cast<std::uint32_t>(obj.size());
    // The object's dictionary is counted now, while the caller's stream
    // still holds its entry, not at install: in between, with no stream
    // and no count, TrainDictionary could give the id to a new dictionary
    // (dictionary.cc). The Pending owns the count until it is installed
    // or dropped.
    CountDict(out->content);
    return Status::Ok();
  }

  // Turns a page into what a slot will hold: the fill word, or a pool object
  // (compressed or raw) within mem_limit. On failure nothing is allocated,
  // and *poor says whether the page was refused as incompressible (the
  // caller counts the failure: CountFailedWrite).
  // A stream is taken for the compression only. REQUIRES: no slot lock
  // held (the lock order), and no stream (a second one could sleep while
  // holding the first).
  Status Prepare(ConstPage page, Pending* p, bool* poor) ZT_EXCLUDES(*streams) {
    std::uint64_t fill;
    if (IsSameFilled(page.data(), &fill)) {
      p->value = fill;
      p->content = slot::kSame;
      return Status::Ok();
    }
    internal::StreamPool::Lease lease = streams->Acquire();
    return PrepareWith(lease, page, p, poor);
  }

  // Prepare, compressing with the stream the caller holds (which may hold
  // slot locks taken after it: stream before slot).
  Status PrepareWith(internal::StreamPool::Lease& lease, ConstPage page,
                     Pending* p, bool* poor) ZT_REQUIRES(*streams) {
    std::uint64_t fill;
    if (IsSameFilled(page.data(), &fill)) {
      p->value = fill;
      p->content = slot::kSame;
      return Status::Ok();
    }
    const std::uint32_t dict = StreamDict(*lease);
    BatchItem item{page, lease->buffer(0)};
    lease->batch->Compress(std::span<BatchItem>(&item, 1));
    Status st =
        MakeObject(page, lease->buffer(0).first(item.length), dict, p, poor);
    if (st.ok()) {
      st = CheckLimitAfterAlloc();
      if (!st.ok()) {
        DropPending(*p);
        pool->ReleaseSpares();  // the freed object's zspage must not linger
      }
    }
    return st;
  }

  // The slot bits that say what its content is (not its idle or writeback
  // state).
  static constexpr std::uint32_t kContentBits = slot::kSizeMask | slot::kSame |
                                                slot::kWb | slot::kHuge |
                                                slot::kUnit | slot::kDictMask;

  // What StorePartial remembers of the content it merged from: its Version,
  // its content bits, and for a pool object (neither same-filled nor written
  // back) the object's bytes, copied into `object` (kPageSize bytes).
  struct SeenContent {
    internal::SlotVersion version;
    std::uint32_t content = 0;
    std::size_t object_bytes = 0;
  };
  SeenContent SeeLocked(const Slot& s, std::byte* object) const
      ZT_REQUIRES(s) {
    SeenContent seen{SlotTable::Version(s), SlotTable::Flags(s) & kContentBits,
                     0};
    if (IsPoolObject(seen.content)) {
      seen.object_bytes = pool->ReadInto(
          s.value.load(std::memory_order_relaxed),
          std::span<std::byte>(object, kPageSize));
    }
    return seen;
  }
  // Whether s still holds the content `seen` describes: the same Version
  // and content bits, and for a pool object the same bytes (equal objects
  // decompress to equal pages, whatever happened in between).
  bool StillSeesLocked(const Slot& s, const SeenContent& seen,
                       const std::byte* object) const ZT_REQUIRES(s) {
    if (!(SlotTable::Version(s) == seen.version) ||
        (SlotTable::Flags(s) & kContentBits) != seen.content) {
      return false;
    }
    if (!IsPoolObject(seen.content)) return true;
    alignas(8) std::byte now[kPageSize];
    const std::size_t n =
        pool->ReadInto(s.value.load(std::memory_order_relaxed),
                       std::span<std::byte>(now, kPageSize));
    return n == seen.object_bytes && std::memcmp(now, object, n) == 0;
  }
  static bool IsPoolObject(std::uint32_t content) {
    return Allocated(content) &&
           (content & (slot::kSame | slot::kWb | slot::kUnit)) == 0;
  }

  void DropPending(const Pending& p) {
    if (p.installed) return;  // the slot owns it now
    if (!(p.content & slot::kSame) && p.value != kInvalidHandle) {
      pool->Free(p.value);
      UncountDict(p.content);
    }
  }

  // Reads a WB slot's block (flags f, block b) into out (writeback.cc).
  Status LoadWrittenBack(std::uint64_t index, std::uint32_t f, std::uint64_t b,
                         std::byte* out);

  // Decompresses pool object h into the page at out. The callback captures
  // one pointer, so std::function keeps it inline: no allocation per load.
  // Counts a failed decompression in decompress_fail if it found damaged
  // bytes (kCorruption); true then. Any other error (no decompressor could
  // be made: out of memory) is not a failed decompression.
  bool CountIfDamaged(const Status& st) {
    if (st.code() != StatusCode::kCorruption) return false;
    Add(decompress_fail);
    return true;
  }

  // A decompression's error as a load reports it: damaged bytes are
  // kCorruption naming `what` (CountIfDamaged); any other error passes as
  // it is.
  Status DecompressError(Status st, const std::string& what) {
    if (!CountIfDamaged(st)) return st;
    return Status::Corruption(what + ": " + st.message());
  }

  void DecompressInto(Decompressor& d, Handle h, std::byte* out,
                      Status* st) const {
    struct Target {
      Decompressor* d;
      std::byte* out;
      Status* st;
    } t{&d, out, st};
    pool->Read(h, [t = &t](std::span<const std::byte> obj) {
      *t->st = t->d->Decompress(obj, std::span<std::byte>(t->out, kPageSize));
    });
  }

  // Reads slot s into out. REQUIRES: s locked. `as_write`: the read of the
  // old page by a sub-page write (StorePartial; zram_bvec_write_partial()),
  // which is part of that write: not a load, and a failure is the write's
  // (failed_writes, as zram counts it), not a failed read.
  Status LoadLocked(std::uint64_t index, Slot& s, std::byte* out,
                    bool as_write = false) ZT_REQUIRES(s) {
    const std::uint32_t f = SlotTable::Flags(s);
    const std::uint64_t v = s.value.load(std::memory_order_relaxed);
    Status st;
    if (f & slot::kUnit) {
      st = LoadUnitLocked(index, out);
    } else if (f & slot::kSame) {
      FillWords(out, v);
    } else if (!Allocated(f)) {
      std::memset(out, 0, kPageSize);
    } else if (f & slot::kWb) {
      st = LoadWrittenBack(index, f, v, out);
    } else if (f & slot::kHuge) {
      pool->ReadInto(v, std::span<std::byte>(out, kPageSize));
    } else {
      DecompressInto(LocalDecompressor(CodecOf(f)), v, out, &st);
      if (!st.ok()) {
        st = DecompressError(std::move(st), "slot " + std::to_string(index));
      }
    }
    if (!st.ok()) {
      Add(as_write ? failed_writes : failed_reads);
      return st;
    }
    if (!as_write) LoadedLocked(s);
    return st;
  }

  // A load's effect on slot s: accessed now, not idle, counted.
  // REQUIRES: s locked.
  void LoadedLocked(Slot& s) ZT_REQUIRES(s) {
    s.ac_time = Now();
    SlotTable::ClearFlags(s, slot::kIdle | slot::kPp);
    Add(loads);
  }
};

}  // namespace ztier

#endif  // ZTIER_STORE_PAGE_STORE_IMPL_H_
