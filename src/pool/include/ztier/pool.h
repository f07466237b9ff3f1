// File: ztier/pool.h
//
// Pool: the allocator for compressed objects, after the kernel's zsmalloc.
//
// Why not malloc: compressed pages are 32..4096 bytes of every size, stored by
// the million and freed in random order. A general allocator rounds them up,
// keeps per-object headers, and cannot give back a page while one object on
// it lives. Pool packs objects of one size class tightly into "zspages" and
// can move them (compaction) to empty whole pages and return them to the OS.
//
// Layout:
//   size classes   every 16 bytes from 32 to 4096 (255 classes; index
//                  (size - 32 + 15) / 16). Each class stores its objects in
//                  zspages of 1..max_pages_per_zspage (8 by default)
//                  contiguous OS pages; the page count is the one that
//                  wastes the least of the zspage's tail (ties go to fewer
//                  pages). Classes with the same (pages per zspage,
//                  objects per zspage) are merged into the largest of them.
//                  Objects above the largest class that packs more than one
//                  object per zspage go to the huge class: one 4096-byte
//                  object per 1-page zspage. HugeClassSize() is that
//                  watermark: the store keeps pages compressing to at least
//                  that many bytes raw, as zram does.
//   packed page    4096-byte objects, one a page, in zspages of
//   class          max_pages_per_zspage pages (MallocWholePage): one
//                  descriptor for that many pages, where the huge class
//                  takes one a page. For pages allocated and freed
//                  together; a page freed alone stays held (the class's
//                  next page takes its place first) until the rest of its
//                  zspage goes or compaction moves them, and an emptied
//                  zspage is the class's spare, as in every class. With a
//                  reserve, a packed zspage needs a free run of its
//                  length; where there is none, MallocWholePage takes a
//                  page of the huge class instead.
//   zspage         a run of OS pages carved from a large mmap'd arena (not
//                  one malloc per object). An object never crosses the end of
//                  its zspage and, since the run is contiguous, is one span.
//                  Objects are placed at the lowest free index, and pages of
//                  a zspage are only touched (and so only resident) up to the
//                  last object placed: a half-empty zspage does not hold RAM
//                  for its empty tail.
//   handle         an opaque 64-bit value, never 0, naming one object. It
//                  stays valid when compaction moves the object.
//
//   +---------------- arena (mmap, MAP_NORESERVE) -----------------------+
//   | zspage(class 37, 3 pages) | zspage(huge) | zspage(class 37) | free  |
//   +--------------------------------------------------------------------+
//       ^ objects [0][1][2].. at 16*k-byte strides, lowest free first
//
// Memory accounting: TotalBytes() = pages currently held for objects (the
// touched pages of every zspage) * 4096 + the pool's own metadata (zspage
// descriptors, handle tables). It is what zram reports as mem_used_total.
//
// Churn: when a zspage empties, the class keeps it (pages and all) as a
// spare for its next allocation rather than returning the pages to the OS
// and faulting fresh ones in soon after; at most one spare per class, held
// pages counted in TotalBytes(), released by Compact().
//
// Compaction (Compact()): per class, releases the spare, moves objects from the
// sparsest zspages into the fullest, frees emptied zspages, then packs the last
// partial zspage toward its front; every page freed goes back to the OS with
// madvise(MADV_DONTNEED) (not with a reserve: see below) and is counted in
// pages_compacted, less the pages that moves touched in a destination's
// untouched tail: the count is what the held pages fell by. It holds a class's
// lock for a few dozen moves at a time, so Malloc and Free of the class go on
// meanwhile; what they change under it may leave a class less than fully
// compacted (best effort).
//
// Reserve (PoolOptions::prealloc_bytes > 0): at Create() the pool maps that
// much memory and faults every page of it in (MADV_POPULATE_WRITE), and from
// then on takes every zspage from it and nothing from anywhere else: no
// arena is mapped, no page is faulted in, pages freed by Free() or
// Compact() stay resident in the reserve for the next zspage, and a Malloc
// the reserve cannot serve fails (kInvalidHandle) as one over the address
// space would. Its descriptor and handle tables are made at Create() too, so
// that Malloc and Free never allocate. This is for a pool that must keep
// working when the host has no memory to give (a swap device). The
// reserve is not in TotalBytes(): the statistics are those of the same pool
// without one (pages held for objects, metadata as it would have grown).
// Bookkeeping outside the bill: ~1.5% of the reserve (run tags and bitmap
// words, 28 bytes a page; descriptors for one zspage a page, 32 bytes).
// Zspages are contiguous runs, so a reserve whose free pages are scattered
// in short runs can refuse a long zspage before it is full (the reserve
// merges neighbouring free runs to keep that rare).
//
// Thread safety: all methods may be called concurrently. Each size class has
// its own lock (taken by Malloc, Free and Compact of that class). Read and
// Write do not take the class lock: they pin the object's zspage with a
// reader count, so compaction waits for them and they never see a half-moved
// object. The caller must not Free a handle while it reads or writes it, nor
// use a handle after freeing it.
#ifndef ZTIER_POOL_H_
#define ZTIER_POOL_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "ztier/status.h"

