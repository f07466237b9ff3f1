// File: tools/ztier/bench_report.h
//
// The one result model of every `ztier bench` experiment, and its one
// writer. An experiment fills a Report with lines of prose, tables of rows
// and charts; Finish() then prints the text on stdout, writes the JSON
// (--json) and draws the charts (--plot), the same way for every
// experiment.
//
//   Report report("bench writeback", GetMachineInfo());
//   report.Condition("codec", "lz4");
//   report.Line("config: size=1073741824 codec=lz4 runs=5");
//   Table& t = report.AddTable("variants", "");
//   t.AddRow().Text("variant", "sync").Int("pages", 259776)
//       .Figure("seconds", m.Of("sync", "seconds"), 3)
//       .Figure("MB/s", m.Of("sync", "mb_s"), 1, kRange | kCv);
//   report.AddChart(chart);
//   return report.Finish(kCommand, flags);
//
// Text. The machine line (machine_info.h) comes first, then each block in
// the order it was added: a Line as it is, a Table as "== TITLE ==" (left
// out when the title is empty) above its rows padded into columns (text
// cells left-aligned, numbers right-aligned), then a blank line. A cell that
// a row does not have is blank. docs/benchmarks.md quotes this text, and
// tools/bench/render_docs.sh finds its parts by the "== TITLE" lines.
//
// JSON (one schema for every experiment; tools/bench/compare_runs.py reads
// it):
//   {"benchmark": "bench writeback",
//    "machine": {...},                      machine_info.h
//    "conditions": {"codec": "lz4", ...},   Condition(), strings
//    "tables": {"variants": [ROW, ...], ...}}
// where a ROW is an object with a member per cell, keyed by JsonKey(COLUMN):
// Text a string, Int an integer, Number a number, Bool a boolean, and a
// Figure the five members KEY_median, KEY_min, KEY_max, KEY_stddev and
// KEY_cv (null with no samples; bench_stats.h's WriteStatsJson). Lines are
// text only.
//
// Thread safety: a Report is a plain value used by one thread.
#ifndef ZTIER_TOOLS_ZTIER_BENCH_REPORT_H_
#define ZTIER_TOOLS_ZTIER_BENCH_REPORT_H_

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "bench_stats.h"
#include "machine_info.h"
#include "plot.h"

namespace ztier::tool {

struct BenchFlags;

// How a Figure cell (a sample over runs) is shown in the text (bits; the
// JSON always has all).
enum FigureShow : unsigned {
  kMedian = 0,      // the median alone
  kRange = 1 << 0,  // "median (min-max)", under "COLUMN median (min-max)"
  kCv = 1 << 1,     // and a column "cv%" (percent, 1 decimal) after it
  // and a column "COLUMN cv%" after it: for rows with several figures
  // that each show their cv (a plain "cv%" heading is one column).
  kOwnCv = 1 << 2,
};

// "MB/s median" -> "mb_s_median": lower case, each run of characters other
// than [a-z0-9] one '_', none at either end.
std::string JsonKey(std::string_view column);

// One row of a table; the setters return *this so that a row is one
// statement.
class Row {
 public:
  struct NumberValue {
    double value;
    int decimals;
  };
  struct FigureValue {
    SampleStats stats;  // of the samples
    int decimals;
    unsigned show;
  };
  // One cell: its column heading and its value.
  struct Cell {
    std::string column;
    std::variant<std::string, std::int64_t, NumberValue, bool, FigureValue>
        value;
  };

  Row& Text(std::string_view column, std::string value) {
    return Add(column, std::move(value));
  }
  Row& Int(std::string_view column, std::int64_t value) {
    return Add(column, value);
  }
  Row& Number(std::string_view column, double value, int decimals) {
    return Add(column, NumberValue{value, decimals});
  }
  // Text "yes" / "no"; JSON true / false.
  Row& Bool(std::string_view column, bool value) { return Add(column, value); }
  Row& Figure(std::string_view column, std::span<const double> samples,
              int decimals, unsigned show = kRange) {
    return Add(column, FigureValue{Summarize(samples), decimals, show});
  }

  const std::vector<Cell>& cells() const { return cells_; }

 private:
  Row& Add(std::string_view column, decltype(Cell::value) value) {
    cells_.push_back({std::string(column), std::move(value)});
    return *this;
  }

  std::vector<Cell> cells_;
};

struct Table {
  std::string name;   // the key under "tables" in the JSON
  std::string title;  // the "== TITLE ==" heading; empty: none
  std::vector<Row> rows;
  // false: in the JSON only, left out of the text (figures the text gives
  // in a Line of its own, e.g. "batched / sync: 4.10x (...)").
  bool text = true;

  Row& AddRow() { return rows.emplace_back(); }
};

class Report {
 public:
  Report(std::string benchmark, MachineInfo machine);

  // A condition of the whole run (codec, size, runs, ...), in the JSON's
  // "conditions"; not printed (say it in a Line too when the reader needs
  // it).
  void Condition(std::string_view key, std::string value);
  // A line of text (may hold newlines) at this point of the output.
  void Line(std::string text);
  // A new table at this point of the output. REQUIRES: `name` unique.
  // The reference stays valid until the next AddTable.
  Table& AddTable(std::string name, std::string title);
  void AddChart(Chart chart);
  // A Line "WHAT: M.MMx (NOTE, MIN-MAX)", M the median of `ratios` (per-run
  // ratios, Measurements::Ratios), or "WHAT: not measured (MISSING)" when
  // there are none; and a row of the JSON-only table "ratios" (created on
  // first use): "ratio" WHAT and the Figure "x" of `ratios` (4 decimals).
  // REQUIRES: no table of AddTable is named "ratios".
  void Ratio(std::string what, std::span<const double> ratios,
             std::string_view missing,
             std::string_view note = "median of per-run ratios");

  // The text described above.
  std::string Text() const;
  // The JSON document described above.
  std::string Json() const;

  // Prints Text() on stdout; with flags.json writes Json() there and prints
  // "\nwrote PATH"; with flags.plot draws the charts (plot.h's Plotter)
  // and prints "wrote DIR/NAME.png" for each, or the chart's error, on
  // stderr, never stdout, which holds the tables. When no Plotter can be
  // made (no gnuplot) it says so on stderr after the text ("COMMAND: --plot
  // DIR: no charts drawn: ERROR"), as AddPlotFlag's check did before the
  // runs (bench_harness.h).
  // Returns the command's exit status: 0, or 1 with "COMMAND: error" on
  // stderr when the JSON or a chart could not be written.
  int Finish(std::string_view command, const BenchFlags& flags) const;

  const std::vector<Chart>& charts() const { return charts_; }

 private:
  std::string benchmark_;
  MachineInfo machine_;
  std::vector<std::pair<std::string, std::string>> conditions_;
  // Each block is a Line (a string) or the index of a table.
  std::vector<std::variant<std::string, std::size_t>> blocks_;
  std::vector<Table> tables_;
  std::vector<Chart> charts_;
};

// A point at `x` of a chart's series: the median of `samples`, with error
// bars from their min to their max. REQUIRES: !samples.empty().
PlotPoint SpreadPoint(double x, std::span<const double> samples);

}  // namespace ztier::tool

#endif  // ZTIER_TOOLS_ZTIER_BENCH_REPORT_H_
