// File: ztier/page_store.h
//
// PageStore: a table of page slots whose contents live compressed in a Pool.
// It is the engine both front ends share: the zram device maps block
// offsets to slots, a zswap region maps its evicted pages to slots. It knows
// nothing of NBD or userfaultfd.
//
//   auto store = ztier::PageStore::Create({.num_pages = 262144,
//                                          .codec = "lz4"});
//   ZT_RETURN_IF_ERROR((*store)->Store(7, page));
//   ZT_RETURN_IF_ERROR((*store)->Load(7, out));
//
// What a store of one page does (zram's write path in
// drivers/block/zram/zram_drv.c):
//   1. Same-filled page (every 8-byte word equal): keep only the word
//      (SAME); no pool memory.
//   2. Compress with a stream from the stream pool. A result of at least
//      pool.HugeClassSize() bytes, or one that does not fit a page, is kept
//      raw (HUGE).
//   3. Allocate in the pool and copy; then check mem_limit: over the limit,
//      the new object is freed, the store fails with kResourceExhausted, and
//      the slot keeps its previous content.
//   4. Under the slot's lock, free the old content and install the new.
// A batch store (StoreBatch) compresses up to batch_size() pages per codec
// call with one stream taken once per chunk, and is all-or-nothing: if any
// page fails, or the call throws (std::bad_alloc), every page of the batch
// is discarded (zswap's store semantics: no stale copy of a page of the
// unit survives to be read later). A store or discard that leaves a unit
// below half its pages also reclaims it (units.cc); a reclaim that runs out
// of memory does not fail the call: one that throws std::bad_alloc is left
// to the unit's next free, one the pool has no room for to the next store
// or discard that returns (unit_pages below).
//
// Loads: SAME pages are filled from the word, HUGE pages copied, the rest
// decompressed straight from the pool into the caller's page. A load never
// takes a compression stream: it uses this thread's own decompressor (no
// lock besides the slot's). Reading a never-written slot gives zeros, as a
// fresh zram device does. A written-back (WB) slot is read from its block
// under the slot's lock (only that slot waits for the disk), decompressed if
// it was written compressed; it stays WB: the block is released only when
// the slot is overwritten or discarded. A backing read error or a block
// that fails authentication is kIoError / kCorruption, never data.
//
// Threads and locks:
//   - Every slot has a lock bit in its flags word (zram's ZRAM_ENTRY_LOCK).
//     A store holds it only to swap contents, never while compressing; a load
//     holds it while it copies or decompresses the slot. Waiters spin briefly,
//     then sleep on a futex.
//   - Compression streams: a store takes a free one without waiting (its
//     CPU's first, then any other, then a reserve one) and sleeps only
//     when every stream is held; it holds one only while it compresses,
//     copies into the pool and installs, and never takes one while it
//     holds a slot lock (docs/architecture.md, "Lock order"). Loads take
//     none.
//   - Pool: per-class locks (ztier/pool.h).
//   - Counters are relaxed atomics: each is exact, a set of them read together
//     is not a snapshot.
// All methods may be called from any thread at any time.
#ifndef ZTIER_PAGE_STORE_H_
#define ZTIER_PAGE_STORE_H_

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "ztier/backing_store.h"
#include "ztier/batch_codec.h"
#include "ztier/codec.h"
#include "ztier/page.h"
#include "ztier/pool.h"
#include "ztier/status.h"

