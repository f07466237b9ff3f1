// File: src/uffd/region_c.cc
//
// The C interface (ztier/region_c.h) over ztier::Region: a thin adapter.
// Status codes become negative errno values in one place (ToErrno); every
// entry point catches exceptions (std::bad_alloc from a std::string or the
// Region's own allocations) so that none crosses into C.
#include "ztier/region_c.h"

#include <cerrno>
#include <cstring>
#include <exception>
#include <memory>
#include <new>
#include <string>
#include <string_view>

#include "ztier/region.h"

struct ztier_region {
  std::unique_ptr<ztier::Region> region;
};

namespace {

// The one Status -> errno mapping of the C interface (region_c.h "Errors").
int ToErrno(ztier::StatusCode code) {
  using ztier::StatusCode;
  switch (code) {
    case StatusCode::kOk:
      return 0;
    case StatusCode::kInvalidArgument:
      return -EINVAL;
    case StatusCode::kOutOfRange:
      return -ERANGE;
    case StatusCode::kUnsupported:
      return -ENOTSUP;
    case StatusCode::kResourceExhausted:
      return -ENOMEM;
    case StatusCode::kNotFound:
      return -ENOENT;
    case StatusCode::kBusy:
      return -EBUSY;
    // The one precondition a region has: being used by the process that
    // made it, not a fork()ed child (ztier/region.h).
    case StatusCode::kFailedPrecondition:
    case StatusCode::kPermissionDenied:
      return -EPERM;
    case StatusCode::kIoError:
    case StatusCode::kCorruption:
      return -EIO;
  }
  return -EIO;
}

// region->*call(addr, len) as an errno: -EINVAL for a NULL region, and no
// exception crosses into C.
int CallOnRange(ztier_region* region,
                ztier::Status (ztier::Region::*call)(void*, std::size_t),
                void* addr, std::size_t len) {
  if (region == nullptr) return -EINVAL;
  try {
    return ToErrno((region->region.get()->*call)(addr, len).code());
  } catch (const std::bad_alloc&) {
    return -ENOMEM;
  } catch (...) {
    return -EIO;
  }
}

// Copies `text` into err[0, err_len), NUL-terminated, when there is room.
void CopyMessage(std::string_view text, char* err, std::size_t err_len) {
  if (err == nullptr || err_len == 0) return;
  const std::size_t n = text.size() < err_len - 1 ? text.size() : err_len - 1;
  std::memcpy(err, text.data(), n);
  err[n] = '\0';
}

// RegionStats and ztier_region_stats hold the same uint64 fields in the
// same order; when a field is added to RegionStats, add it to the C struct
// and to CopyStats.
static_assert(sizeof(ztier_region_stats) == sizeof(ztier::RegionStats),
              "ztier_region_stats is out of step with ztier::RegionStats");

void CopyStats(const ztier::RegionStats& s, ztier_region_stats* out) {
  out->pool_limit_hit = s.pool_limit_hit;
  out->reject_reclaim_fail = s.reject_reclaim_fail;
  out->reject_alloc_fail = s.reject_alloc_fail;
  out->reject_compress_fail = s.reject_compress_fail;
  out->reject_compress_poor = s.reject_compress_poor;
  out->written_back_pages = s.written_back_pages;
  out->pool_total_size = s.pool_total_size;
  out->stored_pages = s.stored_pages;
  out->stored_incompressible_pages = s.stored_incompressible_pages;
  out->zswpin = s.zswpin;
  out->zswpout = s.zswpout;
  out->zswpwb = s.zswpwb;
  out->swap_ra = s.swap_ra;
  out->swap_ra_hit = s.swap_ra_hit;
  out->resident_pages = s.resident_pages;
  out->written_back_now = s.written_back_now;
  out->faults = s.faults;
  out->wp_faults = s.wp_faults;
  out->evictions = s.evictions;
  out->swpout_fallback = s.swpout_fallback;
}

constexpr unsigned kDefaultMaxPoolPercent = 20;
constexpr unsigned kDefaultAcceptThresholdPercent = 90;

}  // namespace

extern "C" {

void ztier_region_options_init(ztier_region_options* options) {
  if (options == nullptr) return;
  *options = ztier_region_options{};
  options->max_pool_percent = kDefaultMaxPoolPercent;
  options->accept_threshold_percent = kDefaultAcceptThresholdPercent;
  options->batch_stores = 1;
}

int ztier_region_create(const ztier_region_options* options, ztier_region** out,
                        char* err, std::size_t err_len) {
  if (out != nullptr) *out = nullptr;
  CopyMessage("", err, err_len);
  if (options == nullptr || out == nullptr) {
    CopyMessage("ztier_region_create: options and out must not be NULL", err,
                err_len);
    return -EINVAL;
  }
  try {
    ztier::RegionOptions o;
    o.size = options->size;
    o.budget = options->budget;
    if (options->codec != nullptr) o.codec = options->codec;
    o.max_pool_percent = options->max_pool_percent != 0
                             ? options->max_pool_percent
                             : kDefaultMaxPoolPercent;
    o.accept_threshold_percent = options->accept_threshold_percent != 0
                                     ? options->accept_threshold_percent
                                     : kDefaultAcceptThresholdPercent;
    o.page_cluster = options->page_cluster;
    o.batch_stores = options->batch_stores != 0;
    auto region = ztier::Region::Create(o);
    if (!region.has_value()) {
      CopyMessage(region.error().ToString(), err, err_len);
      const int rc = ToErrno(region.error().code());
      return rc != 0 ? rc : -EIO;
    }
    *out = new ztier_region{std::move(*region)};
    return 0;
  } catch (const std::bad_alloc&) {
    CopyMessage("ztier_region_create: out of memory", err, err_len);
    return -ENOMEM;
  } catch (const std::exception& e) {
    CopyMessage(std::string("ztier_region_create: ") + e.what(), err, err_len);
    return -EIO;
  } catch (...) {
    CopyMessage("ztier_region_create: unexpected exception", err, err_len);
    return -EIO;
  }
}

void* ztier_region_data(const ztier_region* region) {
  return region != nullptr ? region->region->data() : nullptr;
}

std::size_t ztier_region_size(const ztier_region* region) {
  return region != nullptr ? region->region->size() : 0;
}

int ztier_region_pageout(ztier_region* region, void* addr, std::size_t len) {
  return CallOnRange(region, &ztier::Region::Pageout, addr, len);
}

int ztier_region_discard(ztier_region* region, void* addr, std::size_t len) {
  return CallOnRange(region, &ztier::Region::Discard, addr, len);
}

int ztier_region_get_stats(const ztier_region* region,
                           ztier_region_stats* stats) {
  if (region == nullptr || stats == nullptr) return -EINVAL;
  try {
    CopyStats(region->region->Stats(), stats);
    return 0;
  } catch (const std::bad_alloc&) {
    return -ENOMEM;
  } catch (...) {
    return -EIO;
  }
}

void ztier_region_destroy(ztier_region* region) {
  // ~Region is noexcept (destructors are); an exception there terminates,
  // as it would in C++.
  delete region;
}

}  // extern "C"
