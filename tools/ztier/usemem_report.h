// File: tools/ztier/usemem_report.h
//
// The configuration and results of `ztier usemem` (usemem.h), and their
// text and JSON reports.
//
// Thread safety: plain values and functions.
#ifndef ZTIER_TOOLS_ZTIER_USEMEM_REPORT_H_
#define ZTIER_TOOLS_ZTIER_USEMEM_REPORT_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "machine_info.h"
#include "plot.h"
#include "usemem_run.h"
#include "ztier/status.h"

namespace ztier::tool {

class JsonWriter;

struct UsememConfig {
  UsememRunConfig run;      // batched is set per run
  std::string budget_text;  // as given: "60%" or "600M"
  std::string corpus_path;
  std::string corpus_name;
  std::size_t corpus_pages = 0;
  std::size_t runs = 1;  // per variant
  bool compare = false;  // --compare-batching
  std::string json_path;
};

// One measured run of one variant.
struct UsememRun {
  std::size_t run = 0;    // 1-based; both variants of a pair share it
  std::size_t order = 0;  // 0: ran first in its pair
  UsememRunResult result;
};

// "batched" / "one-at-a-time".
const char* UsememVariantName(bool batched);

// The variants of run `run` (0-based) in the order they run: with compare,
// even runs one-at-a-time then batched, odd runs the reverse; else batched.
std::vector<bool> UsememRunOrder(std::size_t run, bool compare);

// "config: ..." and the variants, several lines.
std::string UsememConfigText(const UsememConfig& cfg);

// The table, as the zswap store batching series prints usemem's results,
// the counters, the "verified:" line and, with compare, the ratio line
// last.
std::string UsememResultText(const UsememConfig& cfg,
                             const std::vector<UsememRun>& runs);

// The mismatches of a run, one line each, for stderr.
std::string UsememMismatchText(const UsememRun& run);

// The chart of `--plot DIR` (plot.h): usemem.png, bars of the average (per
// worker) and total throughput of each variant that ran, in MiB/s (the
// table's KB/s / 1024), median over the runs with min-max error bars.
Chart UsememChart(const UsememConfig& cfg, const std::vector<UsememRun>& runs);

// Every RegionStats counter as one JSON object, where `w` expects a value
// (also used by `ztier bench readahead`).
void WriteRegionStatsJson(JsonWriter& w, const RegionStats& s);

// Writes the JSON document to `path`; kIoError naming the path on failure.
Status WriteUsememJson(const std::string& path, const MachineInfo& machine,
                       const UsememConfig& cfg,
                       const std::vector<UsememRun>& runs);

}  // namespace ztier::tool

#endif  // ZTIER_TOOLS_ZTIER_USEMEM_REPORT_H_
