// File: tools/ztier/latency_run.h
//
// One run of `ztier bench latency` (bench_latency.h), the experiment of the
// zswap load contention series (docs/references.md), on a PageStore: what a
// high-priority load or store waits for when low-priority stores and loads
// share its CPU. Per CPU c of 0..cpus-1, every thread of its group pinned
// to it:
//   2 workers  nice +10  store their own buffer, load it back and check it,
//                        over and over (the reclaim/swap-in load)
//   1 spinner  nice 0    burns CPU, so that workers get preempted
//   1 reader   nice -19  stores its buffer once, then in rounds loads and
//                        times each page of it; a round starts every
//                        round_period_us on a fixed schedule (a late round
//                        skips the periods it missed), so both modes give
//                        the high-priority tasks the same work
//   1 storer   nice -19  likewise times each store of its own buffer
// The reader and the storer do one untimed round first (a thread's first
// load creates its decompressor). Every loaded page is compared with what
// was stored; the workers' CPU time is measured for their cost per op.
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
  bool shared = false;  // the shared-stream baseline (shared_stream.h)
  std::size_t cpus = 1;
  double seconds = 12;
  std::string codec = "zstd";
  std::size_t buffer_pages = 16;    // each task's own buffer
  unsigned round_period_us = 2000;  // the reader's and the storer's rounds
};

struct LatencyRunResult {
  std::vector<std::uint32_t> read_ns;   // every timed high-priority load
  std::vector<std::uint32_t> store_ns;  // every timed high-priority store
  std::uint64_t worker_ops = 0;         // the workers' stores + loads
  double worker_cpu_seconds = 0;
  double seconds = 0;              // wall time
  std::uint64_t mismatches = 0;    // loads that returned wrong data
  bool priorities_applied = true;  // every nice value and pinning
};

// Errors: more CPUs than online, fewer corpus pages than a buffer
// (kInvalidArgument), or a store or load that failed.
Result<LatencyRunResult> RunLatencyOnce(const LatencyConfig& config,
                                        const corpus::PageSet& pages);

}  // namespace ztier::tool

#endif  // ZTIER_TOOLS_ZTIER_LATENCY_RUN_H_
