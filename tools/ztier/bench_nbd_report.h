// File: tools/ztier/bench_nbd_report.h
//
// What `ztier bench nbd` (bench_nbd.h) measures and how it reports it: its
// configuration, the names of the samples each server's variant gives, and
// the Report (bench_report.h) built from them: the configuration lines, the
// fio table, the nbdcopy table, the derived ratios and the two charts.
//
// A server's variant gives, per run, "JOB iops", "JOB mb_s" and "JOB cpu"
// for each fio job (NbdJob::name), and "CORPUS in_mb_s", "CORPUS out_mb_s",
// "CORPUS stored_mib", "CORPUS rss_mib" and "CORPUS orig_over_stored" for
// each corpus (its name). A derived ratio is taken within each run
// (Measurements::Ratios) before the median over the runs.
//
// Thread safety: plain values and functions.
#ifndef ZTIER_TOOLS_ZTIER_BENCH_NBD_REPORT_H_
#define ZTIER_TOOLS_ZTIER_BENCH_NBD_REPORT_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "bench_fio.h"
#include "bench_harness.h"
#include "bench_proc.h"
#include "bench_report.h"

namespace ztier::tool::bench {

enum class ServerKind { kZtier, kNbdkit, kNbdkitZstd };

struct ServerSpec {
  ServerKind kind = ServerKind::kZtier;
  std::string codec;  // ztier: its codec; nbdkit: "sparse"; nbdkit-zstd: "zstd"
  std::string label;  // "ztier-lz4", "nbdkit", "nbdkit-zstd": its variant
};

struct NbdBenchConfig {
  struct Corpus {
    std::string name;         // "anon-python.pages"
    std::string path;         // the .pages.zst file
    std::uint64_t bytes = 0;  // uncompressed
  };
  BenchFlags common{.runs = 5};
  std::int64_t seconds = 3;
  std::uint64_t size_bytes = 0;  // device / export size of the fio part
  std::uint64_t area_bytes = 0;  // what the fio jobs and the fill cover
  std::vector<std::string> codecs;
  std::string corpus_dir;
  std::vector<Corpus> corpora;
  ToolInfo ztier, fio, nbdkit, nbdcopy;  // an empty path: not found
  bool no_nbdkit = false;
  std::vector<ServerSpec> servers;  // in the order they are measured
  std::vector<std::string> notes;   // what was skipped, and why
};

// "NAME FIGURE": the name of a sample of job or corpus `name`.
std::string SampleName(std::string_view name, std::string_view figure);

// The report of `m`, measured with `cfg`.
Report NbdReport(const NbdBenchConfig& cfg, const Measurements& m,
                 MachineInfo machine);

}  // namespace ztier::tool::bench

#endif  // ZTIER_TOOLS_ZTIER_BENCH_NBD_REPORT_H_
