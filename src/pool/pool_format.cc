// File: pool/pool_format.cc
//
// Statistics: Stats() from the pool-wide atomic counters, ClassStats() and
// FormatClasses() from each class under its lock (so each row is
// consistent, the table as a whole is not a snapshot).
//
// FormatClasses() prints zsmalloc's debugfs `classes` file with the kernel's
// printf widths (zs_stats_size_show, 6.3+): one row per merged class, used
// or not, and the packed page class's (index 255, which zsmalloc has not),
// then an empty line and a Total row. Two documented differences:
// pages_used is the pages actually held (touched), where the kernel prints
// obj_allocated / objs_per_zspage * pages_per_zspage; and class indexes are
// ours (the kernel's merge rule differs slightly, see size_class.cc).
#include <cstdio>

#include "pool_internal.h"

namespace ztier {

namespace ip = internal_pool;

namespace {

// zsmalloc's zs_can_compact(): whole zspages' worth of free slots, for a
// class with `allocated` object slots of which `used` hold objects.
std::size_t FreeablePages(std::size_t allocated, std::size_t used,
                          const ip::ClassGeometry& geo) {
  return (allocated - used) / geo.objs * geo.pages;
}

// The pages a class holds past what a whole compaction leaves it (compact.cc):
// its `used` objects in full zspages, and the last zspage's objects packed
// into its first pages, out of `touched` pages held.
std::size_t CompactablePagesOf(std::size_t touched, std::size_t used,
                               const ip::ClassGeometry& geo) {
  const std::size_t needed =
      used / geo.objs * geo.pages + geo.PagesFor(used % geo.objs);
  return touched > needed ? touched - needed : 0;
}

}  // namespace

PoolStats Pool::Stats() const {
  const Impl& m = *impl_;
  PoolStats s;
  s.pages_used = m.touched_pages.load(std::memory_order_relaxed);
  s.metadata_bytes = m.metadata_bytes.load(std::memory_order_relaxed);
  s.total_bytes = s.pages_used * ip::kPageSize + s.metadata_bytes;
  s.objects = m.objects.Sum();
  s.object_bytes = m.object_bytes.Sum();
  s.pages_compacted = m.pages_compacted.load(std::memory_order_relaxed);
  return s;
}

std::vector<PoolClassStats> Pool::ClassStats() const {
  std::vector<PoolClassStats> rows;
  for (const auto& sc : impl_->classes) {
    if (sc == nullptr) continue;
    PoolClassStats r;
    r.class_index = sc->index;
    r.size = sc->geo.size;
    r.pages_per_zspage = sc->geo.pages;
    r.objs_per_zspage = sc->geo.objs;
    {
      internal::MutexLock lock(sc->mu);
      for (int k = 0; k < 11; ++k) r.fullness[k] = sc->group_count[k + 1];
      r.obj_allocated = sc->zspages * sc->geo.objs;
      r.obj_used = sc->obj_used;
      r.pages_used = sc->touched_pages;
    }
    impl_->SweepDeferred(*sc);  // frees deferred while we held the lock
    r.freeable = FreeablePages(r.obj_allocated, r.obj_used, sc->geo);
    rows.push_back(r);
  }
  return rows;
}

std::size_t Pool::CompactablePages() const {
  std::size_t pages = 0;
  for (const auto& sc : impl_->classes) {
    if (sc == nullptr) continue;
    std::size_t touched, used;
    {
      internal::MutexLock lock(sc->mu);
      touched = sc->touched_pages;
      used = sc->obj_used;
    }
    impl_->SweepDeferred(*sc);
    pages += CompactablePagesOf(touched, used, sc->geo);
  }
  return pages;
}

std::string Pool::FormatClasses() const {
  std::string out;
  char buf[512];
  std::snprintf(buf, sizeof(buf),
                " %5s %5s %9s %9s %9s %9s %9s %9s %9s %9s %9s %9s %9s %13s "
                "%10s %10s %16s %8s\n",
                "class", "size", "10%", "20%", "30%", "40%", "50%", "60%",
                "70%", "80%", "90%", "99%", "100%", "obj_allocated",
                "obj_used", "pages_used", "pages_per_zspage", "freeable");
  out += buf;
  PoolClassStats total;
  for (const PoolClassStats& r : ClassStats()) {
    std::snprintf(buf, sizeof(buf), " %5d %5zu ", r.class_index, r.size);
    out += buf;
    for (int k = 0; k < 11; ++k) {
      std::snprintf(buf, sizeof(buf), "%9zu ", r.fullness[k]);
      out += buf;
      total.fullness[k] += r.fullness[k];
    }
    std::snprintf(buf, sizeof(buf), "%13zu %10zu %10zu %16zu %8zu\n",
                  r.obj_allocated, r.obj_used, r.pages_used,
                  r.pages_per_zspage, r.freeable);
    out += buf;
    total.obj_allocated += r.obj_allocated;
    total.obj_used += r.obj_used;
    total.pages_used += r.pages_used;
    total.freeable += r.freeable;
  }
  out += "\n";
  std::snprintf(buf, sizeof(buf), " %5s %5s ", "Total", "");
  out += buf;
  for (int k = 0; k < 11; ++k) {
    std::snprintf(buf, sizeof(buf), "%9zu ", total.fullness[k]);
    out += buf;
  }
  std::snprintf(buf, sizeof(buf), "%13zu %10zu %10zu %16s %8zu\n",
                total.obj_allocated, total.obj_used, total.pages_used, "",
                total.freeable);
  out += buf;
  return out;
}

}  // namespace ztier
