// File: pool/pool_internal.h
//
// The pieces behind ztier/pool.h, one concept per file:
//   size_class.cc  the class table: geometry, merging, the huge watermark.
//   arena.cc       mmap'd arenas cut into runs of pages, free runs reused.
//   reserve.cc     the preallocated reserve (prealloc_bytes): populated
//                  pages cut into runs with splitting and coalescing.
//   zspage.cc      zspage descriptors (global chunked table, recycled ids),
//                  the object bitmap and the pin lock readers and movers use.
//   handle_table.cc the pool's handle table: handle -> location entries,
//                  free indexes cached per class.
//   pool.cc        Malloc / Free / Read / Write.
//   compact.cc     Compact(), in bounded holds of each class lock.
//   pool_format.cc Stats, ClassStats, FormatClasses.
//
// Handle bit budget (64 bits):
//   [63..40] class index (0..254 a merged size class, 255 the packed page
//   class)   [39..0] handle-table index + 1
// so a handle is never 0. The one handle table of the pool holds up to
// 2^36 entries (HandleTable::kMaxHandles).
//
// Location entry (one std::atomic<uint64_t> per handle-table slot):
//   live:  [63] 0 | [56..25] zspage id (32 bits) | [24..13] object index
//          (12 bits; at most 16 pages * 4096 / 32 = 2048 objects) |
//          [12..0] requested size (13 bits, 1..4096).
//   free:  [63] 1 | [39..0] next free handle-table index (or kNoIndex).
// Compaction rewrites the zspage id and object index of a live entry; the
// size never changes while the handle lives.
//
// Locking (outermost first): Impl::compact_mu (one Compact at a time) ->
// SizeClass::mu (Malloc, Free, Compact of that class) -> one of DescTable::mu_
// (descriptor ids), HandleTable::mu_ (its shared free list) or Arena::mu_
// (runs); none of those three is held while another is taken. Readers and
// writers of object bytes take no mutex: they pin the zspage (Pin below). The
// mutexes are capabilities (platform/mutex.h): the fields they guard and the
// functions that need them say so, and `make check-locks` checks it.
#ifndef ZTIER_POOL_POOL_INTERNAL_H_
#define ZTIER_POOL_POOL_INTERNAL_H_

#include <array>
#include <atomic>
#include <bit>
#include <cassert>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "platform/mapping.h"
#include "platform/mutex.h"
#include "platform/sharded_counter.h"
#include "platform/thread_annotations.h"
#include "ztier/pool.h"

