// File: ztier/region.h
//
// Region: ztier's zswap front end. A region is anonymous memory whose cold
// pages are compressed into a PageStore and dropped from RAM, and come back
// when touched, with no kernel setting: the memory is registered with
// userfaultfd, and a handler thread resolves its faults.
//
//   auto r = ztier::Region::Create({.size = 1 << 30, .budget = 256 << 20});
//   std::byte* p = (*r)->data();        // use it like any memory
//   std::memset(p, 1, 1 << 30);         // cold pages are compressed away
//   ZT_RETURN_IF_ERROR((*r)->Pageout(p, 64 << 20));  // like MADV_PAGEOUT
//   ztier::RegionStats s = (*r)->Stats();            // zswap's counters
//
// Page states (one per 4 KiB page):
//   untouched -> resident       first touch (a missing fault: the handler
//                               installs zeroed pages, for a whole run of
//                               untouched neighbours at once)
//   resident  -> stored         eviction (the reclaimer, or Pageout)
//   stored    -> resident       a touch (missing fault: decompress, then
//                               UFFDIO_COPY); the slot is freed (zswap's
//                               exclusive loads)
//   stored    -> written back   the pool is over its limit (the shrinker)
//   written back -> resident    a touch (read the block, then UFFDIO_COPY)
//
// Dropping pages: madvise(MADV_DONTNEED) on region memory reads as zeros
// afterwards only for pages that were resident. A page that was stored or
// written back keeps its content (ztier does not see the call), so code
// that relies on DONTNEED to zero memory (an allocator purging pages, say)
// must not run on a region; Region::Discard drops pages of any state. The
// call itself is safe at any time, an eviction of the same pages included;
// a page dropped while it is being evicted (after its copy was taken) ends
// stored, and keeps its old content as a stored page does.
//
// Eviction (the reclaimer runs when resident pages exceed `budget`, down to
// `budget` minus 1/32 of it; Pageout evicts the resident pages of its range):
//   1. Pick victims. The hardware accessed bit is invisible from userspace,
//      so recency is approximated by fault-in order: a CLOCK over resident
//      pages whose reference bit is set when a page is faulted in and
//      cleared when the hand passes (second chance). A page that has been
//      resident longest without a fault is evicted first. Accesses to
//      resident pages are not seen; DESIGN NOTE in region.cc says more.
//   2. Write-protect them (UFFDIO_WRITEPROTECT), so a write during
//      compression blocks in a WP fault instead of being lost.
//   3. Compress and store, from a copy read through /proc/self/mem (a page
//      the application dropped since step 1 cannot be read, and is left
//      out: it reads as zeros at its next touch): runs of >= 16
//      consecutive victims go through PageStore::StoreBatch in 16-page
//      (64 KiB) units, all-or-nothing per unit, with the batch codec
//      (batch_size at a time); other pages one by one (Store). A unit
//      whose batch store fails (one page does not compress, say) is then
//      stored page by page, as the kernel splits a large folio it cannot
//      swap out whole (swpout_fallback counts them).
//      With `batch_stores` false every page goes through Store (the
//      one-page-at-a-time baseline of `ztier usemem`).
//   4. Zap the stored pages (MADV_DONTNEED), one call per consecutive run,
//      then wake any writer blocked in step 2: its retried access faults
//      the page back in, with its data.
//   A page that is refused stays resident and writable: without a backing
//   store, a page that does not compress (reject_compress_poor); while the
//   pool is full (pool_limit_hit, see below). After a reclaimer pass that
//   evicted under half its victims, the next waits until G = max(budget/32,
//   256 pages) more pages are resident and takes at most G victims, until
//   one evicts well again: memory that does not compress costs a bounded
//   share of compression, not a pass at every fault.
//
// Fault-in: a missing fault on a stored page decompresses it; with
// page_cluster > 0, the stored (not written-back) neighbours in the aligned
// window of 2^page_cluster pages around it are decompressed in the same
// batch (PageStore::LoadBatch) and installed too (the zswap decompress
// batching series in docs/references.md): swap_ra counts pages read ahead.
// With count_ra_hits, swap_ra_hit counts those of them later written
// before being evicted again: they are installed write-protected, so the
// first write to each is a write-protect fault through the handler (a read
// of one is not seen: DESIGN NOTE in region.cc). That costs a round trip
// and a TLB flush per page written, so it is off by default (swap_ra_hit
// stays 0). Faults from system calls work (the handler resolves them like
// any other): write(fd, region_page, n) succeeds with the right bytes.
//
// Pool limit (zswap's max_pool_percent / accept_threshold_percent): when the
// pool reaches max_pool_bytes, stores are refused (pool_limit_hit) until it
// falls to accept_threshold_percent of that. With a backing store, the
// shrinker then writes back the oldest stored pages (FIFO by store time,
// second chance for pages stored since the last shrink) until the pool is
// under the accept threshold, with the store's batched writeback pass.
//
// Threads: one handler thread per region resolves faults and runs the
// reclaimer. Pageout and Stats may be called from any thread. Every region
// method except the destructor may run while other threads touch the
// memory. The destructor must not run while another thread touches it.
// A reclaim pass or a Pageout holds the region's lock throughout: every
// fault of the region waits for it to end (a reclaim pass is 1/32 of the
// budget). The handler and the store's worker threads run with every
// signal blocked, so no handler of a process-directed signal runs on
// them. A signal handler that touches region memory must not run on a
// thread inside Pageout or Discard either (its fault would wait for that
// call, which waits for the handler): block such signals around them.
// A fork()ed child does not inherit the memory (MADV_DONTFORK: it would
// not inherit the userfaultfd registration, and would read evicted pages
// as zeros); a child that touches it gets SIGSEGV. In the child, Pageout
// and Discard fail (kFailedPrecondition), Stats are zeros, and destroying
// its copy of the Region leaves the parent's region alone.
//
// Not supported: moving or unmapping part of the region (mremap, munmap,
// mmap MAP_FIXED over it): a page moved away loses its stored copy (it
// reads as zeros at its new address) and the region keeps counting it.
// Nor DMA into region memory (O_DIRECT reads, io_uring fixed buffers,
// RDMA) that may still be writing when the page is evicted: userspace
// cannot see a pin, and that write would be lost with the dropped page.
// Locking: the region's memory is mapped so that a mlockall(MCL_FUTURE)
// made before Create neither locks nor faults it in; mlock() or
// mlockall(MCL_CURRENT) after Create fault in and pin the pages they
// cover, which then stay resident (their evictions are refused).
// If the handler can no longer read the userfaultfd (an error no correct
// program meets), the process is aborted with a message on stderr: no
// other thread could answer the region's faults. Running out of memory
// (std::bad_alloc) loses and blocks nothing: an eviction keeps resident
// what it had not stored yet, the handler answers a fault when it comes
// again, and Pageout throws only before its eviction begins.
//
// Requirements: userfaultfd with UFFD_FEATURE_PAGEFAULT_FLAG_WP on
// anonymous memory (Linux 5.7+), and the right to use it (root, or
// vm.unprivileged_userfaultfd=1, or access to /dev/userfaultfd). Create()
// says which one is missing (kUnsupported). /proc mounted: without
// /proc/self/pagemap and /proc/self/mem, Create succeeds (saying so on
// stderr) but eviction reads pages in place, and the "Dropping pages"
// guarantee above is gone: a Pageout or reclaim pass over a page the
// application dropped with madvise, before or during it, waits for good
// on that page's fault (the fault waits for the region's lock, which the
// eviction holds). Such a program must drop region pages with Discard
// only.
#ifndef ZTIER_REGION_H_
#define ZTIER_REGION_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "ztier/backing_store.h"
#include "ztier/batch_codec.h"
#include "ztier/status.h"

