// slot_table.h: the PageStore's table of slots, one per page, 16 bytes each.
//
//   Slot (16 bytes, static_assert below)
//   +------------------------+----------------------+-----------------+
//   | value: u64             | flags: u32           | ac_time: u32    |
//   | pool handle, or SAME   | bits 0..12 size      | last access, in |
//   | fill word, or backing  | 13 LOCK  14 WAITERS  | store-clock     |
//   | block index (WB)       | 15 SAME  16 WB 17 PP | seconds         |
//   |                        | 18 HUGE  19 IDLE     |                 |
//   |                        | 20 INCOMPRESSIBLE    |                 |
//   |                        | 21..22 priority      |                 |
//   |                        | 23 WB_COMPRESSED     |                 |
//   |                        | 24..28 SEQ  29 UNIT  |                 |
//   |                        | 30..31 DICT          |                 |
//   +------------------------+----------------------+-----------------+
//
// Lock rule: `value`, `ac_time` and every flag except LOCK/WAITERS are read
// and written only by the thread holding the slot's LOCK bit (zram: "flag
// operations require table entry lock being held"). Because waiters set
// WAITERS concurrently, the holder changes flags only with atomic
// read-modify-write operations (SetFlags/ClearFlags/SetContent), never a plain
// store. A lock waiter spins briefly, then sleeps on a futex on `flags`.
//
// SEQ counts content changes (SetContent, which freeing the old content and
// installing the new each call), modulo 32. With `value` it is the slot's
// Version, the cheap first test of PageStore::StorePartial, which read the
// slot, dropped the lock to compress, and locked it again: an unequal
// Version means the content changed. An equal one does not prove it did
// not (32 overwrites wrap SEQ, and the pool hands a freed handle out
// again), so StorePartial compares the object's bytes too.
//
// UNIT: the page is one member of a multi-page object (unit_table.h);
// `value` is that object's generation, the size bits the page's share of
// its bytes, and WB says the object is on the backing store.
//
// DICT names the dictionary a pool object (or a compressed written-back
// block) was compressed with: 0 none, 1..3 one of the store's trained
// dictionaries (page_store.h, "dictionaries").
//
// Each Slot is a capability (platform/thread_annotations.h): Lock, TryLock
// and SlotLock acquire it, and the accessors below that read or change
// content REQUIRE it, so `make check-locks` rejects a path that touches a
// slot's content without its lock.
//
// The table is one anonymous mapping: untouched slots cost no memory until
// they are first written (unless created with `populate`).
#ifndef ZTIER_STORE_SLOT_TABLE_H_
#define ZTIER_STORE_SLOT_TABLE_H_

#include <atomic>
#include <cassert>
#include <cstddef>
#include <cstdint>
#include <utility>

#include "platform/mapping.h"
#include "platform/thread_annotations.h"
#include "ztier/status.h"

