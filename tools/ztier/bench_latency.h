// File: tools/ztier/bench_latency.h
//
// `ztier bench latency`: the benchmark of the zswap load contention series
// (docs/references.md), the shared-stream baseline against separate store
// and load paths, in one run. See latency_run.h for the experiment and
// `ztier bench latency --help` for the flags. A progress line goes to
// stderr when it is a terminal. `--plot DIR` draws latency-cpusN-reads.png
// and latency-cpusN-stores.png (plot.h): each mode's p50, p90, p99,
// p99.9, p99.99 and slowest of one run, median over the runs with min-max
// bars, on a log scale.
#ifndef ZTIER_TOOLS_ZTIER_BENCH_LATENCY_H_
#define ZTIER_TOOLS_ZTIER_BENCH_LATENCY_H_

#include <span>
#include <string_view>

namespace ztier::tool {

// args: the words after `latency`. Exit status: 0, 1 (a run failed, data
// came back wrong, or --plot given and a chart not drawn), 2 (usage).
int RunBenchLatency(std::span<const std::string_view> args);

}  // namespace ztier::tool

#endif  // ZTIER_TOOLS_ZTIER_BENCH_LATENCY_H_
