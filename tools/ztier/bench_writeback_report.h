// File: tools/ztier/bench_writeback_report.h
//
// The configuration and results of `ztier bench writeback`
// (bench_writeback.h), and their text and JSON reports.
//
// Thread safety: plain values and functions.
#ifndef ZTIER_TOOLS_ZTIER_BENCH_WRITEBACK_REPORT_H_
#define ZTIER_TOOLS_ZTIER_BENCH_WRITEBACK_REPORT_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "machine_info.h"
#include "plot.h"
#include "writeback_run.h"
#include "ztier/status.h"

namespace ztier::tool {

enum class WbVariant { kSync, kBatched, kFio };

// "sync", "batched", "fio": table and JSON names.
std::string_view WbVariantName(WbVariant v);

struct WritebackBenchConfig {
  std::string corpus_path;
  std::string corpus_name;  // "anon-python.pages"
  std::size_t corpus_pages = 0;
  std::uint64_t size_bytes = 0;  // a multiple of 4096
  std::string dir;
  std::string image_path;     // DIR/ztier-bench-writeback.img
  std::string fio_file_path;  // DIR/ztier-bench-fio.img
  std::size_t runs = 5;       // measured, after one warm-up
  std::string codec = "lz4";
  std::size_t batch_size = 32;    // in_flight of the batched variant
  std::size_t max_io_pages = 32;  // pages per IO of the batched variant
  bool compressed = false;
  std::string fio_path;  // empty: fio not found, not measured
  std::string fio_version;
  std::vector<std::string> fio_args;
  std::string json_path;
};

struct WritebackRunFigures {
  std::size_t run = 0;  // 1-based
  std::vector<WbVariant> order;
  WritebackSample sync;
  WritebackSample batched;
  std::optional<FioSample> fio;
};

// The variants of measured run `run` (0-based) in the order they run:
// even runs sync, batched, fio; odd runs fio, batched, sync. fio only when
// `with_fio`.
std::vector<WbVariant> RunOrder(std::size_t run, bool with_fio);

// "config: ..." and the variants, several lines.
std::string WritebackConfigText(const WritebackBenchConfig& cfg);

// The table, the memory/bd_stat lines and the ratio lines.
std::string WritebackResultText(const WritebackBenchConfig& cfg,
                                const std::vector<WritebackRunFigures>& runs);

// The chart of `--plot DIR` (plot.h): writeback.png, bars of MB/s of each
// measured variant (sync, batched, fio), median over the runs with min-max
// error bars, on a log scale (sync is ~25x slower than batched).
Chart WritebackChart(const WritebackBenchConfig& cfg,
                     const std::vector<WritebackRunFigures>& runs);

// Writes the JSON document to `path`; kIoError naming the path on failure.
Status WriteWritebackJson(const std::string& path, const MachineInfo& machine,
                          const WritebackBenchConfig& cfg,
                          const std::vector<WritebackRunFigures>& runs);

}  // namespace ztier::tool

#endif  // ZTIER_TOOLS_ZTIER_BENCH_WRITEBACK_REPORT_H_
