// slot_table.cc: the slot table's mapping and the per-slot bit lock.
#include "slot_table.h"

#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <utility>

namespace ztier::internal {
namespace {

long Futex(std::atomic<std::uint32_t>* addr, int op, std::uint32_t val) {
  return syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(addr),
                 op | FUTEX_PRIVATE_FLAG, val, nullptr, nullptr, 0);
}

inline void CpuRelax() { __builtin_ia32_pause(); }

}  // namespace

Result<SlotTable> SlotTable::Create(std::size_t count, bool populate) {
  if (count == 0) return Err(Status::InvalidArgument("slot table of 0 slots"));
  std::size_t bytes = count * sizeof(Slot);
  void* p =
      mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
           MAP_PRIVATE | MAP_ANONYMOUS | (populate ? 0 : MAP_NORESERVE), -1, 0);
  if (p == MAP_FAILED) return Err(PosixError("mmap slot table", errno));
  if (populate && madvise(p, bytes, MADV_POPULATE_WRITE) != 0) {
    const int err = errno;
    if (err != EINVAL) {
      munmap(p, bytes);
      return Err(PosixError("populate slot table", err));
    }
    // Before Linux 5.14: touch each page.
    for (std::size_t off = 0; off < bytes; off += 4096) {
      static_cast<volatile char*>(p)[off] = 0;
    }
  }
  SlotTable t;
  t.slots_ = static_cast<Slot*>(p);  // zero pages: every slot empty, unlocked
  t.count_ = count;
  return t;
}

SlotTable::SlotTable(SlotTable&& other) noexcept
    : slots_(std::exchange(other.slots_, nullptr)),
      count_(std::exchange(other.count_, 0)) {}

SlotTable& SlotTable::operator=(SlotTable&& other) noexcept {
  if (this != &other) {
    this->~SlotTable();
    slots_ = std::exchange(other.slots_, nullptr);
    count_ = std::exchange(other.count_, 0);
  }
  return *this;
}

SlotTable::~SlotTable() {
  if (slots_ != nullptr) munmap(slots_, count_ * sizeof(Slot));
}

bool SlotTable::TryLock(Slot& s) {
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

void SlotTable::Lock(Slot& s) {
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
      CpuRelax();
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
    Futex(&s.flags, FUTEX_WAIT, f);  // returns at once if flags != f
    f = s.flags.load(std::memory_order_relaxed);
  }
}

void SlotTable::Unlock(Slot& s) {
  std::uint32_t old = s.flags.fetch_and(~(slot::kLock | slot::kWaiters),
                                        std::memory_order_release);
  if (old & slot::kWaiters) Futex(&s.flags, FUTEX_WAKE, INT_MAX);
}

void SlotTable::SetContent(Slot& s, std::uint32_t content) {
  std::uint32_t f = s.flags.load(std::memory_order_relaxed);
  while (!s.flags.compare_exchange_weak(
      f, (f & ~slot::kContentMask) | (content & slot::kContentMask),
      std::memory_order_relaxed)) {
  }
}

}  // namespace ztier::internal