namespace ztier::internal_pool {

inline constexpr std::size_t kPageSize = 4096;
inline constexpr std::size_t kMinAllocSize = 32;
inline constexpr std::size_t kClassDelta = 16;
inline constexpr int kNumClasses = 255;
inline constexpr int kHugeClass = kNumClasses - 1;  // 4096-byte objects
// 4096-byte objects, one a page, max_pages_per_zspage pages a zspage
// (Pool::MallocWholePage); reached only through that call, never by size.
inline constexpr int kPackedClass = kNumClasses;
inline constexpr int kNumClassSlots = kNumClasses + 1;
inline constexpr std::size_t kMaxPagesPerZspage = 16;

// Fullness groups, as zsmalloc's ZS_INUSE_RATIO_*: 0 empty, 1..10 the ten
// bands of non-full zspages (1: <10% used ... 10: 90..99%), 11 full.
inline constexpr int kNumGroups = 12;
inline constexpr int kGroupFull = 11;

inline constexpr std::uint32_t kNoId = UINT32_MAX;
// Runs of emptied zspages to give back to the OS once the class lock is
// dropped: at most one per freed handle plus one per deferred slot.
struct SizeClass;
struct RunRelease {
  std::byte* base = nullptr;
  std::size_t touched = 0;    // pages to discard
  std::size_t run_pages = 0;  // the run's length, for the arena
  std::uint32_t id = kNoId;   // the zspage's descriptor
  SizeClass* sc = nullptr;    // its class
};
struct RunReleases {
  std::array<RunRelease, 1 + 16> items;
  std::size_t n = 0;
  void Add(const RunRelease& r) {
    assert(n < items.size());
    items[n++] = r;
  }
};

// How many larger classes Malloc tries when its own class is locked.
inline constexpr int kMallocAlternatives = 2;
inline constexpr std::uint64_t kNoIndex = (std::uint64_t{1} << 40) - 1;

// ---- handles and location entries -----------------------------------------

inline constexpr int kHandleClassShift = 40;
inline constexpr std::uint64_t kHandleIndexMask =
    (std::uint64_t{1} << kHandleClassShift) - 1;

inline Handle MakeHandle(int class_index, std::uint64_t index) {
  return (static_cast<std::uint64_t>(class_index) << kHandleClassShift) |
         (index + 1);
}
inline int HandleClass(Handle h) {
  return static_cast<int>(h >> kHandleClassShift);
}
inline std::uint64_t HandleIndex(Handle h) {
  return (h & kHandleIndexMask) - 1;
}

inline constexpr std::uint64_t kEntryFree = std::uint64_t{1} << 63;
inline constexpr int kEntryIdxShift = 13;
inline constexpr int kEntryZspageShift = 25;
static_assert(kMaxPagesPerZspage * kPageSize / kMinAllocSize <= (1u << 12),
              "object index must fit 12 bits");
static_assert(kPageSize < (1u << 13), "size must fit 13 bits");
static_assert(kEntryZspageShift + 32 < 63, "entry layout overflows");

inline std::uint64_t MakeEntry(std::uint32_t zspage, std::uint32_t idx,
                               std::uint32_t size) {
  return (static_cast<std::uint64_t>(zspage) << kEntryZspageShift) |
         (static_cast<std::uint64_t>(idx) << kEntryIdxShift) | size;
}
inline std::uint32_t EntryZspage(std::uint64_t e) {
  return static_cast<std::uint32_t>(e >> kEntryZspageShift);
}
inline std::uint32_t EntryIdx(std::uint64_t e) {
  return static_cast<std::uint32_t>((e >> kEntryIdxShift) & 0xfff);
}
inline std::uint32_t EntrySize(std::uint64_t e) {
  return static_cast<std::uint32_t>(e & 0x1fff);
}

// ---- size classes (size_class.cc) -----------------------------------------

struct ClassGeometry {
  std::uint32_t size = 0;   // object stride in bytes
  std::uint32_t pages = 0;  // OS pages per zspage
  std::uint32_t objs = 0;   // objects per zspage

  // The pages of a zspage that its first n objects lie in.
  std::size_t PagesFor(std::size_t n) const {
    return (n * size + kPageSize - 1) / kPageSize;
  }
};

struct ClassTable {
  std::array<ClassGeometry, kNumClasses> geometry{};
  // merged[i]: the class index that stores class i's objects (the largest
  // class with the same (pages, objs)).
  std::array<std::uint16_t, kNumClasses> merged{};
  // Objects of at least this many bytes go to kHugeClass.
  std::uint32_t huge_size = 0;

  // The merged class for an object of `size` bytes (1..4096).
  int MergedClassFor(std::size_t size) const;
};

// Builds the table for chains of at most `max_pages` pages (1..16).
ClassTable BuildClassTable(std::size_t max_pages);

// ---- arenas (arena.cc, reserve.cc) -----------------------------------------

// The preallocated reserve: `pages` populated pages cut into runs of 1..16
// pages, with splitting and coalescing (reserve.cc). Not thread-safe.
class PageReserve {
 public:
  static constexpr int kLongBin = kMaxPagesPerZspage + 1;  // runs > 16 pages

  // Maps and populates the pages; kResourceExhausted (or the mmap/madvise
  // error) when the memory cannot be had.
  static Result<std::unique_ptr<PageReserve>> Create(std::size_t pages);
  ~PageReserve();
  PageReserve(const PageReserve&) = delete;
  PageReserve& operator=(const PageReserve&) = delete;

  // A run of n pages (1..16), resident, contents stale; nullptr when no
  // free run is long enough.
  std::byte* Allocate(std::size_t n);
  void Release(std::byte* run, std::size_t n);
  bool Contains(const std::byte* p) const {
    return p >= base_ && p < base_ + pages_ * kPageSize;
  }
  // Bitmap words for a zspage on the run starting at `run`: 2 words per
  // page of the run (enough for 128 objects a page, the most there can be).
  std::uint64_t* Bitmap(const std::byte* run);
  std::size_t pages() const { return pages_; }
  std::size_t free_pages() const { return free_pages_; }