namespace ztier {

// Codecs a store holds at once (zram's ZRAM_MAX_COMPS): the primary, which
// every store uses (priority 0), and up to three secondary ones that only
// recompression uses (priorities 1..3).
inline constexpr int kMaxCodecPriorities = 4;

// A secondary codec (zram's `recomp_algorithm`): a name from CodecNames()
// and its algorithm_params tokens. An empty name: no codec at that priority.
struct RecompCodec {
  std::string codec;
  std::string algorithm_params;
};

struct PageStoreOptions {
  std::size_t num_pages = 0;          // slots; 0 is kInvalidArgument
  std::string codec = "lz4";          // a name from CodecNames()
  std::string algorithm_params;       // zram-style tokens, may be empty
  // Secondary codecs by priority: recomp[0] is priority 1, recomp[2]
  // priority 3. Any of them may be empty, in any pattern.
  std::array<RecompCodec, kMaxCodecPriorities - 1> recomp;
  std::size_t mem_limit = 0;          // bytes of pool memory; 0: unlimited
  // Compression streams, normally one per core; 0: the number of cores.
  std::size_t streams = 0;
  BatchBackend batch_backend = BatchBackend::kSerial;
  std::size_t batch_size = kMaxBatchSize;  // 1..kMaxBatchSize
  // Worker threads for the parallel backend (not counting the caller); 0:
  // cores - 1 (at least 1). Ignored for kSerial.
  std::size_t parallel_workers = 0;
  // zswap semantics when false: a page that does not compress below the huge
  // size is rejected (reject_compress_poor, kResourceExhausted) instead of
  // stored raw. zram semantics (stored raw, HUGE) when true.
  bool store_incompressible = true;
  // Preallocation, for a store that must work when the host has no memory
  // to give (a swap device): the slot table (and the unit table) is
  // faulted in now, and the pool gets a reserve of mem_limit bytes
  // (pool.prealloc_bytes; ztier/pool.h) with its handle table sized for
  // num_pages objects. Stores and loads then take no new memory from the
  // kernel or the heap, but for a thread's first of each: a codec's first
  // decompression on a thread (see LocalDecompressor) and, with units, a
  // thread's first unit store or read (256 KiB of buffers, units.cc). The
  // reserve is fixed here: a later SetMemLimit above it does not grow it,
  // and stores it cannot hold fail as over mem_limit do
  // (kResourceExhausted). REQUIRES mem_limit > 0 (kInvalidArgument).
  bool prealloc = false;
  PoolOptions pool;
  // Seconds on a clock that never goes back, for slot access times and
  // age-based idle marking. Null: seconds since boot with suspended time,
  // as the kernel's zram stamps ac_time (CLOCK_BOOTTIME, read at tick
  // resolution: platform::BootSeconds). Tests inject their own.
  std::function<std::uint32_t()> clock;
  // Multi-page objects ("units"): 0 (or 1) off; 4, 8 or 16 (else
  // kInvalidArgument). A StoreBatch that covers a whole aligned run of
  // unit_pages slots compresses that run's pages (the same-filled ones
  // aside, kept as SAME) as one object, split into page-sized pool
  // objects and a rest in a few power-of-two pieces (so that the units'
  // rests fill a few size classes, not partly used pages of every class;
  // a unit of 10 or more whole pages runs out of pieces and ends in one
  // of any size); each slot refers to it. A run that does not compress to
  // fewer bytes than its pages is stored page by page.
  //   - Loads: reading one page decompresses the whole unit into a
  //     per-thread copy of the last unit decompressed, so the unit's other
  //     pages read next (sequential reads, readahead) cost a copy each. A
  //     LoadBatch that covers a whole unit of unit_pages members (none
  //     same-filled) decompresses it once straight into its buffer. A
  //     random 4 KiB read costs the unit's decompression, about unit_pages
  //     times a page's (bench ratio measures it).
  //   - Overwriting or discarding a page detaches it; the object stays for
  //     the others. Once fewer than half its pages are left, the survivors
  //     are recompressed one page each, by the next store or discard that
  //     returns (with no lock held; not TryDiscard), and the object is
  //     freed. Worst case: a unit of N pages holds its whole object for
  //     N/2 + 1 live pages, about twice their share. Exceptions, which keep
  //     a unit until its last page goes: a written-back unit (its blocks
  //     are freed then); a unit whose survivors cannot be objects of their
  //     own (it does not decompress, or, with store_incompressible false,
  //     a page does not compress alone: such a unit is tried again by the
  //     next store or discard that returns after that page's free, or
  //     after a TrainDictionary, whose dictionary may let the page
  //     compress). A reclaim the pool has no room for (its reserve spent,
  //     with prealloc) leaves the unit whole and queued: each later store
  //     or discard that returns tries it again, until one finds room or
  //     its last page goes. A pass goes on past a unit the pool refuses,
  //     which goes to the back of the queue, so that it holds up no other;
  //     it stops at a second refusal, so that while the pool stays full a
  //     call makes two refused tries at most.
  //     The new objects are not held to mem_limit: they replace a larger
  //     one.
  //   - A unit keeps its dictionary id (TrainDictionary) until its last
  //     page goes: recompression does not rewrite units.
  //   - Each thread that stores or reads units keeps 256 KiB of buffers
  //     (its last decompressed unit among them), outside mem_used_total.
  //   - Writeback writes a unit once (its compressed object, one block
  //     per 4096 bytes or part, with or without compressed_writeback),
  //     when every page of it passes the scan's filter and lies in the
  //     scan.
  //   - Recompression skips unit pages; dictionary training samples them;
  //     a unit is compressed with the current dictionary, as a page is.
  // mm_stat counts as for pages (orig_data_size: pages; compr_data_size:
  // the objects' bytes). The unit table takes 152 bytes per live unit,
  // counted in mem_used_total. (With prealloc the whole table is resident
  // from the start, like the slot table, and likewise not counted.)
  std::size_t unit_pages = 0;
  // Where Writeback() puts pages; null: no writeback (kNotFound, as zram's
  // -ENODEV without a backing_dev). The store frees the blocks its slots
  // hold; the BackingStore must outlive the PageStore.
  std::shared_ptr<BackingStore> backing;
};

// ---- writeback (zram's `writeback` attribute, writeback_store()) ----

// Which slots a scan picks, beyond "allocated, not SAME, not already WB".
// 0 picks every such slot; bits combine as zram's modes do (huge_idle is
// kWritebackIdle | kWritebackHuge).
enum WritebackFilter : unsigned {
  kWritebackIdle = 1u << 0,
  kWritebackHuge = 1u << 1,
  kWritebackIncompressible = 1u << 2,
};

// One scan of slots [lo, hi) with a filter; a `writeback` command is a list
// of them (its index and mode tokens).
struct WritebackScan {
  unsigned filter = 0;
  std::uint64_t lo = 0;
  std::uint64_t hi = 0;
};

// writeback_limit and writeback_limit_enable: a budget in pages, charged at
// submit and refunded unless the page ends on the backing store (its IO
// failed, or it changed during the IO), as zram charges only the pages it
// installs. Shared by the passes of one device.
//
// Set and SetEnabled may come while a pass runs (zram's writes wait for
// the pass instead). Each starts a new setting, and a pass (the pages of
// a writeback, then its units: one each) gives back only while the budget
// keeps the setting it began with: the refunds of a pass running across a
// Set are dropped, never added to the value just written. So a written
// value is the budget from then on, and what was charged before it never
// comes back to it ("writeback_limit 0" during a pass stays 0). Before
// any pass, plain stores to the atomics do as well.
struct WritebackBudget {
  std::atomic<bool> enabled{false};
  std::atomic<std::uint64_t> pages{0};  // what remains

