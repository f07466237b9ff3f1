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
#include <utility>

#include "bench_harness.h"
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

// The latency levels of each run: the q-quantile (bench_stats.h's
// Percentile) of its timed reads or stores; q = 1 is the slowest.
inline constexpr std::pair<double, const char*> kLatencyLevels[] = {
    {0.5, "p50"},     {0.9, "p90"},       {0.99, "p99"},
    {0.999, "p99.9"}, {0.9999, "p99.99"}, {1.0, "max"}};

// Runs one mode for config.seconds, storing `pages`, into `out`: for
// SERIES "reads" and "stores", "SERIES LEVEL" in microseconds (when any
// was timed), "SERIES timed" and "SERIES over 10 ms" (counts); "ops_s" and
// "ops_cpu_s", the workers' stores + loads per second of wall time and of
// their own CPU time; "priorities", 1 if every nice value and pinning
// applied, else 0. Errors: more CPUs than online or fewer corpus pages than
// a buffer (kInvalidArgument), a store or load that failed (kIoError), a
// load that returned wrong data (kCorruption).
Status RunLatencyOnce(const LatencyConfig& config, const corpus::PageSet& pages,
                      Samples& out);

}  // namespace ztier::tool

#endif  // ZTIER_TOOLS_ZTIER_LATENCY_RUN_H_