 private:
  PageReserve() = default;
  void Insert(std::uint32_t first, std::uint32_t len);
  void Remove(std::uint32_t first, std::uint32_t len);

  platform::Mapping mapping_;  // pages_ pages, populated
  std::byte* base_ = nullptr;  // mapping_'s
  std::size_t pages_ = 0;
  std::size_t free_pages_ = 0;
  std::unique_ptr<std::uint32_t[]> tag_;   // free run length at its ends
  std::unique_ptr<std::uint32_t[]> next_;  // bin list links (first pages)
  std::unique_ptr<std::uint32_t[]> prev_;
  std::unique_ptr<std::uint64_t[]> bits_;  // 2 bitmap words per page
  std::array<std::uint32_t, kLongBin + 1> bins_{};
  std::uint32_t nonempty_ = 0;  // bit b: bins_[b] is not empty
};

// Hands out runs of contiguous pages. Thread-safe. Two modes:
//  - lazy (no reserve): mmap'd arenas of arena_bytes (MAP_NORESERVE, only
//    touched pages cost memory) cut by a bump pointer; returned runs are
//    reused by length. Pages of freed zspages go back to the OS (Discard).
//  - reserve (SetReserve): every run comes from the PageReserve and no
//    arena is ever mapped; when the reserve has no run long enough,
//    AllocateRun fails. Discard keeps reserve pages resident.
class Arena {
 public:
  // huge_pages: advise transparent huge pages for the arenas (lazy mode).
  Arena(std::size_t arena_bytes, bool huge_pages);
  ~Arena();
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;

  // Switches to reserve mode; call once, before any AllocateRun.
  void SetReserve(std::unique_ptr<PageReserve> reserve) {
    reserve_ = std::move(reserve);
  }
  PageReserve* reserve() const { return reserve_.get(); }

  // A run of `pages` pages (1..16), its memory untouched, zeroed or (from
  // the reserve) holding stale bytes; nullptr when the address space (mmap)
  // or the reserve runs out. Never throws (Malloc calls it holding a class
  // lock it releases by hand); nor do PopulateAhead and Discard.
  // With huge pages it also sets *populate when the caller should call
  // PopulateAhead() once it holds no lock (at most one caller at a time).
  std::byte* AllocateRun(std::size_t pages, bool* populate = nullptr);
  // Faults in the arena ahead of the bump pointer; see arena.cc. Call
  // without any lock, after AllocateRun set *populate.
  void PopulateAhead();
  // Returns a run; REQUIRES its pages were Discard()ed or never touched.
  void ReleaseRun(std::byte* run, std::size_t pages);
  // Gives pages [first, first + count) of the run at `base` back to the OS
  // (madvise(MADV_DONTNEED)), unless they belong to the reserve, which
  // keeps its pages resident for the next zspage. Pages the OS keeps
  // (locked by the process's mlockall) are zeroed instead.
  void Discard(std::byte* base, std::size_t first, std::size_t count) const;
  // For a zspage on `run` with `objs` objects: its bitmap words in the
  // reserve's table, zeroed, or nullptr (a lazy run: the caller allocates).
  std::uint64_t* ReserveBitmap(const std::byte* run, std::uint32_t objs);

 private:
  internal::Mutex mu_;
  const std::size_t arena_bytes_;
  const bool huge_pages_;
  std::unique_ptr<PageReserve> reserve_;  // set once, before use
  // Of arena_bytes_ each.
  std::vector<platform::Mapping> arenas_ ZT_GUARDED_BY(mu_);
  std::byte* bump_ ZT_GUARDED_BY(mu_) = nullptr;
  std::byte* bump_end_ ZT_GUARDED_BY(mu_) = nullptr;
  // [bump_, populated_) is already faulted in (Populate()).
  std::byte* populated_ ZT_GUARDED_BY(mu_) = nullptr;
  static constexpr std::size_t kPopulateBytes = 2 << 20;
  // A PopulateAhead() is due or running.
  bool populating_ ZT_GUARDED_BY(mu_) = false;
  // Runs given back, by length. Each vector has room for every run of its
  // length ever carved (carved_), so ReleaseRun never allocates: it runs
  // where an allocation failure could not be reported (a destructor).
  std::array<std::vector<std::byte*>, kMaxPagesPerZspage + 1> free_runs_
      ZT_GUARDED_BY(mu_);
  std::array<std::size_t, kMaxPagesPerZspage + 1> carved_
      ZT_GUARDED_BY(mu_){};
};

// ---- zspage descriptors (zspage.cc) ----------------------------------------

// Pin lock word: >= 0 reader count; kPinPending set while a mover waits for
// readers to drain (new readers back off); kPinWriter while it moves.
inline constexpr std::int32_t kPinPending = 0x40000000;
inline constexpr std::int32_t kPinWriter = -1;

struct ZspageDesc {
  std::atomic<std::int32_t> pin{0};
  // The fields below are written under the owning class's lock (and the
  // DescTable lock for allocation). Readers read `base` only after a
  // location entry naming this zspage was loaded with acquire.
  std::uint32_t prev = kNoId;  // fullness-group list links; `next` also
  std::uint32_t next = kNoId;  // links the DescTable free list
  std::uint16_t inuse = 0;
  std::uint8_t group = 0;
  std::uint8_t touched_pages = 0;  // pages [0, touched) may be resident
  std::byte* base = nullptr;
  // Object bitmap: inline for <= 64 objects per zspage, else on the heap.
  union {
    std::uint64_t inline_bits = 0;
    std::uint64_t* heap_bits;
  };