  void Set(std::uint64_t n) {
    std::lock_guard l(mu);
    pages.store(n);
    ++setting;
  }
  void SetEnabled(bool on) {
    std::lock_guard l(mu);
    enabled.store(on);
    ++setting;
  }

  // For the passes (BudgetUse in store/writeback.cc): refunds hold `mu`
  // (charges are a compare-and-swap on `pages`), and a refund goes back
  // only while `setting` is the one the pass began with.
  std::mutex mu;
  std::uint64_t setting = 0;  // guarded by mu
};

struct WritebackRequest {
  std::vector<WritebackScan> scans;
  std::size_t in_flight = 32;     // writeback_batch_size: IOs at once
  std::size_t max_io_pages = 32;  // pages per IO (32: 128 KiB)
  bool compressed = false;        // compressed_writeback: write the object
  WritebackBudget* budget = nullptr;  // null: unlimited
};

struct WritebackResult {
  std::uint64_t candidates = 0;  // slots the scans picked
  std::uint64_t written = 0;     // slots now on the backing store
  std::uint64_t changed = 0;     // touched during their IO: kept in RAM
  std::uint64_t failed = 0;      // IO failed: kept in RAM
  // (Neither is charged to the budget.)
  // OK, or the error that stopped the pass or the last IO error:
  // kIoError (an IO failed; also "writeback_limit reached", as zram's EIO),
  // kResourceExhausted (the backing store or its file system is full, with
  // `full`; without it memory ran out: an encrypted IO could not be sealed,
  // BlockWriter::Done::full).
  Status status;
  // The pass stopped for want of room on the backing store or its file
  // system (ENOSPC), not of memory (ENOMEM).
  bool full = false;
  // The budget stopped the pass: a page, or a unit's blocks, it could not
  // pay for (some budget may be left: a unit is charged whole).
  bool limit_reached = false;
};

// ---- recompression (zram's `recompress` attribute, recompress_store()) ----

// Which slots a pass picks, beyond "allocated, not SAME, not WB, not
// INCOMPRESSIBLE, stored below the pass's last priority". 0 picks every such
// slot; huge_idle is both bits.
enum RecompressFilter : unsigned {
  kRecompressIdle = 1u << 0,
  kRecompressHuge = 1u << 1,
};

struct RecompressRequest {
  unsigned filter = 0;
  // The priorities a slot may be recompressed with: [priority, priority_end),
  // tried in ascending order from max(priority, slot's priority + 1), the
  // first that wins kept. A priority with no codec is skipped. priority_end
  // is clamped to the highest configured priority + 1.
  int priority = 1;
  int priority_end = kMaxCodecPriorities;
  // Slots tried at most (zram's max_pages): every slot whose page was read
  // and compressed again counts, won or not. A slot whose object does not
  // decompress does not count, and the pass goes on past it
  // (RecompressResult::damaged).
  std::uint64_t max_pages = UINT64_MAX;
  // 0, or only slots whose object is at least this many bytes, and a result
  // wins only below it (zram's threshold=). Must be below the pool's huge
  // class size.
  std::size_t threshold = 0;
  // Called on the pass's thread between batches: false ends the pass early
  // (what is done stays done). The post-processing policy paces itself
  // with it. Null: the pass runs to the end.
  std::function<bool()> pace;
};

struct RecompressResult {
  std::uint64_t candidates = 0;      // slots the scan picked
  std::uint64_t attempted = 0;       // counted against max_pages
  std::uint64_t recompressed = 0;    // now smaller, at a secondary priority
  std::uint64_t incompressible = 0;  // marked INCOMPRESSIBLE by this pass
  std::uint64_t changed = 0;         // touched during the pass: left alone
  // Did not decompress (damaged): left as they are, their pages still an
  // error (kCorruption, counted in decompress_fail); not in attempted.
  std::uint64_t damaged = 0;
  std::uint64_t bytes_before = 0;    // object bytes of the recompressed slots
  std::uint64_t bytes_after = 0;     // ... and after
  std::uint64_t bytes_saved() const {
    return bytes_before > bytes_after ? bytes_before - bytes_after : 0;
  }
  // OK, or kResourceExhausted: an allocation failed, the pass stopped there
  // (that slot keeps its old object, as zram's recompress_slot()).
  Status status;
};

// ---- dictionaries (ztier ctl train_dict) ----
//
// A store can train a dictionary from its own pages and compress with it
// from then on (TrainDictionary). Ids 1..3 name the store's dictionaries
// (0: none); every object records the id it was made with, so an object
// made with an older dictionary stays readable until it is rewritten,
// discarded or recompressed. The newest one is used by every store, by the
// recompression pass (for each priority whose algorithm takes a
// dictionary: zstd, lz4), and not by the others. A dictionary's memory
// (codec.h, dictionary_bytes; its bytes and zstd's CDict and DDict) counts
// in mem_used_total and against mem_limit for as long as it is held: while
// it is the newest, or any object made with it lives, or a compression
// stream that has not stored since it was replaced still compresses with
// it; after that, until the next TrainDictionary, which releases it.
// The sizes a trained dictionary may be asked for (dict_bytes below).
inline constexpr std::size_t kMinDictBytes = 1024;
inline constexpr std::size_t kMaxDictBytes = std::size_t{1} << 20;

struct TrainDictRequest {
  std::size_t dict_bytes = 16 * 1024;  // at most; kMinDictBytes..kMaxDictBytes
  // Pages sampled, evenly across the store's compressed pages (SAME, HUGE
  // and written-back ones are not sampled), half to train on (0: 100 bytes
  // per byte of dictionary, ZDICT's advice) and half held out to judge
  // the result; 0: 512..16384 pages by that rule. At most 16384.
  std::size_t max_samples = 0;
};

struct DictionaryInfo {
  int id = 0;                   // 1..3
  std::size_t bytes = 0;        // the dictionary's size
  std::size_t memory = 0;       // counted in mem_used_total
  std::size_t samples = 0;      // pages it was trained on
  // The held-out samples compressed by the primary algorithm without a
  // dictionary and with this one (a page kept raw counts 4096 bytes).
  std::size_t sample_bytes_without = 0;
  std::size_t sample_bytes_with = 0;
  bool content_only = false;    // used as plain content (see below)
};

// What one slot holds, for tests, block_state and post-processing.
struct SlotInfo {
  bool allocated = false;  // size != 0 || SAME || WB
  bool same = false;
  bool huge = false;
  bool idle = false;
  bool wb = false;
  bool incompressible = false;
  bool pp = false;
  int priority = 0;
  int dict = 0;          // the dictionary its object was made with
  bool unit = false;     // a page of a multi-page object
  std::size_t unit_live = 0;  // ... which holds this many live pages
  std::size_t size = 0;  // compressed bytes (kPageSize when HUGE)
  std::uint32_t ac_time = 0;
  std::uint64_t fill = 0;  // the fill word when SAME
};

// What a slot reads as, for block-status queries (NBD's base:allocation):
// never written or discarded, a same-filled page of zero bytes, or anything
// else (data in RAM or on the backing store, a non-zero fill word).
enum class SlotState : std::uint8_t { kEmpty, kZero, kData };

// What StoreBatch does when the pool or mem_limit refuses the batch.
enum class BatchRefusal : std::uint8_t {
  kAllOrNothing,  // the range is left empty (zswap's store)
  kKeepPrefix,    // then page by page until one fails (a block device)
};

// Every counter the store keeps. Names follow zram's mm_stat/io_stat/
// debug_stat columns and zswap's debugfs files.
struct PageStoreStats {
  // mm_stat
  std::uint64_t orig_data_size = 0;   // pages stored * 4096 (incl. SAME, WB)
  std::uint64_t compr_data_size = 0;  // excl. SAME and WB; HUGE = 4096
  std::uint64_t mem_used_total = 0;   // pool bytes incl. its metadata
  std::uint64_t mem_limit = 0;
  // The peak of mem_used_total: recorded after each store's allocations
  // (also of a store or batch then refused, as zram's
  // zram_can_store_page()) and after a dictionary is trained.
  std::uint64_t mem_used_max = 0;
  std::uint64_t same_pages = 0;
  std::uint64_t pages_compacted = 0;
  std::uint64_t huge_pages = 0;
  // HUGE pages stored by the clients' stores (cumulative), as zram counts
  // those of its writes; not the store's own rewrites (a unit's reclaim,
  // recompression).
  std::uint64_t huge_pages_since = 0;
  // io_stat
  std::uint64_t failed_reads = 0;
  std::uint64_t failed_writes = 0;
  std::uint64_t notify_free = 0;
  // debug_stat
  std::uint64_t miss_free = 0;
  // zswap-style
  std::uint64_t stored_pages = 0;          // slots allocated (incl. SAME)
  std::uint64_t pool_total_size = 0;       // == mem_used_total
  std::uint64_t reject_compress_poor = 0;
  // Kept for zswap's name and always 0: zswap counts a compressor's error
  // here, but a Compressor can fail only by not fitting (codec.h), which is
  // reject_compress_poor.
  std::uint64_t reject_compress_fail = 0;
  // Stores (Store, StorePartial, StoreBatch, a unit's store) the pool
  // refused for lack of memory, as zswap's counter counts zswap_store's
  // failed zpool_malloc (mm/zswap.c). Not the store's own rewrites: a
  // unit's reclaim the pool refuses counts in units_reclaim_refused, and
  // a recompression pass the pool refuses says so in its result (zram's
  // recompress_slot counts none either).
  std::uint64_t reject_alloc_fail = 0;
  std::uint64_t pool_limit_hit = 0;
  std::uint64_t same_filled_pages = 0;     // == same_pages
  std::uint64_t decompress_fail = 0;
  // bd_stat, in pages: blocks in use, pages read from and written to the
  // backing store (cumulative; as zram, every write that succeeded, also of
  // a page that changed during it and stayed in RAM)
  std::uint64_t bd_count = 0;
  std::uint64_t bd_reads = 0;
  std::uint64_t bd_writes = 0;
  // Backing blocks lost with a remote backing device (BackingStore::
  // lost_blocks; cumulative).
  std::uint64_t bd_lost = 0;
  // operation counts
  std::uint64_t stores = 0;   // pages successfully stored (cumulative)
  std::uint64_t loads = 0;    // pages successfully loaded (cumulative)
  // recompression: pool objects (in RAM, not SAME) stored with each
  // priority's codec now (priority 0 includes HUGE pages, kept raw); slots marked INCOMPRESSIBLE now; and, cumulative,
  // slots a pass tried and slots it made smaller.
  std::array<std::uint64_t, kMaxCodecPriorities> priority_pages{};
  std::uint64_t incompressible_pages = 0;
  std::uint64_t recompress_attempts = 0;
  std::uint64_t recompressed_pages = 0;
  // dictionaries: the one new stores use (0: none), the memory the held
  // ones take (part of mem_used_total), and objects made with each id
  // (in RAM or written back compressed, plus, for a moment, each batched
  // load decompressing one's objects; [0]: unused).
  int dict_id = 0;
  std::uint64_t dict_memory = 0;
  std::array<std::uint64_t, 4> dict_pages{};
  // units (unit_pages): multi-page objects live, the pages attached to
  // them, and the survivors of units reclaimed page by page (cumulative);
  // and the reclaims the pool refused room for a survivor (cumulative, one
  // per try: the unit stays whole and is tried again by a later call).
  std::uint64_t units = 0;
  std::uint64_t unit_pages = 0;
  std::uint64_t units_reclaimed = 0;
  std::uint64_t units_reclaim_refused = 0;
};

class PageStoreTestPeer;
namespace internal {
class RecompressPass;
class WritebackPass;
}  // namespace internal

class PageStore {
 public:
  // Checks the options (num_pages, codec name and params, batch size) and
  // builds the slot table, pool and streams. Errors name the bad option;
  // a dict= file that cannot be read keeps its errno (ErrnoNameOf).
  static Result<std::unique_ptr<PageStore>> Create(
      const PageStoreOptions& options);
  ~PageStore();
  PageStore(const PageStore&) = delete;
  PageStore& operator=(const PageStore&) = delete;

