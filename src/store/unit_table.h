// unit_table.h: the PageStore's multi-page objects (PageStoreOptions::
// unit_pages), one entry per aligned run of unit_pages slots.
//
// A unit is the pages of one aligned run [u * unit_pages, (u + 1) *
// unit_pages) that were stored together (StoreBatch of the whole run),
// compressed as one input: the run's pages that are not same-filled, in
// slot order (`members`, one bit per page of the run). The compressed
// object is split into `pieces`: full 4096-byte pool objects (the pool's
// packed page class, Pool::MallocWholePage), then its rest in a few
// power-of-two pieces (UnitPieceSizes below), or, once written back, one
// backing block per 4096 bytes or part. Each member slot has the
// UNIT flag (slot_table.h) and refers to the entry by its position.
//
// Entry rules (the lock is the slots' own; there is no lock of its own):
//   - gen, members, bytes, pieces, dict, wb and piece[] change only while
//     every slot of the run is locked (StoreUnit, reclaim, writeback), or,
//     when the last member leaves, by the thread that cleared its `live`
//     bit under that slot's lock (no other slot refers to the entry then).
//   - Holding the lock of a live member (its UNIT flag set) pins the entry:
//     it can neither be freed nor change, so a load reads it without more.
//   - `live` (the members still attached) is cleared bit by bit, each
//     under that member's lock, with atomic read-modify-writes.
//   - gen is unique in the process and never reused (0: the entry is
//     free), so a decompressed copy keyed by gen can never be stale.
// Locking every slot of a run takes them in ascending order, holding no
// other slot lock (and at most a compression stream, taken before them:
// stream before slot, docs/architecture.md). No other path holds two slot
// locks, so the order cannot deadlock.
//
// The table is one anonymous mapping, touched as units are made; the
// entries of live units count in mem_used_total (UnitTable::kEntryBytes
// each), as their metadata is what the units cost beyond their bytes.
#ifndef ZTIER_STORE_UNIT_TABLE_H_
#define ZTIER_STORE_UNIT_TABLE_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <utility>

#include "platform/mapping.h"
#include "ztier/page.h"
#include "ztier/status.h"

namespace ztier::internal {

inline constexpr std::size_t kMaxUnitPages = 16;
// A unit is kept only if it compresses to less than its members' pages, so
// its object never needs more than one block per page; its pool pieces
// are as many as this bound allows (UnitPieceSizes).
inline constexpr std::size_t kMaxUnitPieces = kMaxUnitPages;

// The sizes of the pool objects that hold a unit's compressed object of
// `len` bytes, in order; returns their count, at most kMaxUnitPieces (as
// 0 < len < kMaxUnitPages * kPageSize), none empty. Whole pages first, in
// the pool's packed page class (Pool::MallocWholePage): no waste, and one
// descriptor for several pages, as a unit's pages come and go together.
// The rest, while
// pieces are left, in descending powers of two from 2048 bytes down to
// 64, and what remains as the last piece: under 64 bytes, or, for a unit
// of 10 or more whole pages (one that compresses poorly), whatever the
// last piece left must hold. A pool class wastes the unused part of its
// last page; rests of any size fall in any of the pool's classes, so the
// units of a device would leave a partly used page in each (about 250 KB
// for 256 units); split this way they leave one in each of about ten.
inline std::size_t UnitPieceSizes(std::size_t len,
                                  std::size_t (&sizes)[kMaxUnitPieces]) {
  std::size_t n = 0;
  for (; len >= kPageSize; len -= kPageSize) sizes[n++] = kPageSize;
  for (std::size_t p = kPageSize / 2;
       p >= 64 && len != 0 && n + 1 < kMaxUnitPieces; p /= 2) {
    if (len < p) continue;
    sizes[n++] = p;
    len -= p;
  }
  if (len != 0) sizes[n++] = len;
  return n;
}

// Unit::queued's values other than 0.
inline constexpr std::uint8_t kUnitQueued = 1;
// Given up for a page that does not compress alone: kUnitPoorAlone in the
// low two bits, and that page's place in its run (< kMaxUnitPages) above.
inline constexpr std::uint8_t kUnitPoorAlone = 2;
inline constexpr std::uint8_t UnitPoorAlone(std::size_t page_in_run) {
  return static_cast<std::uint8_t>(kUnitPoorAlone | (page_in_run << 2));
}
inline constexpr bool IsUnitPoorAlone(std::uint8_t queued) {
  return (queued & 3) == kUnitPoorAlone;
}
static_assert(kMaxUnitPages <= 64, "a run's page fits above the two bits");

struct Unit {
  std::atomic<std::uint32_t> live;  // members still attached, by bit
  std::uint32_t members;  // the pages the object holds, by bit, in order
  std::uint32_t bytes;    // the compressed object's length
  std::uint8_t pieces;    // pool pieces, or (wb) ceil(bytes / 4096) blocks
  std::uint8_t dict;      // the dictionary id it was compressed with
  std::uint8_t wb;        // piece[] are backing blocks, not pool handles
  // 0; kUnitQueued: on the reclaim queue, or given up for good (corrupt);
  // UnitPoorAlone(k): given up for page k of the run, which does not
  // compress alone (without store_incompressible), until a new dictionary
  // (units.cc, RetryPoorUnits) or page k's free, which queue it again.
  std::atomic<std::uint8_t> queued;
  std::uint64_t gen;      // 0: free; else unique (see above)
  std::uint64_t piece[kMaxUnitPieces];
};

class UnitTable {
 public:
  static constexpr std::size_t kEntryBytes = sizeof(Unit);

  // A table for `num_pages` slots in runs of `unit_pages` (4, 8 or 16);
  // with `populate` (a preallocated store) faulted in now, as the slot
  // table is, so that no store touches new memory.
  static Result<UnitTable> Create(std::size_t num_pages,
                                  std::size_t unit_pages,
                                  bool populate = false) {
    const std::size_t count = (num_pages + unit_pages - 1) / unit_pages;
    ZT_ASSIGN_OR_RETURN(
        platform::Mapping m,
        platform::Mapping::Table(count * sizeof(Unit), populate, "unit table"));
    return UnitTable(std::move(m));
  }
  UnitTable() = default;

  std::size_t size() const { return mapping_.size() / sizeof(Unit); }
  Unit& operator[](std::size_t u) const { return mapping_.as<Unit>()[u]; }

  // A new generation, never 0 and never handed out twice in the process.
  static std::uint64_t NewGen() {
    static std::atomic<std::uint64_t> next{1};
    return next.fetch_add(1, std::memory_order_relaxed);
  }

 private:
  explicit UnitTable(platform::Mapping m) : mapping_(std::move(m)) {}
  platform::Mapping mapping_;  // zero-filled: every entry free
};

}  // namespace ztier::internal

#endif  // ZTIER_STORE_UNIT_TABLE_H_
