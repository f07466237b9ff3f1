// File: tools/ztier/bench_readahead_run.h
//
// The two measurements of `ztier bench readahead` (bench_readahead.h), on
// ztier Regions without a budget (only Pageout evicts) and with the pool
// limit at 100% of their size (so that Pageout stores every page that
// compresses). Region page i holds corpus page i % corpus.size().
//
// RunSequentialRead: fills a region of size_bytes (codec, page_cluster),
// pages it all out (untimed), then times reading it in order: one 8-byte
// load per page (the fault, and with page_cluster > 0 the readahead of the
// aligned 2^page_cluster window) and a memcmp with its corpus page.
//
// RunFaultLatency: each page of a region touched once (one 8-byte read) in
// a random order (std::mt19937, seed), each touch timed with steady_clock,
// mincore() first telling a fault (unmapped page) from a hit (a page an
// earlier fault mapped, or that Pageout refused):
//   stored       a filled region, paged out; checked against the corpus
//   first touch  a fresh region; every byte must read 0
//   bare         plain anonymous memory (4 KiB pages) on a userfaultfd
//                (src/platform/include/platform/userfaultfd.h) whose
//                handler thread only answers each fault with one 4 KiB
//                UFFDIO_COPY of the corpus page: what a fault costs alone
//
// Errors: Region::Create's, Pageout's, userfaultfd's, kIoError when the
// bare handler failed, kCorruption when a page read back wrong.
//
// Thread safety: plain functions; each creates and destroys its regions.
#ifndef ZTIER_TOOLS_ZTIER_BENCH_READAHEAD_RUN_H_
#define ZTIER_TOOLS_ZTIER_BENCH_READAHEAD_RUN_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "bench_harness.h"
#include "corpus/corpus.h"
#include "ztier/region.h"
#include "ztier/status.h"

namespace ztier::tool {

// One run into `out`: "pages_s" and "mb_s" (pages * 4096 / seconds / 1e6)
// of the read pass, "stored" (the pages Pageout stored), and "faults",
// "swap_ra" and "swap_ra_hit" during the read (RegionStats).
Status RunSequentialRead(std::size_t size_bytes, const std::string& codec,
                         unsigned page_cluster, const corpus::PageSet& corpus,
                         Samples& out);

// One phase's touches, in nanoseconds.
struct TouchSeries {
  std::vector<std::uint32_t> fault_ns;  // touches of unmapped pages
  std::vector<std::uint32_t> hit_ns;    // touches of mapped pages
  RegionStats before, after;            // around the touches (not bare)
};

struct FaultLatencySample {
  TouchSeries stored, first_touch, bare;
};

Result<FaultLatencySample> RunFaultLatency(std::size_t pages,
                                           const std::string& codec,
                                           std::uint32_t seed,
                                           const corpus::PageSet& corpus);

}  // namespace ztier::tool

#endif  // ZTIER_TOOLS_ZTIER_BENCH_READAHEAD_RUN_H_