  std::size_t num_pages() const;
  const Codec& codec() const;
  // The codec at `priority` (0: the primary), or null where none is set.
  const Codec* codec_at(int priority) const;
  std::size_t batch_size() const;
  BatchBackend batch_backend() const;
  std::size_t unit_pages() const;  // 0: no units

  // Stores one page in slot `index`. kOutOfRange for a bad index;
  // kResourceExhausted when the pool or mem_limit refuses it (the slot keeps
  // what it had); with store_incompressible false, also for a page that does
  // not compress.
  Status Store(std::uint64_t index, ConstPage page);

  // Replaces data.size() bytes of slot `index` at `offset` (a sub-page
  // write): reads the page under the slot's lock, patches and compresses it
  // without the lock, and installs it only if the slot did not change
  // meanwhile; otherwise it starts again from the newer content, so that
  // concurrent writes to the same page are never lost. Errors as Store(), plus
  // those of reading the old content, as Load() (kCorruption if it does not
  // decompress; kIoError or kCorruption for a written-back page whose block
  // cannot be read or fails authentication), with the slot unchanged and
  // the failure counted in failed_writes, not failed_reads.
  // kOutOfRange if offset + data.size() > 4096.
  Status StorePartial(std::uint64_t index, std::size_t offset,
                      std::span<const std::byte> data);

