// stat_format.cc: the kernel's exact text of mm_stat, io_stat, debug_stat
// and bd_stat (mm_stat_show() and the other *_show() functions of
// drivers/block/zram/zram_drv.c).
#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <string>

#include "page_store_impl.h"
#include "ztier/page_store.h"

namespace ztier {
namespace {
using ull = unsigned long long;  // NOLINT: the kernel's %llu
}  // namespace

std::string PageStore::FormatMmStat() const {
  const PageStoreStats s = Stats();
  char buf[256];
  std::snprintf(buf, sizeof(buf), "%8llu %8llu %8llu %8lu %8ld %8llu %8lu %8llu %8llu\n",
                ull{s.orig_data_size}, ull{s.compr_data_size},
                ull{s.mem_used_total}, static_cast<unsigned long>(s.mem_limit),
                static_cast<long>(s.mem_used_max), ull{s.same_pages},
                static_cast<unsigned long>(s.pages_compacted),
                ull{s.huge_pages}, ull{s.huge_pages_since});
  return buf;
}

std::string PageStore::FormatIoStat() const {
  const PageStoreStats s = Stats();
  char buf[128];
  std::snprintf(buf, sizeof(buf), "%8llu %8llu 0 %8llu\n",
                ull{s.failed_reads}, ull{s.failed_writes}, ull{s.notify_free});
  return buf;
}

std::string PageStore::FormatDebugStat() const {
  const PageStoreStats s = Stats();
  char buf[128];
  // Linux 6.12's debug_stat_show(): "version: %d\n%8llu %8llu\n", the
  // first column always 0 (measured against the kernel by make test-kernel).
  std::snprintf(buf, sizeof(buf), "version: %d\n%8llu %8llu\n", 1, 0ull,
                ull{s.miss_free});
  return buf;
}

// bd_count, bd_reads, bd_writes in 4 KiB units (the kernel's FOUR_K()).
std::string PageStore::FormatBdStat() const {
  const PageStoreStats s = Stats();
  char buf[96];
  std::snprintf(buf, sizeof(buf), "%8llu %8llu %8llu\n", ull{s.bd_count},
                ull{s.bd_reads}, ull{s.bd_writes});
  return buf;
}

// read_block_state() in zram_drv.c, with ac_time in whole seconds.
std::string PageStore::FormatBlockState(std::uint64_t first,
                                        std::uint64_t count) const {
  const Impl& m = *impl_;
  const std::uint64_t lo = std::min<std::uint64_t>(first, m.slots.size());
  const std::uint64_t hi =
      count > m.slots.size() - lo ? m.slots.size() : lo + count;
  std::string out;
  char line[64];
  for (std::uint64_t i = lo; i < hi; ++i) {
    Slot& s = m.slots[i];
    if (!Allocated(s.flags.load(std::memory_order_relaxed))) continue;
    std::uint32_t f;
    std::uint32_t ac_time;
    {
      SlotLock lock(s);
      f = SlotTable::Flags(s);
      ac_time = s.ac_time;
    }
    if (!Allocated(f)) continue;
    const int n = std::snprintf(
        line, sizeof(line), "%12llu %12u.%06d %c%c%c%c%c%c\n", ull{i},
        ac_time, 0, (f & slot::kSame) ? 's' : '.', (f & slot::kWb) ? 'w' : '.',
        (f & slot::kHuge) ? 'h' : '.', (f & slot::kIdle) ? 'i' : '.',
        Priority(f) != 0 ? 'r' : '.',
        (f & slot::kIncompressible) ? 'n' : '.');
    out.append(line, static_cast<std::size_t>(n));
  }
  return out;
}

}  // namespace ztier