namespace ztier {

struct RegionOptions {
  std::size_t size = 0;    // bytes, rounded up to pages; 0 is an error
  std::size_t budget = 0;  // resident bytes before the reclaimer runs; 0:
                           // no reclaimer (only Pageout evicts); else at
                           // least 256 KiB (a first touch maps 64 pages)
  std::string codec = "lz4";
  std::string algorithm_params;
  // Pool limit: max_pool_bytes if set, else max_pool_percent of the budget
  // (of size when budget is 0), as zswap's max_pool_percent of RAM.
  std::size_t max_pool_bytes = 0;
  unsigned max_pool_percent = 20;
  unsigned accept_threshold_percent = 90;
  // Written-back pages go here; null: no writeback, and incompressible
  // pages stay resident. The region frees its blocks when destroyed.
  std::shared_ptr<BackingStore> backing;
  unsigned page_cluster = 0;   // readahead window 2^page_cluster pages, 0..5
  bool count_ra_hits = false;  // swap_ra_hit, at one WP fault per page
  BatchBackend batch_backend = BatchBackend::kParallel;
  std::size_t batch_size = kMaxBatchSize;
  bool batch_stores = true;  // false: every page stored one at a time
};

// zswap's debugfs and vmstat counter names, plus the region's own.
struct RegionStats {
  // zswap debugfs
  std::uint64_t pool_limit_hit = 0;
  std::uint64_t reject_reclaim_fail = 0;
  std::uint64_t reject_alloc_fail = 0;
  std::uint64_t reject_compress_fail = 0;  // always 0 (page_store.h)
  std::uint64_t reject_compress_poor = 0;
  std::uint64_t written_back_pages = 0;
  std::uint64_t pool_total_size = 0;  // bytes
  std::uint64_t stored_pages = 0;     // in the pool now
  std::uint64_t stored_incompressible_pages = 0;
  // vmstat
  std::uint64_t zswpin = 0;   // pages loaded back (incl. read ahead)
  std::uint64_t zswpout = 0;  // pages stored
  std::uint64_t zswpwb = 0;   // pages written back
  std::uint64_t swap_ra = 0;
  std::uint64_t swap_ra_hit = 0;
  // the region
  std::uint64_t resident_pages = 0;
  std::uint64_t written_back_now = 0;  // pages on the backing store now
  std::uint64_t faults = 0;            // missing faults resolved
  std::uint64_t wp_faults = 0;         // writes that hit a page being evicted
  std::uint64_t evictions = 0;         // reclaimer and Pageout passes
  // 16-page units whose batch store failed and that were stored page by
  // page instead (the kernel's swpout_fallback: a large folio split).
  std::uint64_t swpout_fallback = 0;
};

class RegionTestPeer;

class Region {
 public:
  // Maps the memory, registers it with userfaultfd, starts the handler.
  // kInvalidArgument for bad options (naming the option), kUnsupported when
  // userfaultfd is unavailable (saying why), kResourceExhausted when the
  // mapping fails or the process has no file descriptor (or memory) left
  // for the userfaultfd, its eventfd, /proc/self/pagemap or /proc/self/mem.
  static Result<std::unique_ptr<Region>> Create(const RegionOptions& options);
  // Stops the handler, unmaps the memory, frees every pool object and
  // backing block the region holds.
  ~Region();
  Region(const Region&) = delete;
  Region& operator=(const Region&) = delete;

  std::byte* data() const;
  std::size_t size() const;

  // Evicts the resident pages of [addr, addr + len) (rounded out to pages),
  // as MADV_PAGEOUT would: steps 2-4 above. kOutOfRange if the range is not
  // inside the region. Refused pages stay resident; the call still
  // succeeds (the counters say why).
  Status Pageout(void* addr, std::size_t len);

  // Drops the pages of [addr, addr + len) (addr page-aligned, len rounded
  // up to pages), as madvise(MADV_DONTNEED) does to plain memory, whatever
  // their state: resident pages are unmapped, stored and written-back ones
  // freed; each reads as zeros at its next touch. Use it, not madvise, to
  // give region memory back (see "Dropping pages" above). A page lost to a
  // failed load stays poisoned. kOutOfRange if the range is not inside the
  // region, kInvalidArgument for an unaligned addr. An error of madvise
  // (the application mlocked part of the range, say) is returned and no
  // stored page is freed; resident pages before the mapping it stopped at
  // may already read as zeros.
  Status Discard(void* addr, std::size_t len);

  RegionStats Stats() const;

 private:
  friend class RegionTestPeer;  // region_test.cc
  Region();
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ztier

#endif  // ZTIER_REGION_H_