  // Stores pages.size() / 4096 consecutive pages from slot `first` (any
  // count; compressed batch_size() at a time). All-or-nothing: on failure,
  // every slot of the range is left empty and the first error is returned.
  // With kKeepPrefix, a batch refused for memory (kResourceExhausted, the
  // pool or mem_limit; not an incompressible page refused) is then stored
  // again one page at a time, in order, until a page fails, as a block
  // device writes a request's pages: the pages before that one hold the
  // new data, it and the ones after it are empty. Either way a failed call
  // counts one failed write, as zram counts one per request; the page that
  // fails on the retry counts in pool_limit_hit or reject_alloc_fail as an
  // attempt of its own.
  // REQUIRES: pages.size() is a multiple of 4096.
  Status StoreBatch(std::uint64_t first, std::span<const std::byte> pages,
                    BatchRefusal on_refusal = BatchRefusal::kAllOrNothing);

  // Reads slot `index` into `out` (zeros if never written). kCorruption if
  // the stored object does not decompress (failed_reads counts it). A load
  // that succeeds is an access (the slot's access time is now, IDLE and
  // PP are cleared, `loads` counts it); one that fails is none.
  Status Load(std::uint64_t index, MutablePage out);

  // Reads out.size() / 4096 consecutive slots from `first` (the readahead
  // path). With the parallel backend, each batch's compressed objects are
  // copied out under their slot locks and decompressed in one fanned-out
  // DecompressBatch call; with the serial backend each page is decompressed
  // straight from the pool, which is the cheaper way on one thread. Each
  // page is loaded or fails on its own; `statuses`, if not empty, receives
  // each page's result (REQUIRES: one per page), and is an access only if
  // it succeeded, as Load(), and only of the page it read: a page stored
  // over the slot while the batch decompressed is not marked accessed.
  // Returns the first error.
  Status LoadBatch(std::uint64_t first, std::span<std::byte> out,
                   std::span<Status> statuses = {});