  // Bitmap helpers; `objs` is the class's objects per zspage.
  std::uint64_t* Words(std::uint32_t objs) {
    return objs > 64 ? heap_bits : &inline_bits;
  }
  const std::uint64_t* Words(std::uint32_t objs) const {
    return objs > 64 ? heap_bits : &inline_bits;
  }
  bool Used(std::uint32_t objs, std::uint32_t idx) const {
    return (Words(objs)[idx / 64] >> (idx % 64)) & 1;
  }
  void Set(std::uint32_t objs, std::uint32_t idx) {
    Words(objs)[idx / 64] |= std::uint64_t{1} << (idx % 64);
  }
  void Clear(std::uint32_t objs, std::uint32_t idx) {
    Words(objs)[idx / 64] &= ~(std::uint64_t{1} << (idx % 64));
  }
  // Lowest free index; REQUIRES inuse < objs.
  std::uint32_t LowestFree(std::uint32_t objs) const;
  // Highest used index; REQUIRES inuse > 0.
  std::uint32_t HighestUsed(std::uint32_t objs) const;
};
static_assert(sizeof(ZspageDesc) == 32, "descriptors are metadata: keep small");

// Chunked tables whose chunks never move or free. Small tables grow in fine
// steps, since many small tables (one per class) each leave a partly used
// last chunk: kFineLevels levels of kPerLevel equal chunks each (kFirst,
// kFirst, kFirst, kFirst, 2 kFirst, ...; growth by 2^(1/kPerLevel)). After
// them chunks double (the unused tail is then small next to the data the
// entries describe). Chunk and offset of entry i come from bit math.
template <std::uint64_t kFirst, int kPerLevel, int kFineLevels>
struct Chunking {
  static constexpr std::uint64_t kLevel0 = kFirst * kPerLevel;
  static constexpr std::uint64_t kFineTotal =
      kLevel0 * ((std::uint64_t{1} << kFineLevels) - 1);
  static constexpr int kFineChunks = kPerLevel * kFineLevels;
  static constexpr std::uint64_t kCoarse0 = kLevel0 << kFineLevels;
  // Chunks needed to hold `n` entries' indexes.
  static constexpr int ChunksFor(std::uint64_t n) {
    return kFineChunks + std::bit_width((n - kFineTotal) / kCoarse0 + 1);
  }
  static std::uint64_t ChunkSize(int k) {
    return k < kFineChunks ? kFirst << (k / kPerLevel)
                           : kCoarse0 << (k - kFineChunks);
  }
  static int Locate(std::uint64_t i, std::uint64_t* offset) {
    if (i < kFineTotal) {
      const int level = std::bit_width(i / kLevel0 + 1) - 1;
      const std::uint64_t off =
          i - kLevel0 * ((std::uint64_t{1} << level) - 1);
      const std::uint64_t size = kFirst << level;
      const std::uint64_t j = off / size;
      *offset = off - j * size;
      return level * kPerLevel + static_cast<int>(j);
    }
    const std::uint64_t c = i - kFineTotal;
    const int m = std::bit_width(c / kCoarse0 + 1) - 1;
    *offset = c - kCoarse0 * ((std::uint64_t{1} << m) - 1);
    return kFineChunks + m;
  }
};

// Blocks new pins of d and waits for current ones to drain, then holds d
// exclusively. One writer at a time per zspage (the class lock ensures it).
void WriterLock(ZspageDesc* d);
void WriterUnlock(ZspageDesc* d);

// Global table of descriptors, indexed by zspage id. Chunks never move or
// free, so a reader holding an id can always dereference it. Ids are
// recycled. Thread-safe.
//
// Memory: a chunk's bytes count in *metadata_bytes when the first id in it
// is handed out, whether Reserve() made it earlier or not, so that a pool's
// statistics do not depend on preallocation.
class DescTable {
 public:
  explicit DescTable(std::atomic<std::size_t>* metadata_bytes)
      : metadata_bytes_(metadata_bytes) {}
  ~DescTable();
  DescTable(const DescTable&) = delete;
  DescTable& operator=(const DescTable&) = delete;

