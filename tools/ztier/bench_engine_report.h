// File: tools/ztier/bench_engine_report.h
//
// The tables and charts of `ztier bench engine` on one Report
// (bench_report.h): per codec and corpus the tables "CODEC CORPUS", "CODEC
// CORPUS scaling" (more than one thread count only) and "CODEC CORPUS
// conditions"; of all cases "sizes" and "derived"; per codec, of its first
// corpus, the charts engine-threads-CODEC and engine-batch-CODEC.
#ifndef ZTIER_TOOLS_ZTIER_BENCH_ENGINE_REPORT_H_
#define ZTIER_TOOLS_ZTIER_BENCH_ENGINE_REPORT_H_

#include <span>
#include <string>
#include <vector>

#include "bench_harness.h"
#include "bench_report.h"
#include "engine_measure.h"

namespace ztier::tool {

struct EngineCase {
  std::string codec, corpus;
  std::size_t pages = 0;
  std::vector<EngineVariant> variants;  // as run
  Measurements m;  // figure BenchOpName(op) of variant VariantName(v)
  std::vector<double> cross_cpu_rtt_ns;  // one per measured run
  std::vector<double> populate_2mib_us;  // FreshMemoryPopulateUs() of each
  SizeFigures sizes;
};

// One case's tables, and its charts when `charts`.
void AddCase(Report& report, const EngineCase& c, bool charts,
             std::size_t runs);
void AddSummary(Report& report, std::span<const EngineCase> cases);

}  // namespace ztier::tool

#endif  // ZTIER_TOOLS_ZTIER_BENCH_ENGINE_REPORT_H_
