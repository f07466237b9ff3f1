// File: tools/ztier/bench_engine_charts.h
//
// The charts of `ztier bench engine --plot DIR` (plot.h), two per codec,
// drawn from the results of the first corpus measured with that codec:
//   engine-threads-CODEC  lines: MB/s against threads (batch 1, serial) for
//                         codec compress and decompress and store store and
//                         load, each with a dashed ideal line (threads x its
//                         1-thread median); only when more than one thread
//                         count was measured
//   engine-batch-CODEC    bars: MB/s of batch 1 serial, batch 8 serial and
//                         batch 8 parallel (one thread) for compress,
//                         decompress, store, load and overwrite
// Points are medians over the runs; error bars span min to max.
//
// Thread safety: a plain function over values.
#ifndef ZTIER_TOOLS_ZTIER_BENCH_ENGINE_CHARTS_H_
#define ZTIER_TOOLS_ZTIER_BENCH_ENGINE_CHARTS_H_

#include <vector>

#include "bench_engine_report.h"
#include "plot.h"

namespace ztier::tool {

std::vector<Chart> EngineCharts(const BenchConfig& cfg,
                                const std::vector<CaseResult>& results);

}  // namespace ztier::tool

#endif  // ZTIER_TOOLS_ZTIER_BENCH_ENGINE_CHARTS_H_