  // Makes the chunks for ids [0, n) now, so that Allocate() below n ids in
  // use never allocates. false when memory runs out.
  bool Reserve(std::uint64_t n);
  // A descriptor with a bitmap for `objs` objects (all clear), its id in
  // *id; nullptr when memory runs out. `bits`, if not null, is a zeroed
  // bitmap of enough words that the caller owns (the reserve's); else one
  // is allocated when objs > 64.
  ZspageDesc* Allocate(std::uint32_t objs, std::uint32_t* id,
                       std::uint64_t* bits = nullptr);
  // Frees id; its bitmap is deleted unless `owned_bits` is false.
  void Free(std::uint32_t id, std::uint32_t objs, bool owned_bits = true);
  ZspageDesc* Get(std::uint32_t id) const {
    std::uint64_t off;
    const int k = Chunks::Locate(id, &off);
    return &chunks_[k].load(std::memory_order_acquire)[off];
  }

 private:
  using Chunks = Chunking<32, 4, 6>;
  static constexpr int kMaxChunks = Chunks::ChunksFor(std::uint64_t{1} << 32);

  internal::Mutex mu_;
  std::atomic<std::size_t>* metadata_bytes_;
  std::array<std::atomic<ZspageDesc*>, kMaxChunks> chunks_{};
  // Chunks [0, counted) are in the metadata bill.
  int counted_chunks_ ZT_GUARDED_BY(mu_) = 0;
  std::uint32_t next_id_ ZT_GUARDED_BY(mu_) = 0;
  std::uint32_t free_head_ ZT_GUARDED_BY(mu_) = kNoId;
};

// ---- handle table (handle_table.cc) ---------------------------------------

// Free handle-table indexes kept by one class, a LIFO list threaded through
// the entries. Guarded by the class's lock.
struct HandleCache {
  std::uint64_t head = kNoIndex;
  std::uint32_t count = 0;
};

// The pool's handle -> location entries, one table for every class, in
// chunks that never move or free. Each class takes indexes from its own
// HandleCache under its own lock and trades them with the table's shared
// free list in batches (under mu_), so Malloc and Free rarely touch mu_,
// and the entries ever made stay close to the live objects (plus at most
// kCacheHigh per class): a class whose objects move elsewhere does not keep
// a table sized for its peak. Entry() is safe from any thread for an index
// that was handed out.
class HandleTable {
 public:
  static constexpr std::uint32_t kBatch = 32;      // indexes per trade
  static constexpr std::uint32_t kFreshBatch = 8;  // new indexes at once
  static constexpr std::uint32_t kCacheHigh = 64;  // a cache keeps at most
  static constexpr std::uint64_t kMaxHandles = std::uint64_t{1} << 36;

  explicit HandleTable(std::atomic<std::size_t>* metadata_bytes)
      : metadata_bytes_(metadata_bytes) {}
  ~HandleTable();
  HandleTable(const HandleTable&) = delete;
  HandleTable& operator=(const HandleTable&) = delete;

