// File: tools/ztier/bench_readahead_run.h
//
// The two measurements of `ztier bench readahead` (bench_readahead.h) on a
// ztier Region without a budget (only Pageout evicts) and with the pool
// limit at 100% of its size (so that Pageout stores every page that
// compresses; the default 20% would refuse most of them).
//
// RunSequentialRead (batched decompression of readahead, as in the zswap
// decompress batching series of docs/references.md):
//   1. creates a region of size_bytes with `codec` and `page_cluster`, and
//      copies corpus page i % corpus.size() into its page i (untimed);
//   2. Pageout of the whole region (untimed);
//   3. timed: reads the region in order, one 8-byte load per page (the
//      fault, and with page_cluster > 0 the readahead of the stored
//      neighbours in the aligned 2^page_cluster window) and a memcmp of
//      the page with its corpus page (a difference is a mismatch);
//   4. takes the counters and destroys the region.
//
// RunFaultLatency (the cost of one fault-in, beside a bare UFFDIO_COPY
// fault, as measured earlier on the 2-vCPU development machine):
//   stored       a region of `pages` pages, page_cluster 0, filled with the
//                corpus and paged out; then each page is touched once (one
//                8-byte read) in a random order (std::mt19937, `seed`), each
//                touch timed with steady_clock; afterwards every page is
//                compared with its corpus page.
//   first touch  a fresh region of `pages` pages, never touched, the same
//                random order; every value read must be 0.
//   bare         RunBareCopyFaults below: the same touches on a bare
//                userfaultfd handler.
// mincore() before each touch says whether the page was mapped: a touch of
// an unmapped page takes a fault, the others (pages the handler mapped with
// an earlier fault's neighbours, or that Pageout refused) do not. The
// series keep both kinds apart.
//
// Errors: Region::Create's and Pageout's. Mismatches are counted, not errors.
//
// Thread safety: plain functions; each creates and destroys its regions.
#ifndef ZTIER_TOOLS_ZTIER_BENCH_READAHEAD_RUN_H_
#define ZTIER_TOOLS_ZTIER_BENCH_READAHEAD_RUN_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "corpus/corpus.h"
#include "ztier/region.h"
#include "ztier/status.h"

namespace ztier::tool {

struct SeqReadConfig {
  std::size_t size_bytes = 256 << 20;  // a multiple of 4096
  std::string codec = "lz4";
  unsigned page_cluster = 0;
};

struct SeqReadSample {
  unsigned page_cluster = 0;
  std::uint64_t pages = 0;    // pages read
  double seconds = 0;         // the read pass alone
  double pages_s = 0;         // pages / seconds
  double mb_s = 0;            // pages * 4096 / seconds / 1e6
  RegionStats after_pageout;  // stored_pages: the pages read from the pool
  RegionStats after_read;
  std::uint64_t mismatches = 0;
};

Result<SeqReadSample> RunSequentialRead(const SeqReadConfig& config,
                                        const corpus::PageSet& corpus);

struct FaultLatencyConfig {
  std::size_t pages = 16384;
  std::string codec = "lz4";
  std::uint32_t seed = 301;
};

// One phase's touches, in nanoseconds.
struct TouchSeries {
  std::vector<std::uint32_t> fault_ns;  // touches of unmapped pages
  std::vector<std::uint32_t> hit_ns;    // touches of mapped pages
  RegionStats before;                   // just before the first touch
  RegionStats after;                    // after the last
  std::uint64_t mismatches = 0;
};

struct FaultLatencySample {
  TouchSeries stored;
  TouchSeries first_touch;
  TouchSeries bare;  // RunBareCopyFaults, run last
};

Result<FaultLatencySample> RunFaultLatency(const FaultLatencyConfig& config,
                                           const corpus::PageSet& corpus);

// The baseline measured in the same conditions: plain anonymous memory
// (MADV_NOHUGEPAGE) of config.pages pages registered with a userfaultfd
// (src/platform/include/platform/userfaultfd.h), a handler thread that only poll()s, read()s and
// answers each missing fault with one 4 KiB UFFDIO_COPY of the page's
// corpus page, and the same random touches timed the same way. It repeats
// the "MISSING read, UFFDIO_COPY 4K" measurement made earlier on the
// 2-vCPU development machine (which touched pages in order). RegionStats
// fields stay zero; every page is compared with its corpus page
// afterwards. kIoError if the handler failed (it then maps zeros, so no
// toucher hangs).
Result<TouchSeries> RunBareCopyFaults(const FaultLatencyConfig& config,
                                      const corpus::PageSet& corpus);

}  // namespace ztier::tool

#endif  // ZTIER_TOOLS_ZTIER_BENCH_READAHEAD_RUN_H_