  // Frees slot `index` (a discard or swap_slot_free_notify): notify_free
  // counts it. Freeing an empty slot is a no-op apart from the count.
  // kOutOfRange for a bad index.
  Status Discard(std::uint64_t index);

  // Like Discard, but if the slot's lock is held the slot is left as it is
  // and miss_free counts it (zram's swap_slot_free_notify with trylock).
  Status TryDiscard(std::uint64_t index);

  // zram's `idle` attribute: MarkIdleAll() sets IDLE on every allocated slot
  // that is not SAME or WB; MarkIdleOlderThan(age) sets it where the last
  // access is more than `age_seconds` ago and clears it elsewhere (age 0:
  // on every such slot, as zram's nanosecond cutoff does).
  void MarkIdleAll();
  void MarkIdleOlderThan(std::uint32_t age_seconds);

  // Writes the slots the scans pick to the backing store, largest compressed
  // size first, and frees their RAM. Selection marks each candidate PP
  // under its lock; any access (load, store, discard) clears PP. A slot is
  // copied out under its lock (decompressed, or the raw object when
  // `compressed`), written with its neighbours in batched IO, and on
  // completion relocked: if PP is still set its RAM copy is freed and it
  // becomes WB; otherwise it keeps its new content and its block is freed.
  // A failed IO leaves its slots as they were. Passes run one at a time
  // (a second caller waits). kNotFound without a backing store;
  // kOutOfRange for a scan past the end. Slot loads, stores and discards
  // never wait for the IO: only for the copy-out of that one slot.
  Result<WritebackResult> Writeback(const WritebackRequest& request);
  bool has_backing() const;