  // Makes the chunks for indexes [0, n) now (their bytes go in the
  // metadata bill only when first handed out, as DescTable's). false when
  // memory runs out.
  bool Reserve(std::uint64_t n);
  // A free index (its entry is left free; the caller stores the location),
  // or kNoIndex when memory runs out. REQUIRES: the lock of c's class.
  std::uint64_t Allocate(HandleCache* c);
  // REQUIRES: the lock of c's class; index is live in that class.
  void Free(HandleCache* c, std::uint64_t index);
  std::atomic<std::uint64_t>& Entry(std::uint64_t index) const {
    std::uint64_t off;
    const int k = Chunks::Locate(index, &off);
    return chunks_[k].load(std::memory_order_acquire)[off];
  }
  // Indexes ever handed out: [0, size()) (free ones among them).
  std::uint64_t size() const { return size_.load(std::memory_order_acquire); }

 private:
  using Chunks = Chunking<64, 4, 6>;
  static constexpr int kMaxChunks = Chunks::ChunksFor(kMaxHandles);
  // Chunks of this many entries and more are mappings (zero pages that
  // the kernel gives as they are first touched), not heap arrays: made in
  // no time, where filling a 256 MiB array took seconds under mu_ (and a
  // class lock) as the table doubled past 2^25 entries.
  static constexpr std::size_t kMappedChunkEntries = std::size_t{1} << 16;
  // Makes chunk k if it is missing, with `populate` faulting a mapped one
  // in (Reserve: no page fault later); false when memory runs out.
  bool MakeChunk(int k, bool populate) ZT_REQUIRES(mu_);

  internal::Mutex mu_;
  std::atomic<std::size_t>* metadata_bytes_;
  std::array<std::atomic<std::atomic<std::uint64_t>*>, kMaxChunks> chunks_{};
  // The mappings of the large chunks (empty for a heap chunk).
  std::array<platform::Mapping, kMaxChunks> mapped_ ZT_GUARDED_BY(mu_);
  int counted_chunks_ ZT_GUARDED_BY(mu_) = 0;
  std::atomic<std::uint64_t> size_{0};  // written under mu_
  std::uint64_t free_head_ ZT_GUARDED_BY(mu_) = kNoIndex;
};

// ---- per-class state ----------------------------------------------------------

struct SizeClass {
  internal::Mutex mu;  // the class lock
  int index = 0;
  ClassGeometry geo;
  std::array<std::uint32_t, kNumGroups> group_head ZT_GUARDED_BY(mu){};
  std::array<std::size_t, kNumGroups> group_count ZT_GUARDED_BY(mu){};
  std::size_t zspages ZT_GUARDED_BY(mu) = 0;
  std::size_t obj_used ZT_GUARDED_BY(mu) = 0;
  std::size_t touched_pages ZT_GUARDED_BY(mu) = 0;
  // Frees that found mu held leave their handle here (lock-free) for the
  // holder or the next locker to do: see Pool::Free. kInvalidHandle: empty.
  std::array<std::atomic<Handle>, 16> deferred{};
  std::atomic<int> deferred_count{0};
  bool DeferFree(Handle h) {
    for (auto& slot : deferred) {
      Handle expected = kInvalidHandle;
      if (slot.compare_exchange_strong(expected, h,
                                       std::memory_order_release,
                                       std::memory_order_relaxed)) {
        deferred_count.fetch_add(1, std::memory_order_seq_cst);
        return true;
      }
    }
    return false;  // all slots taken: the caller waits for the lock
  }
  // Shells: emptied zspages whose pages went back to the OS but whose
  // descriptor and address range the class keeps (id + 1; 0: empty), so a
  // new zspage of this class takes neither the descriptor table's lock nor
  // the arena's. Lock-free, because a shell is stashed after its pages are
  // discarded, outside the class lock. They hold no RAM; their descriptors
  // stay in the metadata bill. With a reserve a shell keeps no run (base
  // null): Malloc takes one from the reserve when it reuses the shell.
  std::array<std::atomic<std::uint32_t>, 4> shells{};
  bool StashShell(std::uint32_t id) {
    for (auto& s : shells) {
      std::uint32_t expected = 0;
      if (s.compare_exchange_strong(expected, id + 1,
                                    std::memory_order_release,
                                    std::memory_order_relaxed)) {
        return true;
      }
    }
    return false;
  }
  std::uint32_t TakeShell() {
    for (auto& s : shells) {
      if (s.load(std::memory_order_relaxed) == 0) continue;
      const std::uint32_t v = s.exchange(0, std::memory_order_acquire);
      if (v != 0) return v - 1;
    }
    return kNoId;
  }
  // One emptied zspage kept with its pages for the next Malloc, or kNoId.
  // Not in any fullness group; counted in zspages and touched_pages.
  std::uint32_t spare ZT_GUARDED_BY(mu) = kNoId;
  HandleCache handle_cache ZT_GUARDED_BY(mu);
  // The zspage whose tail compaction is discarding without the lock, or
  // kNoId: a Free that empties it leaves it in group 0 for the compactor
  // to free (compact.cc).
  std::uint32_t discarding ZT_GUARDED_BY(mu) = kNoId;

