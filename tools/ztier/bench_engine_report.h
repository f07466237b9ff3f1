// File: tools/ztier/bench_engine_report.h
//
// The results of `ztier bench engine` and how they are reported: the text
// tables on stdout and the JSON document of --json.
//
// A CaseResult holds one codec on one corpus: a Series of samples (MB/s, one
// per measured run) for every (path, op, threads, batch, backend), and the
// size figures. The derived ratios (store/compress, load/(decompress+copy),
// batch-8 store parallel/serial) are computed from the series medians, with
// their acceptance targets where one applies.
//
// JSON layout:
//   {"machine": {...}, "config": {..., "threads": the most, "thread_counts":
//                                 [1, 2, ...]},
//    "measurements": [{"codec","corpus","path","op","threads","batch",
//                      "backend","mb_s_median","mb_s_min","mb_s_max",
//                      "mb_s_mean","mb_s_stddev","mb_s_cv","runs",
//                      "samples":[...]}, ...],
//    "sizes": [{"codec","corpus","pages","ratio","compressed_bytes",
//               "mem_used_total","mem_used_total_over_compressed",
//               "metadata_bytes_per_page", ..., "mem_used_total_after_compact",
//               "mem_used_total_after_compact_over_compressed"}, ...],
//    "derived": [{"codec","corpus","name","value","target","met"}, ...]}
//
// Thread safety: plain functions over values.
#ifndef ZTIER_TOOLS_ZTIER_BENCH_ENGINE_REPORT_H_
#define ZTIER_TOOLS_ZTIER_BENCH_ENGINE_REPORT_H_

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "corpus/corpus.h"
#include "engine_measure.h"
#include "machine_info.h"
#include "ztier/status.h"

namespace ztier::tool {

struct BenchConfig {
  struct Corpus {
    std::string name;
    std::string path;
    std::size_t pages = 0;
  };
  std::size_t runs = 5;
  // Thread counts measured (ascending, 1 first); the batch-1 variants run
  // on each, the batch-8 ones also on every count above 1.
  std::vector<std::size_t> thread_counts = {1};
  std::size_t parallel_workers = 1;  // helpers of the parallel backends
  std::vector<std::string> codecs;
  std::vector<Corpus> corpora;
  std::string json_path;
};

struct Series {
  EngineVariant variant;  // op is the series' own op (kStore, kLoad or kOverwrite for store)
  std::vector<double> samples;  // MB/s, one per measured run
};

struct CaseResult {
  std::string codec;
  std::string corpus;
  std::size_t pages = 0;
  std::vector<Series> series;  // in print order
  SizeFigures sizes;
  // CrossCpuRoundTripNs() after each measured run: the parallel figures
  // move with it (machine_info.h).
  std::vector<double> cross_cpu_rtt_ns;
  // FreshMemoryPopulateUs() after each measured run: what the 2 MiB steps
  // of a fresh fill's pool cost then.
  std::vector<double> populate_2mib_us;
};

// One derived ratio of a case.
struct Derived {
  std::string name;
  double value = 0;              // NaN when a series is missing
  std::optional<double> target;  // where an acceptance target applies
};

// An empty result with one series per (variant, op), sorted for printing.
CaseResult NewCaseResult(const std::string& codec,
                         const corpus::PageSet& corpus,
                         const std::vector<EngineVariant>& variants);

// Appends the samples of one Measure(v) call to the matching series.
void AddSamples(const EngineVariant& v, const std::vector<OpSample>& samples,
                CaseResult* result);

std::vector<Derived> DeriveRatios(const CaseResult& r);

// "config: runs=5 (+1 warm-up) ..." and the corpus list, several lines.
std::string ConfigText(const BenchConfig& cfg);
// "== lz4 / anon-python.pages (4096 pages) ==" and the throughput table.
std::string CaseTable(const CaseResult& r);
// Throughput against threads of one case, batch 1 serial: per op and
// thread count the median, min, max and cv% with the ideal (threads x the
// 1-thread median) and the median as a percent of it. Empty when the case
// has no series on more than one thread.
std::string ScalingTable(const CaseResult& r);
// The series (path, op, threads, batch, backend) of `r`; nullptr when `r`
// has no such series or it has no samples.
const Series* FindCaseSeries(const CaseResult& r, BenchPath path, BenchOp op,
                             std::size_t threads, std::size_t batch,
                             BatchBackend backend);
std::string SizeTable(const std::vector<CaseResult>& results);
std::string DerivedTable(const std::vector<CaseResult>& results);

// Writes the JSON document to `path`. kIoError naming the path on failure.
Status WriteJson(const std::string& path, const MachineInfo& machine,
                 const BenchConfig& cfg,
                 const std::vector<CaseResult>& results);

}  // namespace ztier::tool

#endif  // ZTIER_TOOLS_ZTIER_BENCH_ENGINE_REPORT_H_
