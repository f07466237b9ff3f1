// File: tools/ztier/bench_latency.h
//
// `ztier bench latency`: the zswap load contention experiment, the
// shared-stream baseline (shared_stream.h) against separate store and load
// paths, alternating in each run (bench_harness.h's RunVariants), one
// Report (bench_report.h); `--plot DIR` draws latency-cpusN-reads.png and
// -stores.png. Flags: --help.
#ifndef ZTIER_TOOLS_ZTIER_BENCH_LATENCY_H_
#define ZTIER_TOOLS_ZTIER_BENCH_LATENCY_H_

#include <span>
#include <string_view>

namespace ztier::tool {

// args: the words after `latency`. Exit status: 0, 1 (a run failed, a load
// returned wrong data, or the JSON or a chart not written), 2 (usage).
int RunBenchLatency(std::span<const std::string_view> args);

}  // namespace ztier::tool

#endif  // ZTIER_TOOLS_ZTIER_BENCH_LATENCY_H_