namespace ztier::internal {

struct ZT_CAPABILITY("slot lock") Slot {
  std::atomic<std::uint64_t> value;
  std::atomic<std::uint32_t> flags;
  std::uint32_t ac_time ZT_GUARDED_BY(this);  // see the lock rule above
};
static_assert(sizeof(Slot) == 16, "a slot must stay 16 bytes");
static_assert(std::atomic<std::uint32_t>::is_always_lock_free);

namespace slot {
inline constexpr std::uint32_t kSizeMask = (1u << 13) - 1;  // 0..4096
inline constexpr std::uint32_t kLock = 1u << 13;
inline constexpr std::uint32_t kWaiters = 1u << 14;
inline constexpr std::uint32_t kSame = 1u << 15;
inline constexpr std::uint32_t kWb = 1u << 16;
inline constexpr std::uint32_t kPp = 1u << 17;
inline constexpr std::uint32_t kHuge = 1u << 18;
inline constexpr std::uint32_t kIdle = 1u << 19;
inline constexpr std::uint32_t kIncompressible = 1u << 20;
inline constexpr int kPrioShift = 21;
inline constexpr std::uint32_t kPrioMask = 3u << kPrioShift;
// With WB: the block holds the compressed object (size bits give its
// length), not the page (compressed_writeback).
inline constexpr std::uint32_t kWbCompressed = 1u << 23;
inline constexpr int kSeqShift = 24;
inline constexpr std::uint32_t kSeqMask = 0x1fu << kSeqShift;
inline constexpr std::uint32_t kUnit = 1u << 29;
inline constexpr int kDictShift = 30;
inline constexpr std::uint32_t kDictMask = 3u << kDictShift;
// Everything that describes content (cleared when a slot is freed).
inline constexpr std::uint32_t kContentMask =
    kSizeMask | kSame | kWb | kPp | kHuge | kIdle | kIncompressible |
    kPrioMask | kWbCompressed | kUnit | kDictMask;
}  // namespace slot

// What a slot holds, as far as a writer that let go of its lock must know:
// unequal Versions mean a SetContent happened in between (see SEQ above).
struct SlotVersion {
  std::uint64_t value = 0;
  std::uint32_t seq = 0;
  bool operator==(const SlotVersion&) const = default;
};

class SlotTable {
 public:
  // Maps `count` slots, all empty; with `populate`, faults every page of
  // the table in now (else pages are faulted in as slots are first used).
  static Result<SlotTable> Create(std::size_t count, bool populate = false);
  SlotTable() = default;
  SlotTable(SlotTable&& other) noexcept = default;
  SlotTable& operator=(SlotTable&& other) noexcept = default;

  std::size_t size() const { return mapping_.size() / sizeof(Slot); }
  std::size_t bytes() const { return mapping_.size(); }
  Slot& operator[](std::size_t i) const { return mapping_.as<Slot>()[i]; }

  static void Lock(Slot& s) ZT_ACQUIRE(s);
  static bool TryLock(Slot& s) ZT_TRY_ACQUIRE(true, s);
  static void Unlock(Slot& s) ZT_RELEASE(s);
  // Tells the lock analysis that s is held: for paths that lock a whole
  // run of slots at once (unit_table.h), which it cannot follow.
  static void AssertHeld([[maybe_unused]] const Slot& s)
      ZT_ASSERT_CAPABILITY(s) {
    assert(s.flags.load(std::memory_order_relaxed) & slot::kLock);
  }

  // REQUIRES: the caller holds s's lock.
  static std::uint32_t Flags(const Slot& s) ZT_REQUIRES(s) {
    return s.flags.load(std::memory_order_relaxed) &
           ~(slot::kLock | slot::kWaiters | slot::kSeqMask);
  }
  static SlotVersion Version(const Slot& s) ZT_REQUIRES(s) {
    return {s.value.load(std::memory_order_relaxed),
            s.flags.load(std::memory_order_relaxed) & slot::kSeqMask};
  }
  static void SetFlags(Slot& s, std::uint32_t bits) ZT_REQUIRES(s) {
    s.flags.fetch_or(bits, std::memory_order_relaxed);
  }
  static void ClearFlags(Slot& s, std::uint32_t bits) ZT_REQUIRES(s) {
    s.flags.fetch_and(~bits, std::memory_order_relaxed);
  }
  static std::size_t Size(const Slot& s) ZT_REQUIRES(s) {
    return Flags(s) & slot::kSizeMask;
  }
  // Replaces all content bits (size and flags) at once, and advances SEQ.
  static void SetContent(Slot& s, std::uint32_t content) ZT_REQUIRES(s);

 private:
  explicit SlotTable(platform::Mapping m) : mapping_(std::move(m)) {}

  platform::Mapping mapping_;  // size() slots, zero-filled when mapped
};

// RAII holder of one slot's lock.
class ZT_SCOPED_CAPABILITY SlotLock {
 public:
  explicit SlotLock(Slot& s) ZT_ACQUIRE(s) : s_(s) { SlotTable::Lock(s_); }
  ~SlotLock() ZT_RELEASE() { SlotTable::Unlock(s_); }
  SlotLock(const SlotLock&) = delete;
  SlotLock& operator=(const SlotLock&) = delete;

 private:
  Slot& s_;
};

}  // namespace ztier::internal

#endif  // ZTIER_STORE_SLOT_TABLE_H_
