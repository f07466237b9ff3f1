// File: tools/ztier/usemem_run.h
//
// One run of `ztier usemem` (usemem.h): the vm-scalability usemem workload
// of the zswap store batching series on one ztier Region shared by N
// worker threads.
//
//   auto r = RunUsememOnce({.workers = 4, .worker_bytes = 256 << 20,
//                           .budget_bytes = 614 << 20}, corpus);
//   double kb_s = r->total_kb_s;
//
// RunUsememOnce, in order:
//   1. creates a Region of workers * worker_bytes with the budget, codec,
//      page_cluster and store path of the config (batched: batch_stores,
//      parallel backend, batch 8; one-at-a-time: batch_stores false, serial
//      backend);
//   2. starts the workers together (a latch); worker w owns the slice
//      [w * worker_bytes, (w + 1) * worker_bytes) and, timed:
//        fill   copies corpus page i % corpus.size() to its page i, as usemem
//               --read-silesia does from a pre-loaded buffer;
//        write  adds key(w) to every 8-byte word (w[i] += key);
//      then sleeps sleep_seconds (not timed); then, timed:
//        read   reads every word back and compares each page with corpus
//               page + key per word; a page that differs is a mismatch;
//   3. takes the region's counters, then times its destruction (the time to
//      free: unmapping and freeing every pool object).
// A worker's throughput is worker_bytes / (fill + write + read) in KB/s
// (1 KB = 1024 bytes, as usemem prints); the total is their sum.
//
// Errors: Region::Create's (kUnsupported when userfaultfd is unavailable).
// Mismatches are not errors: they are counted in the result.
//
// Thread safety: RunUsememOnce starts and joins its own threads; call it from
// one thread.
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
  std::size_t budget_bytes = 0;  // the region's budget (0: no reclaimer)
  std::string codec = "lz4";
  unsigned page_cluster = 0;
  unsigned max_pool_percent = 20;
  bool batched = true;  // false: the one-page-at-a-time baseline
  double sleep_seconds = 1;
};

struct UsememWorkerResult {
  double fill_seconds = 0;
  double write_seconds = 0;
  double read_seconds = 0;
  double kb_s = 0;  // worker_bytes / 1024 / (fill + write + read)
  std::uint64_t pages_verified = 0;
  std::uint64_t mismatches = 0;  // pages that read back wrong
};

// A page that read back wrong: its first differing word.
struct UsememMismatch {
  std::size_t worker = 0;
  std::size_t page = 0;  // within the worker's slice
  std::size_t word = 0;  // 8-byte word within the page
  std::uint64_t got = 0;
  std::uint64_t want = 0;
};

struct UsememRunResult {
  bool batched = true;
  std::vector<UsememWorkerResult> workers;
  double avg_kb_s = 0;      // mean over the workers
  double total_kb_s = 0;    // sum over the workers
  double free_usecs = 0;    // the region's destruction
  double wall_seconds = 0;  // creation to destruction
  RegionStats stats;        // just before the destruction
  std::uint64_t pages_verified = 0;
  std::uint64_t mismatches = 0;
  std::vector<UsememMismatch> first_mismatches;  // up to kMaxReported
  static constexpr std::size_t kMaxReported = 8;
};

// The RegionOptions a run uses (step 1).
RegionOptions UsememRegionOptions(const UsememRunConfig& config);

// The constant worker w adds to each of its words.
std::uint64_t UsememKey(std::size_t worker);

Result<UsememRunResult> RunUsememOnce(const UsememRunConfig& config,
                                      const corpus::PageSet& corpus);

}  // namespace ztier::tool

#endif  // ZTIER_TOOLS_ZTIER_USEMEM_RUN_H_
