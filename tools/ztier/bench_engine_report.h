// File: tools/ztier/bench_engine_report.h
//
// What `ztier bench engine` (bench_engine.h) reports of one codec on one
// corpus (an EngineCase), through one Report (bench_report.h):
//   table "CODEC CORPUS"             "== CODEC / CORPUS (N pages), MB/s ==":
//                                    a row per (path, op, threads, batch,
//                                    backend), MB/s median (min-max), cv%
//   table "CODEC CORPUS scaling"     batch 1 serial against threads, with
//                                    the ideal (threads x the 1-thread
//                                    median) and the median as a percent of
//                                    it; only with more than one count
//   table "CODEC CORPUS conditions"  what the runs saw of the machine after
//                                    each run (machine_info.h): the
//                                    cross-CPU round trip and the cost of
//                                    populating fresh 2 MiB steps
// and of all cases the tables "sizes" and "derived" (ratios of medians with
// their targets), and two charts per codec, of its first corpus:
//   engine-threads-CODEC  MB/s against threads, batch 1 serial, each line
//                         with its dashed ideal (more than one count only)
//   engine-batch-CODEC    bars: batch 1 serial, batch 8 serial and batch 8
//                         parallel (one thread) of each op
//
// Thread safety: plain functions over values.
#ifndef ZTIER_TOOLS_ZTIER_BENCH_ENGINE_REPORT_H_
#define ZTIER_TOOLS_ZTIER_BENCH_ENGINE_REPORT_H_

#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "bench_harness.h"
#include "bench_report.h"
#include "engine_measure.h"

namespace ztier::tool {

struct EngineCase {
  std::string codec;
  std::string corpus;
  std::size_t pages = 0;
  std::vector<EngineVariant> variants;  // as run
  Measurements m;  // figure BenchOpName(op) of variant VariantName(v)
  std::vector<double> cross_cpu_rtt_ns;  // one per measured run
  std::vector<double> populate_2mib_us;  // FreshMemoryPopulateUs() of each
  SizeFigures sizes;
};

// The tables of one case, and its charts when `charts`.
void AddCase(Report& report, const EngineCase& c, bool charts,
             std::size_t runs);
// The "sizes" and "derived" tables of every case.
void AddSummary(Report& report, std::span<const EngineCase> cases);

}  // namespace ztier::tool

#endif  // ZTIER_TOOLS_ZTIER_BENCH_ENGINE_REPORT_H_