  // Recompresses the slots the request picks with the secondary codecs, as
  // zram's recompress_store() and recompress_slot():
  //   1. Select: each allocated slot that is not SAME, WB or INCOMPRESSIBLE,
  //      passes the filter and the threshold, and whose priority + 1 is
  //      below priority_end, is marked PP under its lock. Largest objects
  //      first.
  //   2. A batch of kMaxPassBatchSize candidates at a time: under each
  //      slot's lock, recheck PP, copy its object out and clear IDLE; then,
  //      with no lock held, decompress it (with the codec of its priority)
  //      and compress the batch with each priority's codec in turn, through
  //      the batch codec: the parallel backend fans both, and the
  //      allocation of each win, out over the cores.
  //   3. A result wins if its pool size class is smaller than the old
  //      object's, and (with a threshold) it is below the threshold. A win
  //      is allocated, then installed under the slot's lock if PP is still
  //      set: the old object is freed, the slot keeps its access time and
  //      takes the new priority; HUGE is cleared. A slot with no win after
  //      the highest configured priority was tried is marked
  //      INCOMPRESSIBLE. A slot stored, discarded or read during the pass
  //      has lost PP and keeps its newer content.
  //   4. A pass that recompressed anything compacts the pool (Compact()),
  //      which zram leaves to its `compact` attribute: each win leaves a
  //      hole in a larger class. Not with a reserve (prealloc), which keeps
  //      the pages a compaction frees while its map takes memory: there,
  //      `compact` by hand, as zram.
  // Passes and writeback passes run one at a time (a second caller
  // waits). Client IO never waits for a pass, only for the copy-out or
  // swap of one slot. kInvalidArgument when no priority in the range has a
  // codec, or for a threshold at or above the pool's huge class size.
  Result<RecompressResult> Recompress(const RecompressRequest& request);

