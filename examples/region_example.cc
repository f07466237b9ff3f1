// region_example.cc: the README's example of a zswap-like region, built
// with the project so that it cannot go stale. Run: build/examples/region_example
#include <cstdio>
#include <cstring>

#include "ztier/region.h"

int main() {
  // 256 MiB of memory that may keep only 64 MiB resident; the rest is
  // compressed (lz4) and comes back on touch, 8 pages at a time.
  auto region = ztier::Region::Create({.size = 256 << 20,
                                       .budget = 64 << 20,
                                       .max_pool_percent = 100,
                                       .page_cluster = 3});
  if (!region) {
    std::fprintf(stderr, "%s\n", region.error().ToString().c_str());
    return 1;
  }
  std::byte* mem = (*region)->data();
  for (std::size_t i = 0; i < (256 << 20); i += 64) {  // use it like memory
    std::snprintf(reinterpret_cast<char*>(mem + i), 64, "line %zu", i / 64);
  }
  if (!(*region)->Pageout(mem, 1 << 20).ok()) return 1;  // as MADV_PAGEOUT
  const bool ok = std::strcmp(reinterpret_cast<char*>(mem), "line 0") == 0;
  const ztier::RegionStats s = (*region)->Stats();
  std::printf("%s: %llu pages resident, %llu stored, %llu MiB of pool\n",
              ok ? "ok" : "MISMATCH",
              static_cast<unsigned long long>(s.resident_pages),
              static_cast<unsigned long long>(s.stored_pages),
              static_cast<unsigned long long>(s.pool_total_size >> 20));
  return ok ? 0 : 1;
}
