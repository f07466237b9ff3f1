/* File: ztier/region_c.h
 *
 * The C interface to ztier::Region (ztier/region.h), so that programs in C
 * or any language with a C FFI can map a region: anonymous memory whose cold
 * pages are compressed away and come back when touched (zswap in
 * userspace, over userfaultfd).
 *
 *   ztier_region_options o;
 *   ztier_region_options_init(&o);
 *   o.size = 1 << 30;
 *   o.budget = 256 << 20;
 *   ztier_region* r;
 *   char err[256];
 *   if (ztier_region_create(&o, &r, err, sizeof err) != 0) { puts(err); }
 *   char* p = ztier_region_data(r);       use it like any memory
 *   ztier_region_pageout(r, p, 64 << 20); like MADV_PAGEOUT
 *   ztier_region_stats s;
 *   ztier_region_get_stats(r, &s);        zswap's counters
 *   ztier_region_destroy(r);
 *
 * Errors: functions returning int return 0 on success or a negative errno
 * value: -EINVAL a bad argument (a null pointer, size 0, an unknown
 * codec), -ERANGE a pageout range outside the region, -ENOTSUP
 * userfaultfd is not usable here (the kernel lacks it, or this process may
 * not use it: err says which), -ENOMEM the mapping or an allocation
 * failed, or no file descriptor was left for the region (a passing
 * shortage: try again once some are free), -EPERM an operation this
 * process may not do (a fork()ed child using its parent's region: pageout,
 * discard), -EIO anything else. ztier_region_create copies a
 * NUL-terminated message (truncated to err_len) into `err` when err is not
 * NULL and err_len > 0; "" on success.
 * No C++ exception ever leaves these functions.
 *
 * Threads: as the C++ Region. Each region has one handler thread.
 * ztier_region_pageout and ztier_region_get_stats may be called from any
 * thread while other threads touch the memory. ztier_region_destroy must
 * not run while another thread touches the memory or calls into the region.
 *
 * Requirements: Linux 5.7+ userfaultfd with write-protect on anonymous
 * memory, and the right to use it (root, vm.unprivileged_userfaultfd=1, or
 * access to /dev/userfaultfd).
 *
 * Link: the library is C++ (libztier.a once installed; the ztier_core
 * target in the build): link with the C++ compiler, or add the C++ runtime
 * (-lstdc++) and -pthread; `pkg-config --cflags --libs --static ztier`
 * gives all of it, with the compression libraries.
 */
#ifndef ZTIER_REGION_C_H_
#define ZTIER_REGION_C_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A region. Opaque: only pointers to it are handed out. */
typedef struct ztier_region ztier_region;

/* What ztier_region_create maps. Fill it with ztier_region_options_init
 * first, then set what differs: a zeroed struct is valid too, but its
 * batch_stores 0 means the one-page-at-a-time store path. */
typedef struct ztier_region_options {
  size_t size;       /* bytes, rounded up to 4096-byte pages; 0 is -EINVAL */
  size_t budget;     /* resident bytes before the reclaimer runs; 0: none
                        (only ztier_region_pageout evicts); else at least
                        256 KiB (-EINVAL below) */
  const char* codec; /* "lz4", "zstd", ...; NULL means "lz4". Copied. */
  /* Pool limit, as zswap's: percent of the budget (of size when budget is
   * 0); 0 means the default, 20. */
  unsigned max_pool_percent;
  /* After the limit is hit, stores resume when the pool falls to this
   * percent of the limit; 0 means the default, 90. */
  unsigned accept_threshold_percent;
  unsigned page_cluster; /* readahead window 2^page_cluster pages, 0..5 */
  int batch_stores;      /* nonzero: runs of pages compressed in batches */
} ztier_region_options;

/* Sets the defaults: size 0, budget 0, codec NULL (lz4), max_pool_percent
 * 20, accept_threshold_percent 90, page_cluster 0, batch_stores 1. */
void ztier_region_options_init(ztier_region_options* options);

/* Maps the memory, registers it with userfaultfd and starts the handler.
 * On success stores the region in *out and returns 0; on failure stores
 * NULL in *out (when out is not NULL) and returns a negative errno value
 * (see the top of this file), with the reason in err. */
int ztier_region_create(const ztier_region_options* options, ztier_region** out,
                        char* err, size_t err_len);

/* The first byte of the region's memory (page-aligned); NULL for NULL. */
void* ztier_region_data(const ztier_region* region);

/* The region's size in bytes (a multiple of 4096); 0 for NULL. */
size_t ztier_region_size(const ztier_region* region);

/* Evicts the resident pages of [addr, addr + len), rounded out to pages,
 * as MADV_PAGEOUT would. Pages that are refused (they do not compress, the
 * pool is full) stay resident and the call still returns 0; the counters
 * say why. -ERANGE if the range is not inside the region, -EINVAL for a
 * NULL region. */
int ztier_region_pageout(ztier_region* region, void* addr, size_t len);

/* Drops the pages of [addr, addr + len) (addr page-aligned), resident,
 * stored or written back: each reads as zeros at its next touch. Use it,
 * not madvise(MADV_DONTNEED), which does not reach pages that are stored
 * (ztier::Region::Discard). -ERANGE if the range is not inside the region,
 * -EINVAL for an unaligned addr or a NULL region. */
int ztier_region_discard(ztier_region* region, void* addr, size_t len);

/* zswap's debugfs and vmstat counters, and the region's own; the fields
 * and their meaning are ztier::RegionStats's (ztier/region.h). */
typedef struct ztier_region_stats {
  /* zswap debugfs */
  uint64_t pool_limit_hit;
  uint64_t reject_reclaim_fail;
  uint64_t reject_alloc_fail;
  uint64_t reject_compress_fail;
  uint64_t reject_compress_poor;
  uint64_t written_back_pages;
  uint64_t pool_total_size; /* bytes */
  uint64_t stored_pages;    /* in the pool now */
  uint64_t stored_incompressible_pages;
  /* vmstat */
  uint64_t zswpin;  /* pages loaded back (incl. read ahead) */
  uint64_t zswpout; /* pages stored */
  uint64_t zswpwb;  /* pages written back */
  uint64_t swap_ra;
  uint64_t swap_ra_hit;
  /* the region */
  uint64_t resident_pages;
  uint64_t written_back_now; /* pages on the backing store now */
  uint64_t faults;           /* missing faults resolved */
  uint64_t wp_faults;        /* writes that hit a page being evicted */
  uint64_t evictions;        /* reclaimer and Pageout passes */
  uint64_t swpout_fallback;  /* 16-page units stored page by page */
} ztier_region_stats;

/* Fills *stats with a snapshot of the counters. 0, or -EINVAL for a NULL
 * argument. */
int ztier_region_get_stats(const ztier_region* region,
                           ztier_region_stats* stats);

/* Stops the handler, unmaps the memory and frees everything the region
 * holds. NULL is a no-op. */
void ztier_region_destroy(ztier_region* region);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* ZTIER_REGION_C_H_ */
