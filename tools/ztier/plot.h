// File: tools/ztier/plot.h
//
// Charts of benchmark results, drawn by gnuplot: `ztier bench ... --plot DIR`.
//
//   Chart c{.name = "engine-threads-lz4",
//           .title = "lz4: throughput against threads",
//           .x_label = "threads", .y_label = "throughput (MB/s)"};
//   c.series.push_back({.title = "codec compress",
//                       .points = {{1, 834.7, 757.5, 904.5},
//                                  {2, 1531.4, 1435.5, 1742.3}}});
//   auto plotter = Plotter::Create("docs/charts");   // finds gnuplot
//   auto png = plotter->Render(c);   // docs/charts/engine-threads-lz4.png
//
// Render writes three files into DIR: NAME.dat (the points, one gnuplot
// data block per series, each headed by a comment naming it), NAME.gp (the
// gnuplot script, which reads NAME.dat and writes NAME.png by relative
// names) and NAME.png (960x600). `cd DIR && gnuplot NAME.gp` draws the same
// picture again, so the .gp and .dat are kept.
//
// A chart is either lines (one line with points per series; a series whose
// points carry y_min/y_max gets error bars from y_min to y_max, which the
// benchmarks use for the min and max over their runs; a series where every
// y_min == y_max, as after one run, gets none) or bars (clustered: series i
// of n is the i-th bar at each x, x being a category index whose label
// comes from x_tics; error bars likewise; each bar's y written above it).
// A dashed series (an ideal line) is drawn without points. The terminal is
// pngcairo when this gnuplot has it (`gnuplot -e "set terminal"` lists it),
// else png. Text is drawn as given (gnuplot's "enhanced" markup is off, so
// "page_cluster" stays as it is).
//
// Errors:
//   kInvalidArgument  a chart with no points at all, a name that is empty
//                     or holds other than [A-Za-z0-9._-], a non-finite
//                     value, a value <= 0 on a log axis, y_min > y or
//                     y_max < y.
//   kNotFound         Create: no gnuplot on $PATH (the message says which
//                     package to install).
//   kIoError          DIR cannot be created or a file written; gnuplot
//                     failing (the message quotes its error output) or not
//                     writing a PNG.
//
// Thread safety: a Plotter is immutable after Create and may be shared;
// Render runs gnuplot as a child process (fork and exec) and waits for it.
#ifndef ZTIER_TOOLS_ZTIER_PLOT_H_
#define ZTIER_TOOLS_ZTIER_PLOT_H_

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ztier/status.h"

namespace ztier::tool {

struct PlotPoint {
  double x = 0;
  double y = 0;
  std::optional<double> y_min;  // error bar bottom (e.g. min over runs)
  std::optional<double> y_max;  // error bar top (e.g. max over runs)
};

struct PlotSeries {
  std::string title;  // the legend entry; empty: not in the legend
  std::vector<PlotPoint> points;
  bool dashed = false;  // lines: a dashed line without points (ideal lines)
  int color = 0;        // gnuplot linetype 1..8; 0: the series' position
};

enum class PlotStyle { kLines, kBars };

struct Chart {
  std::string name;  // file stem: DIR/NAME.png, NAME.gp, NAME.dat
  std::string title;
  std::string x_label;  // with its unit, e.g. "threads", "batch (pages)"
  std::string y_label;  // with its unit, e.g. "throughput (MB/s)"
  PlotStyle style = PlotStyle::kLines;
  bool log_x = false;  // base 2
  bool log_y = false;  // base 10
  // Labelled tics at these x values (bars: the categories 0..n-1); empty:
  // gnuplot's automatic tics.
  std::vector<std::pair<double, std::string>> x_tics;
  std::vector<PlotSeries> series;  // empty series are left out
};

// Checks `chart` against the rules above.
Status ValidateChart(const Chart& chart);

class Plotter {
 public:
  // Finds gnuplot on $PATH, picks its terminal and creates `dir` (and its
  // parents) if missing.
  static Result<Plotter> Create(std::string dir);

  // Validates `chart`, writes DIR/NAME.dat and DIR/NAME.gp, runs gnuplot in
  // DIR (at most 60 s) and checks that DIR/NAME.png begins with the PNG
  // signature. Returns the PNG's path.
  Result<std::string> Render(const Chart& chart) const;

  const std::string& terminal() const { return terminal_; }

 private:
  Plotter(std::string dir, std::string abs_dir, std::string gnuplot,
          std::string terminal)
      : dir_(std::move(dir)),
        abs_dir_(std::move(abs_dir)),
        gnuplot_(std::move(gnuplot)),
        terminal_(std::move(terminal)) {}

  std::string dir_;       // as given: the paths Render returns
  std::string abs_dir_;   // gnuplot's working folder
  std::string gnuplot_;   // full path
  std::string terminal_;  // "pngcairo" or "png"
};

// "median of 5 runs, bars min-max", or "median of 1 run": what a chart of
// medians over `runs` runs, with min-max error bars, says in its title.
std::string MedianOfRuns(std::size_t runs);

}  // namespace ztier::tool

#endif  // ZTIER_TOOLS_ZTIER_PLOT_H_
