// stat_format.cc: the kernel's exact text of mm_stat, io_stat, debug_stat
// and bd_stat (mm_stat_show() and the other *_show() functions of
// drivers/block/zram/zram_drv.c).
#include <cinttypes>
#include <cstdio>
#include <string>

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

}  // namespace ztier
