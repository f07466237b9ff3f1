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
//   +------------------------+----------------------+-----------------+
//
// Lock rule: `value`, `ac_time` and every flag except LOCK/WAITERS are read
// and written only by the thread holding the slot's LOCK bit (zram: "flag
// operations require table entry lock being held"). Because waiters set
// WAITERS concurrently, the holder changes flags only with atomic
// read-modify-write operations (SetFlags/ClearFlags/SetSize), never a plain
// store. A lock waiter spins briefly, then sleeps on a futex on `flags`.
//
// The table is one anonymous mapping: untouched slots cost no memory until
// they are first written (unless created with `populate`).
#ifndef ZTIER_STORE_SLOT_TABLE_H_
#define ZTIER_STORE_SLOT_TABLE_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <utility>

#include "platform/mapping.h"
#include "ztier/status.h"

namespace ztier::internal {

struct Slot {
  std::atomic<std::uint64_t> value;
  std::atomic<std::uint32_t> flags;
  std::uint32_t ac_time;
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
// Everything that describes content (cleared when a slot is freed).
inline constexpr std::uint32_t kContentMask =
    kSizeMask | kSame | kWb | kPp | kHuge | kIdle | kIncompressible |
    kPrioMask | kWbCompressed;
}  // namespace slot

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

  static void Lock(Slot& s);
  static bool TryLock(Slot& s);
  static void Unlock(Slot& s);

  // REQUIRES: the caller holds s's lock.
  static std::uint32_t Flags(const Slot& s) {
    return s.flags.load(std::memory_order_relaxed) & ~(slot::kLock | slot::kWaiters);
  }
  static void SetFlags(Slot& s, std::uint32_t bits) {
    s.flags.fetch_or(bits, std::memory_order_relaxed);
  }
  static void ClearFlags(Slot& s, std::uint32_t bits) {
    s.flags.fetch_and(~bits, std::memory_order_relaxed);
  }
  static std::size_t Size(const Slot& s) { return Flags(s) & slot::kSizeMask; }
  // Replaces all content bits (size and flags) at once.
  static void SetContent(Slot& s, std::uint32_t content);

 private:
  explicit SlotTable(platform::Mapping m) : mapping_(std::move(m)) {}

  platform::Mapping mapping_;  // size() slots, zero-filled when mapped
};

// RAII holder of one slot's lock.
class SlotLock {
 public:
  explicit SlotLock(Slot& s) : s_(s) { SlotTable::Lock(s_); }
  ~SlotLock() { SlotTable::Unlock(s_); }
  SlotLock(const SlotLock&) = delete;
  SlotLock& operator=(const SlotLock&) = delete;

 private:
  Slot& s_;
};

}  // namespace ztier::internal

#endif  // ZTIER_STORE_SLOT_TABLE_H_