  // (Before any other thread can see the class.)
  SizeClass() ZT_NO_THREAD_SAFETY_ANALYSIS { group_head.fill(kNoId); }
};

int GroupFor(std::uint32_t inuse, std::uint32_t objs);

}  // namespace ztier::internal_pool

namespace ztier {

struct Pool::Impl {
  explicit Impl(const PoolOptions& options);
  ~Impl();

  PoolOptions options;
  internal_pool::ClassTable table;
  // Indexed by class: only merged classes and the packed page class are
  // non-null.
  std::array<std::unique_ptr<internal_pool::SizeClass>,
             internal_pool::kNumClassSlots>
      classes;
  internal_pool::Arena arena;
  std::atomic<std::size_t> metadata_bytes{0};
  internal_pool::DescTable descs{&metadata_bytes};
  internal_pool::HandleTable handles{&metadata_bytes};
  std::atomic<std::size_t> touched_pages{0};
  // Every Malloc and Free updates these: sharded by CPU (see
  // platform/sharded_counter.h).
  internal::ShardedCounter objects;
  internal::ShardedCounter object_bytes;
  std::atomic<std::uint64_t> pages_compacted{0};

  internal_pool::SizeClass& ClassOf(Handle h) const {
    const int c = internal_pool::HandleClass(h);
    assert(c >= 0 && c < internal_pool::kNumClassSlots &&
           classes[c] != nullptr);
    return *classes[c];
  }

  // Fullness-group list maintenance; REQUIRE sc.mu.
  void GroupInsert(internal_pool::SizeClass& sc, std::uint32_t id,
                   internal_pool::ZspageDesc* d) ZT_REQUIRES(sc.mu);
  void GroupRemove(internal_pool::SizeClass& sc, internal_pool::ZspageDesc* d)
      ZT_REQUIRES(sc.mu);
  void Regroup(internal_pool::SizeClass& sc, std::uint32_t id,
               internal_pool::ZspageDesc* d) ZT_REQUIRES(sc.mu);
  // Raises d's touched pages to cover object idx; returns the pages that
  // adds. REQUIRES sc.mu.
  std::size_t Touch(internal_pool::SizeClass& sc, internal_pool::ZspageDesc* d,
                    std::uint32_t idx) ZT_REQUIRES(sc.mu);
  // Frees an empty zspage: discards its pages, returns the run and the id.
  // Returns the pages it held. REQUIRES sc.mu; d is in no group list.
  // Frees h / every deferred free of sc. REQUIRES: sc.mu held. Zspages
  // they empty are queued on `later` (if not null) for DoReleases().
  void FreeLocked(internal_pool::SizeClass& sc, Handle h,
                  internal_pool::RunReleases* later = nullptr)
      ZT_REQUIRES(sc.mu);
  void DrainDeferredFrees(internal_pool::SizeClass& sc,
                          internal_pool::RunReleases* later = nullptr)
      ZT_REQUIRES(sc.mu);
  // After dropping sc.mu: drains frees deferred meanwhile, if the lock can
  // be had (else its new holder will). Call without sc.mu.
  void SweepDeferred(internal_pool::SizeClass& sc) ZT_EXCLUDES(sc.mu);
  // Discards and returns the queued runs. Call without any class lock.
  void DoReleases(const internal_pool::RunReleases& r);
  struct ReleaseOnExit {
    Impl* m;
    internal_pool::RunReleases runs;
    bool populate = false;  // Arena::AllocateRun asked for PopulateAhead()
    ~ReleaseOnExit();
  };
  // Frees descriptor id of class sc (its bitmap too, unless the reserve
  // keeps it).
  void FreeDesc(internal_pool::SizeClass& sc, std::uint32_t id) {
    descs.Free(id, sc.geo.objs, arena.reserve() == nullptr);
  }
  // Frees sc's spare zspage, if any, its run queued on `later`; returns
  // its pages. REQUIRES: sc.mu.
  std::size_t ReleaseSpare(internal_pool::SizeClass& sc,
                           internal_pool::RunReleases* later)
      ZT_REQUIRES(sc.mu);
  // An emptied zspage, unlinked from its group: the class's spare if it
  // has none, else freed (FreeZspage, queued on `later`).
  void ReleaseEmpty(internal_pool::SizeClass& sc, std::uint32_t id,
                    internal_pool::ZspageDesc* d,
                    internal_pool::RunReleases* later) ZT_REQUIRES(sc.mu);
  // Unlinks an empty zspage; its pages are discarded and its run returned
  // now, or queued on `later` when given. Returns its pages.
  std::size_t FreeZspage(internal_pool::SizeClass& sc, std::uint32_t id,
                         internal_pool::ZspageDesc* d,
                         internal_pool::RunReleases* later = nullptr)
      ZT_REQUIRES(sc.mu);

