// slot_table.cc: the slot table's mapping and the per-slot bit lock.
#include "slot_table.h"

#include <climits>
#include <cstdint>
#include <string>
#include <utility>

#include "platform/cpu_relax.h"
#include "platform/futex.h"

namespace ztier::internal {

Result<SlotTable> SlotTable::Create(std::size_t count, bool populate) {
  if (count == 0) return Err(Status::InvalidArgument("slot table of 0 slots"));
  if (count > SIZE_MAX / sizeof(Slot)) {
    return Err(Status::InvalidArgument(
        "slot table of " + std::to_string(count) + " slots: too large"));
  }
  ZT_ASSIGN_OR_RETURN(
      platform::Mapping m,
      platform::Mapping::Table(count * sizeof(Slot), populate, "slot table"));
  return SlotTable(std::move(m));  // zero pages: every slot empty, unlocked
}

bool SlotTable::TryLock(Slot& s)
    ZT_NO_THREAD_SAFETY_ANALYSIS {  // the lock itself
  std::uint32_t f = s.flags.load(std::memory_order_relaxed);
  while (!(f & slot::kLock)) {
    if (s.flags.compare_exchange_weak(f, f | slot::kLock,
                                      std::memory_order_acquire,
                                      std::memory_order_relaxed)) {
      return true;
    }
  }
  return false;
}

void SlotTable::Lock(Slot& s)
    ZT_NO_THREAD_SAFETY_ANALYSIS {  // the lock itself
  int spins = 0;
  std::uint32_t f = s.flags.load(std::memory_order_relaxed);
  for (;;) {
    if (!(f & slot::kLock)) {
      if (s.flags.compare_exchange_weak(f, f | slot::kLock,
                                        std::memory_order_acquire,
                                        std::memory_order_relaxed)) {
        return;
      }
      continue;
    }
    if (spins < 64) {
      ++spins;
      platform::CpuRelax();
      f = s.flags.load(std::memory_order_relaxed);
      continue;
    }
    if (!(f & slot::kWaiters)) {
      if (!s.flags.compare_exchange_weak(f, f | slot::kWaiters,
                                         std::memory_order_relaxed)) {
        continue;
      }
      f |= slot::kWaiters;
    }
    platform::FutexWait(&s.flags, f);  // returns at once if flags != f
    f = s.flags.load(std::memory_order_relaxed);
  }
}

void SlotTable::Unlock(Slot& s)
    ZT_NO_THREAD_SAFETY_ANALYSIS {  // the lock itself
  std::uint32_t old = s.flags.fetch_and(~(slot::kLock | slot::kWaiters),
                                        std::memory_order_release);
  if (old & slot::kWaiters) platform::FutexWake(&s.flags, INT_MAX);
}

void SlotTable::SetContent(Slot& s, std::uint32_t content) {
  std::uint32_t f = s.flags.load(std::memory_order_relaxed);
  for (;;) {
    const std::uint32_t seq = (f + (1u << slot::kSeqShift)) & slot::kSeqMask;
    const std::uint32_t next = (f & ~(slot::kContentMask | slot::kSeqMask)) |
                               (content & slot::kContentMask) | seq;
    if (s.flags.compare_exchange_weak(f, next, std::memory_order_relaxed)) {
      return;
    }
  }
}

}  // namespace ztier::internal