  // Trains a dictionary on a sample of the stored pages (codec.h,
  // TrainDictionary) and makes it the one new stores and recompression
  // use, under a free id: one no object uses and that is not the newest.
  // For zstd it tries the trained dictionary as it is (with its entropy
  // tables) and as plain content (DictionaryContent), and keeps the form
  // that compresses the samples smaller; lz4 takes the content. A
  // dictionary that does not make the samples smaller than the primary
  // algorithm alone is not used (kFailedPrecondition, with both sizes).
  // Runs as a post-processing pass (one at a time with writeback and
  // recompression); stores go on meanwhile, each stream switching to the
  // new dictionary at its next store (which makes the stream's compressor
  // anew: an allocation, once). Errors: kInvalidArgument if the primary
  // algorithm takes no dictionary, for a size out of range, or when ZDICT
  // cannot train on the samples (too few pages, too alike);
  // kResourceExhausted when all three ids are held (objects of each still
  // live: recompress, write back or rewrite them first) or when the
  // dictionary's memory would pass mem_limit.
  Result<DictionaryInfo> TrainDictionary(const TrainDictRequest& request);

  // Compacts the pool; returns the pages its held pages fell by.
  std::size_t Compact();
  // The pages a Compact() now could free: each class's held pages past
  // those its objects need once packed (Pool::CompactablePages). Takes
  // each class lock for a moment; does not allocate.
  std::size_t CompactablePages() const;

  // mem_limit in bytes (0: none), changeable at run time. Rounded up to pages.
  void SetMemLimit(std::size_t bytes);
  // mem_used_max := current use (zram: writing "0" to mem_used_max).
  void ResetMemUsedMax();

  SlotInfo Inspect(std::uint64_t index) const;
  // The states of slots [first, first + out.size()); kOutOfRange if any is
  // past the end. Read-only: access times and the IDLE/PP marks are left
  // alone, and an unlocked slot that is not SAME is read with one atomic
  // load of its flags, without taking its lock (so untouched parts of the
  // slot table stay unfaulted). So is a written-back slot, locked or not
  // (kData): its holder may be reading it from the backing store, which
  // can take up to the backing store's timeout, and the call never waits
  // for the backing store. Any other locked slot, and a SAME one (whose
  // fill word is needed), is read under its lock, which in-memory work
  // holds for a moment. Each state is exact at some moment during the
  // call; a concurrent store may change it right after.
  Status SlotStates(std::uint64_t first, std::span<SlotState> out) const;
  // Whether loading a slot of [first, first + count) may read the backing
  // store: one holds a written-back page, or a member of a written-back
  // unit. A hint for a caller choosing a thread that may block, read with
  // one atomic load per slot and no lock: a writeback or a load may change
  // it right after. False without a backing store; slots past the end are
  // not looked at.
  bool MayReadBacking(std::uint64_t first, std::size_t count) const;
  PageStoreStats Stats() const;

  // Slot table plus pool metadata, in bytes.
  std::size_t MetadataBytes() const;
  // The pool's size in bytes, Pool::TotalBytes() (the pages it holds for
  // objects plus its metadata), plus the memory of the dictionaries held:
  // mem_used_total, the figure a pool limit is checked against (zswap's
  // pool size). Any thread; exact at some moment during the call.
  std::size_t PoolBytes() const;
  const Pool& pool() const;

  // The kernel's exact text formats (mm_stat_show(), io_stat_show(),
  // debug_stat_show() and bd_stat_show() in drivers/block/zram/zram_drv.c).
  std::string FormatMmStat() const;
  std::string FormatIoStat() const;
  std::string FormatDebugStat() const;
  std::string FormatBdStat() const;  // "%8llu %8llu %8llu\n", 4 KiB units
  // zram's debugfs block_state (read_block_state()): one line per allocated
  // slot, "%12zd %12u.%06d %c%c%c%c%c%c\n": index, access time in seconds
  // (".000000": ztier keeps seconds), and the flags s (SAME), w (WB),
  // h (HUGE), i (IDLE), r (priority > 0), n (INCOMPRESSIBLE), '.' if unset.
  // Slots [first, first + count), clamped to the store.
  std::string FormatBlockState(std::uint64_t first = 0,
                               std::uint64_t count = UINT64_MAX) const;

 private:
  friend class PageStoreTestPeer;
  friend class internal::RecompressPass;
  friend class internal::WritebackPass;
  PageStore();
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ztier

#endif  // ZTIER_PAGE_STORE_H_