  // Pins the zspage holding h's object; returns its descriptor and the
  // location entry valid while pinned. Unpin with Unpin(d).
  internal_pool::ZspageDesc* Pin(Handle h, std::uint64_t* entry) const;
  static void Unpin(internal_pool::ZspageDesc* d) {
    d->pin.fetch_sub(1, std::memory_order_release);
  }

  // One Compact() at a time (compact.cc); taken before any class lock.
  internal::Mutex compact_mu;
  // The reverse map compaction builds (object -> handle-table index), for
  // the non-full zspages of one or more classes (compact.cc).
  class OwnerMap;
  // Maps the non-full zspages of the classes from index `first` on, as many
  // as fit one map (at least one), into *map with one scan of the handle
  // table; returns the index past the last class mapped. *map is left
  // empty when memory runs out.
  std::size_t MapClasses(std::size_t first, OwnerMap* map)
      ZT_REQUIRES(compact_mu);
  // Compacts one class in holds of its lock, starting from `batch` (the
  // map MapClasses made, or empty); returns the pages freed.
  std::size_t CompactClass(internal_pool::SizeClass& sc, OwnerMap& batch)
      ZT_EXCLUDES(sc.mu) ZT_REQUIRES(compact_mu);
  std::size_t NonFullZspages(internal_pool::SizeClass& sc) ZT_REQUIRES(sc.mu);
  // The non-full zspages of sc, appended to *ids, unless there is nothing
  // to move (one partial zspage, packed). May throw std::bad_alloc; called
  // unlocked, it locks sc itself and sweeps after.
  void NonFullIds(internal_pool::SizeClass& sc, std::vector<std::uint32_t>* ids)
      ZT_EXCLUDES(sc.mu);
  // CompactClass's state and one hold of each of its two phases
  // (compact.cc); each adds the pages it freed to *freed and says what is
  // left to do.
  struct Compaction;
  enum class CompactNext;
  CompactNext MergeNonFull(internal_pool::SizeClass& sc, Compaction& c,
                           std::size_t* freed,
                           internal_pool::RunReleases* later)
      ZT_REQUIRES(sc.mu);
  CompactNext PackLast(internal_pool::SizeClass& sc, Compaction& c,
                       std::size_t* freed) ZT_REQUIRES(sc.mu);
  // Discards the tail PackLast left held, without the class lock.
  void FinishDiscard(internal_pool::SizeClass& sc, Compaction& c)
      ZT_EXCLUDES(sc.mu);

  // Malloc's two halves (pool.cc). LockClassFor returns a class that fits
  // `size` (its own class, else a larger one), locked; the analysis cannot
  // follow which class that is, so the caller asserts the returned lock.
  internal_pool::SizeClass& LockClassFor(std::size_t size);
  // Malloc's rest once sc is locked: one object in sc (AllocateLocked),
  // then sc unlocked, deferred frees swept, and emptied runs released.
  Handle AllocateAndUnlock(internal_pool::SizeClass& sc, std::size_t size)
      ZT_RELEASE(sc.mu);
  // One object in sc, or kInvalidHandle when memory runs out (nothing
  // is left taken then). Runs to release go on `later`.
  Handle AllocateLocked(internal_pool::SizeClass& sc, std::size_t size,
                        ReleaseOnExit* later) ZT_REQUIRES(sc.mu);
};

}  // namespace ztier

#endif  // ZTIER_POOL_POOL_INTERNAL_H_
