// File: tools/ztier/usemem_report.cc
//
// RegionStats as JSON (usemem_report.h).
#include "usemem_report.h"

#include <cstdint>
#include <utility>

#include "bench_stats.h"

namespace ztier::tool {

void WriteRegionStatsJson(JsonWriter& j, const RegionStats& s) {
  j.BeginObject();
  const std::pair<const char*, std::uint64_t> fields[] = {
      {"pool_limit_hit", s.pool_limit_hit},
      {"reject_reclaim_fail", s.reject_reclaim_fail},
      {"reject_alloc_fail", s.reject_alloc_fail},
      {"reject_compress_fail", s.reject_compress_fail},
      {"reject_compress_poor", s.reject_compress_poor},
      {"written_back_pages", s.written_back_pages},
      {"pool_total_size", s.pool_total_size},
      {"stored_pages", s.stored_pages},
      {"stored_incompressible_pages", s.stored_incompressible_pages},
      {"zswpin", s.zswpin},
      {"zswpout", s.zswpout},
      {"zswpwb", s.zswpwb},
      {"swap_ra", s.swap_ra},
      {"swap_ra_hit", s.swap_ra_hit},
      {"resident_pages", s.resident_pages},
      {"written_back_now", s.written_back_now},
      {"faults", s.faults},
      {"wp_faults", s.wp_faults},
      {"evictions", s.evictions},
  };
  for (const auto& [name, value] : fields) {
    j.UintField(name, value);
  }
  j.EndObject();
}

}  // namespace ztier::tool
