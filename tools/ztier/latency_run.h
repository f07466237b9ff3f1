// File: tools/ztier/latency_run.h
//
// One run of the experiment of the zswap load contention series
// (docs/references.md) on a PageStore: what a high-priority load (or
// store) waits for when low-priority stores and loads share its CPU.
//
// Per CPU used (CPU c of --cpus N is online CPU c, and every thread of its
// group is pinned there):
//   2 workers   nice +10   store their own buffer, then load it back and
//                          check it, over and over (the reclaim/swap-in load)
//   1 spinner   nice 0     burns CPU, so workers get preempted mid-operation
//   1 reader    nice -19   stores its own buffer once, then in rounds loads
//                          every page of it, timing each load; a round
//                          starts every round_period_us on a fixed schedule
//                          (a late round skips the periods it missed)
//   1 storer    nice -19   likewise times each store of its own buffer
// The fixed schedule gives the high-priority tasks the same amount of work
// in both modes, so the CPU left to the workers is comparable; the workers'
// own CPU time is measured too, for their cost per operation.
// Every loaded page is compared with what was stored. The reader and the
// storer do one untimed round before the clock starts (a thread's first
// load creates its decompressor).
//
// Thread safety: RunLatencyOnce is self-contained; call it from one thread.
#ifndef ZTIER_TOOLS_ZTIER_LATENCY_RUN_H_
#define ZTIER_TOOLS_ZTIER_LATENCY_RUN_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "corpus/corpus.h"
#include "ztier/status.h"

namespace ztier::tool {

struct LatencyConfig {
  bool shared = false;      // the shared-stream baseline (else separate)
  std::size_t cpus = 1;     // groups, one per CPU 0..cpus-1
  double seconds = 12;
  std::string codec = "zstd";
  std::size_t buffer_pages = 16;  // each task's own buffer
  unsigned round_period_us = 2000;  // a reader's and a storer's rounds
};

struct LatencyRunResult {
  std::vector<std::uint32_t> read_ns;   // every timed high-priority load
  std::vector<std::uint32_t> store_ns;  // every timed high-priority store
  std::uint64_t worker_ops = 0;         // stores + loads by the workers
  double worker_cpu_seconds = 0;        // CPU time the workers used
  double seconds = 0;                   // wall time of the run
  std::uint64_t mismatches = 0;         // loads that returned wrong data
  bool priorities_applied = true;       // setpriority/affinity all worked
};

// Runs one mode for config.seconds with `pages` as the data to store (at
// least buffer_pages pages). Errors: a bad configuration (more CPUs than
// online) or a store that fails.
Result<LatencyRunResult> RunLatencyOnce(const LatencyConfig& config,
                                        const corpus::PageSet& pages);

}  // namespace ztier::tool

#endif  // ZTIER_TOOLS_ZTIER_LATENCY_RUN_H_