namespace ztier {

using Handle = std::uint64_t;
inline constexpr Handle kInvalidHandle = 0;

struct PoolOptions {
  // Longest zspage chain, in OS pages (zsmalloc's CONFIG_ZSMALLOC_CHAIN_SIZE).
  // 1..16.
  std::size_t max_pages_per_zspage = 8;
  // Virtual size of each arena; arenas are added as needed. Only touched
  // pages use memory. Unused with a reserve.
  std::size_t arena_bytes = std::size_t{1} << 30;
  // Without a reserve: back the arenas with transparent huge pages where
  // the kernel offers them (MADV_HUGEPAGE), and fault memory in 2 MiB at a
  // time, so that filling a fresh pool does not take a page fault per page.
  // A freed zspage's pages still go back to the OS (the kernel splits the
  // huge page). The cost: up to 2 MiB resident ahead of use, and, when
  // memory is fragmented, the kernel may compact memory to find a huge page
  // (/sys/kernel/mm/transparent_hugepage/defrag) or fall back to small
  // pages. false: small pages, each faulted in on first touch.
  bool huge_pages = true;
  // Bytes of objects' pages to preallocate and keep resident (rounded up
  // to pages), see "Reserve" above; the reserve adds room for the untouched
  // tail of the newest zspage of each class (478 pages, 1.9 MiB, with the
  // default 8-page chains). The pool then never maps more. 0: no reserve,
  // arenas grow lazily.
  std::size_t prealloc_bytes = 0;
  // With a reserve: the most objects expected live at once, to size the
  // handle table at Create(); beyond it the table grows (allocates). 0: as
  // many as the reserve could hold (8 bytes per 32 bytes of reserve).
  std::size_t prealloc_objects = 0;
};

// One row of zsmalloc's debugfs `classes` file.
struct PoolClassStats {
  int class_index = 0;
  std::size_t size = 0;  // object size in bytes
  // zspages by fullness: [0] <10% used (zsmalloc's "10%" column), [1] 10..20,
  // ..., [8] 80..90, [9] 90..99, [10] 100%. Mirrors ZS_INUSE_RATIO_*.
  std::size_t fullness[11] = {};
  std::size_t obj_allocated = 0;
  std::size_t obj_used = 0;
  std::size_t pages_used = 0;      // pages of this class's zspages held
  std::size_t pages_per_zspage = 0;
  std::size_t objs_per_zspage = 0;
  std::size_t freeable = 0;        // pages a compaction could free (estimate)
};

struct PoolStats {
  std::size_t total_bytes = 0;      // == TotalBytes()
  std::size_t pages_used = 0;       // OS pages held for objects
  std::size_t metadata_bytes = 0;
  std::size_t objects = 0;
  std::size_t object_bytes = 0;     // sum of requested sizes
  std::uint64_t pages_compacted = 0;  // cumulative
};

class Pool {
 public:
  // kInvalidArgument for bad options; with prealloc_bytes, the mmap or
  // populate error (kResourceExhausted for ENOMEM) when the reserve cannot
  // be had.
  static Result<std::unique_ptr<Pool>> Create(const PoolOptions& options = {});
  ~Pool();
  Pool(const Pool&) = delete;
  Pool& operator=(const Pool&) = delete;

  // Allocates an object of `size` bytes (1..4096). Returns kInvalidHandle when
  // memory (address space, the OS, or the reserve) runs out. The contents
  // are undefined until written.
  Handle Malloc(std::size_t size);

  // Allocates a 4096-byte object in the packed page class (see Layout):
  // for whole pages of data that are stored and freed together, such as a
  // multi-page unit's pieces, where one huge-class zspage a page would
  // cost a descriptor (32 bytes) a page. Falls back to the huge class
  // when the packed class cannot have a run; kInvalidHandle as Malloc.
  Handle MallocWholePage();

  // Frees the object. REQUIRES: h came from Malloc or MallocWholePage and
  // was not freed.
  void Free(Handle h);

  // Copies `data` into the object. REQUIRES: data.size() <= ObjectSize(h).
  void Write(Handle h, std::span<const std::byte> data);

  // Calls fn with the object's bytes (exactly the size passed to Malloc),
  // pinned in place for the duration of the call. fn must not call into the
  // pool. An exception from fn comes through, the object unpinned.
  void Read(Handle h,
            const std::function<void(std::span<const std::byte>)>& fn) const;

  // Copies the object into `out`; returns its size. REQUIRES: out is large
  // enough.
  std::size_t ReadInto(Handle h, std::span<std::byte> out) const;

  // The size passed to Malloc for h.
  std::size_t ObjectSize(Handle h) const;

  // The size class object sizes are rounded up to (16-byte step, merged).
  std::size_t ClassSizeFor(std::size_t size) const;

  // Objects of at least this many bytes go to the huge class.
  std::size_t HugeClassSize() const;

  // Compacts every class; returns the pages the pool's held pages fell by
  // (freed, less those the moves touched), as pages_compacted counts them.
  // Does not throw: a class whose temporary reverse map cannot be allocated
  // is left as it is (compaction is best effort).
  std::size_t Compact();

  // Returns every class's spare zspage to the OS (without compacting);
  // returns the pages freed. For callers that must get under a memory limit
  // now, e.g. after freeing an object that went over it.
  std::size_t ReleaseSpares();

  std::size_t TotalBytes() const;
  PoolStats Stats() const;
  // The merged classes, then the packed page class (class_index 255).
  std::vector<PoolClassStats> ClassStats() const;
  // The pages a Compact() now could free, without allocating: each class's
  // held (touched) pages past those its objects need once packed into full
  // zspages and the first pages of one partial zspage. What Compact() frees
  // when no other thread changes the pool meanwhile. Not ClassStats()'
  // freeable (zsmalloc's zs_can_compact), which counts whole zspages' worth
  // of free slots only: it counts untouched tail pages, which hold no
  // memory, and misses the holes of the last partial zspage.
  std::size_t CompactablePages() const;

  // zsmalloc's debugfs `classes` text: header, one row per class in use or
  // not (the packed page class last, as class 255), and a Total row.
  std::string FormatClasses() const;

 private:
  Pool();
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ztier

#endif  // ZTIER_POOL_H_
