// File: tools/ztier/bench_nbd.h
//
// `ztier bench nbd` (ztier(8)): `ztier serve` against nbdkit's memory
// plugin, measured from the outside with fio (bench_fio.h) and nbdcopy over
// NBD on Unix sockets. A variant per server (bench_harness.h: ztier-CODEC
// per --codec, nbdkit and nbdkit-zstd), no warm-up run: each run starts
// every server afresh, in a private temporary folder.
//
// A server's variant gives, per run, "JOB iops", "JOB mb_s" and "JOB cpu"
// for each fio job (NbdJob::name), and "CORPUS in_mb_s", "CORPUS out_mb_s",
// "CORPUS stored_mib", "CORPUS rss_mib" and "CORPUS orig_over_stored" for
// each corpus (its name). NbdReport makes of them the configuration lines,
// the fio and nbdcopy tables, the derived ratios (each taken within a run,
// Measurements::Ratios, before the median over the runs) and two charts.
//
// A missing tool skips its part with a note: fio, the fio part; nbdcopy,
// the copies; nbdkit (or --no-nbdkit), the peers and ratios. Exit status: 0
// done (also when a part was skipped); 1 a runtime failure (no corpus, a
// server that does not start, fio or nbdcopy failing, a copy that reads
// back wrong); 2 bad usage.
//
// Thread safety: plain values and functions.
#ifndef ZTIER_TOOLS_ZTIER_BENCH_NBD_H_
#define ZTIER_TOOLS_ZTIER_BENCH_NBD_H_

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "bench_harness.h"
#include "bench_proc.h"
#include "bench_report.h"

namespace ztier::tool {

// Runs the command on the words after `nbd`; returns the exit status.
int RunBenchNbd(std::span<const std::string_view> args);

namespace bench {

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

}  // namespace bench
}  // namespace ztier::tool

#endif  // ZTIER_TOOLS_ZTIER_BENCH_NBD_H_
