// File: tools/ztier/bench_nbd_report.h
//
// What `ztier bench nbd` measured (NbdBenchConfig, NbdResults) and how it is
// reported: the configuration text, the fio table, the nbdcopy table, the
// derived ratios, and the JSON document.
//
// Samples are kept per run, in run order, so that a derived ratio is taken
// within each run (ztier and its peer measured moments apart) before the
// median over the runs.
//
// Thread safety: plain values and functions.
#ifndef ZTIER_TOOLS_ZTIER_BENCH_NBD_REPORT_H_
#define ZTIER_TOOLS_ZTIER_BENCH_NBD_REPORT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "machine_info.h"
#include "plot.h"
#include "ztier/status.h"

namespace ztier::tool {
class JsonWriter;
}  // namespace ztier::tool

namespace ztier::tool::bench {

struct NbdJob;

enum class ServerKind { kZtier, kNbdkit, kNbdkitZstd };

struct ServerSpec {
  ServerKind kind = ServerKind::kZtier;
  std::string codec;  // ztier: its codec; nbdkit: "sparse"; nbdkit-zstd: "zstd"
  std::string label;  // "ztier-lz4", "nbdkit", "nbdkit-zstd"
};

// "ztier", "nbdkit", "nbdkit-zstd".
std::string_view ServerName(ServerKind kind);

struct ToolInfo {
  std::string path;     // empty: not found
  std::string version;  // `--version`, "" if not found
};

struct NbdBenchConfig {
  struct Corpus {
    std::string name;  // "anon-python.pages"
    std::string path;  // the .pages.zst file
    std::uint64_t bytes = 0;  // uncompressed
  };
  std::size_t runs = 5;
  std::int64_t seconds = 3;
  std::uint64_t size_bytes = 0;  // device / export size of part 1
  std::uint64_t area_bytes = 0;  // what the fio jobs and the fill cover
  std::vector<std::string> codecs;
  std::string corpus_dir;
  std::vector<Corpus> corpora;
  ToolInfo ztier, fio, nbdkit, nbdcopy;
  bool no_nbdkit = false;
  bool fio_part = true;   // fio found
  bool copy_part = true;  // nbdcopy found
  std::vector<ServerSpec> servers;  // in the order they are measured
  std::vector<std::string> notes;   // what was skipped, and why
  std::string json_path;
};

struct CopySamples {  // one corpus on one server, one entry per run
  std::vector<double> in_mb_s;
  std::vector<double> out_mb_s;
  std::vector<double> stored_bytes;  // ztier: mem_used_total; nbdkit: RSS growth
  std::vector<double> rss_growth_bytes;
};

struct NbdResults {
  // [job][server]: one sample per run.
  std::vector<std::vector<std::vector<double>>> iops;
  std::vector<std::vector<std::vector<double>>> mb_s;
  // fio's CPU use (FioFigures::cpu_percent), where fio reported it.
  std::vector<std::vector<std::vector<double>>> fio_cpu;
  // [corpus][server].
  std::vector<std::vector<CopySamples>> copies;

  // Sized for `cfg` (jobs x servers, corpora x servers), all empty.
  static NbdResults For(const NbdBenchConfig& cfg);
};

struct DerivedRatio {
  std::string name;  // "ztier-lz4/nbdkit randread 4k QD32 IOPS"
  std::string numerator;    // server labels
  std::string denominator;
  std::string job;
  std::vector<double> per_run;  // runs where both were measured
  double median = 0, min = 0, max = 0;  // NaN when per_run is empty
  double target = 0;
  // Only meaningful when per_run is not empty.
  bool met() const { return !per_run.empty() && median >= target; }
};

// The ratios with targets, for every ztier variant against each nbdkit
// variant measured.
std::vector<DerivedRatio> DeriveRatios(const NbdBenchConfig& cfg,
                                       const NbdResults& results);

// Multi-line configuration block (ends with a newline).
std::string ConfigText(const NbdBenchConfig& cfg);

std::string FioTable(const NbdBenchConfig& cfg, const NbdResults& results);
std::string CopyTable(const NbdBenchConfig& cfg, const NbdResults& results);
std::string DerivedTable(const std::vector<DerivedRatio>& ratios);

// The fio part as two bar charts (--plot): "nbd-4k", IOPS of the 4 KiB
// jobs in thousands, and "nbd-128k", MB/s of the 128 KiB jobs; one bar per
// server at each job, the median with the min-max over the runs.
std::vector<Chart> NbdCharts(const NbdBenchConfig& cfg,
                             const NbdResults& results);

// "job", "rw", "block_size" and "iodepth" of `job` as keys of the object
// `w` has open.
void WriteJobKeysJson(JsonWriter& w, const NbdJob& job);

Status WriteNbdJson(const std::string& path, const MachineInfo& machine,
                    const NbdBenchConfig& cfg, const NbdResults& results,
                    const std::vector<DerivedRatio>& ratios);

}  // namespace ztier::tool::bench

#endif  // ZTIER_TOOLS_ZTIER_BENCH_NBD_REPORT_H_
