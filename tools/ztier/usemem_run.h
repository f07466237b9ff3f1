// File: tools/ztier/usemem_run.h
//
// One run of `ztier usemem` (usemem.h): the vm-scalability usemem workload
// of the zswap store batching series on one ztier Region shared by N
// worker threads.
//
//   auto r = RunUsememOnce({.workers = 4, .worker_bytes = 256 << 20,
//                           .budget_bytes = 614 << 20}, corpus);
//
// RunUsememOnce creates a Region of workers * worker_bytes (batched:
// batch_stores, parallel backend, batch 8; else the serial backend, one page
// at a time) and starts the workers together. Worker w, on its slice of
// worker_bytes: copies corpus page i % corpus.size() to its page i (fill)
// and adds a key of its own to every 8-byte word (write), timed; sleeps;
// reads every page back and compares it with corpus page + key (read,
// timed; a page that differs is a mismatch, counted, not an error). Then
// the region's counters, and its destruction timed (the time to free). A
// worker's KB/s is worker_bytes / 1024 / (fill + write + read).
// Errors: Region::Create's (kUnsupported without userfaultfd).
//
// Thread safety: starts and joins its own threads; call it from one thread.
#ifndef ZTIER_TOOLS_ZTIER_USEMEM_RUN_H_
#define ZTIER_TOOLS_ZTIER_USEMEM_RUN_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "corpus/corpus.h"
#include "ztier/region.h"
#include "ztier/status.h"

namespace ztier::tool {

struct UsememRunConfig {
  std::size_t workers = 4;
  std::size_t worker_bytes = 0;  // a multiple of 4096, > 0
  std::size_t budget_bytes = 0;  // the region's budget
  std::string codec = "lz4";
  unsigned page_cluster = 0;
  unsigned max_pool_percent = 20;
  bool batched = true;  // false: the one-page-at-a-time baseline
  double sleep_seconds = 1;
};

// A page that read back wrong: its first differing word.
struct UsememMismatch {
  std::size_t worker = 0, page = 0, word = 0;  // page within the slice
  std::uint64_t got = 0, want = 0;
};

struct UsememWorkerResult {
  double fill_seconds = 0, write_seconds = 0, read_seconds = 0;
  double kb_s = 0;  // worker_bytes / 1024 / (fill + write + read)
  std::uint64_t pages_verified = 0;
  std::vector<UsememMismatch> mismatches;  // the first kMaxReported
  std::uint64_t mismatched = 0;            // all of them
  static constexpr std::size_t kMaxReported = 8;
};

struct UsememRunResult {
  bool batched = true;
  std::vector<UsememWorkerResult> workers;
  double avg_kb_s = 0;    // mean over the workers
  double total_kb_s = 0;  // sum over the workers
  double free_usecs = 0;  // the region's destruction
  RegionStats stats;      // just before the destruction
  std::uint64_t pages_verified = 0;
  std::uint64_t mismatches = 0;
};

Result<UsememRunResult> RunUsememOnce(const UsememRunConfig& config,
                                      const corpus::PageSet& corpus);

}  // namespace ztier::tool

#endif  // ZTIER_TOOLS_ZTIER_USEMEM_RUN_H_
