// File: tools/ztier/plot.cc
//
// Charts through gnuplot (plot.h): the data and script are plain text built
// here; gnuplot runs as a child process in the output folder, so the script
// names its files relatively and can be run again by hand.
#include "plot.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>

#include "bench_proc.h"
#include "bench_stats.h"

namespace ztier::tool {
namespace {

namespace fs = std::filesystem;

constexpr int kWidth = 960;
constexpr int kHeight = 600;
constexpr std::chrono::milliseconds kGnuplotTimeout{60'000};
constexpr std::string_view kPngSignature("\x89PNG\r\n\x1a\n", 8);

// Colours that stay apart on white and in print (matplotlib's "tab10").
constexpr const char* kColors[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728",
                                   "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"};
constexpr int kNumColors = sizeof(kColors) / sizeof(kColors[0]);

// `s` as a gnuplot single-quoted string: no escapes inside, a quote is
// doubled; line breaks become spaces.
std::string Quote(std::string_view s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') {
      out += "''";
    } else if (c == '\n' || c == '\r') {
      out += ' ';
    } else {
      out += c;
    }
  }
  return out + "'";
}

// " title 'T'", or " notitle" for a series left out of the legend.
std::string TitleClause(const std::string& title) {
  return title.empty() ? " notitle" : " title " + Quote(title);
}

std::string Num(double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.9g", v);
  return buf;
}

// Whether any point's error bar has a length (one run gives none).
bool HasErrorBars(const PlotSeries& s) {
  return std::any_of(s.points.begin(), s.points.end(), [](const PlotPoint& p) {
    return p.y_min.value_or(p.y) != p.y_max.value_or(p.y);
  });
}

// The series that are drawn (those with points), in order.
std::vector<const PlotSeries*> Drawn(const Chart& chart) {
  std::vector<const PlotSeries*> out;
  for (const PlotSeries& s : chart.series) {
    if (!s.points.empty()) out.push_back(&s);
  }
  return out;
}

bool ValidName(std::string_view name) {
  return !name.empty() && name[0] != '.' &&
         name.find_first_not_of(
             "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRS"
             "TUVWXYZ0123456789._-") == name.npos;
}

// The last few lines of a child's output, for an error message.
std::string Tail(const std::string& text) {
  constexpr std::size_t kMax = 600;
  std::string t = text.size() > kMax ? text.substr(text.size() - kMax) : text;
  while (!t.empty() && (t.back() == '\n' || t.back() == ' ')) t.pop_back();
  return t;
}

std::string GnuplotData(const Chart& chart) {
  std::string out = "# " + chart.name + ": " + chart.title +
                    "\n# one block per series; columns: x y y_min y_max\n";
  const char* separator = "";  // two blank lines: gnuplot's next `index`
  for (const PlotSeries* s : Drawn(chart)) {
    out += separator + ("# series: " + s->title) + "\n";
    separator = "\n\n";
    for (const PlotPoint& p : s->points) {
      out += Num(p.x) + " " + Num(p.y) + " " + Num(p.y_min.value_or(p.y)) +
             " " + Num(p.y_max.value_or(p.y)) + "\n";
    }
  }
  return out;
}

std::string GnuplotScript(const Chart& chart, std::string_view terminal) {
  std::string g = "# " + chart.name + ": " + chart.title +
                  "\n# Drawn by `ztier bench ... --plot DIR`; to draw it "
                  "again, in this folder: gnuplot " +
                  chart.name + ".gp\n";
  g += "set terminal " + std::string(terminal) + " size " +
       std::to_string(kWidth) + "," + std::to_string(kHeight) +
       (terminal == "pngcairo" ? " noenhanced font 'sans,11'" : " noenhanced") +
       "\nset output " + Quote(chart.name + ".png") + "\n";
  for (int i = 0; i < kNumColors; ++i) {
    g += "set linetype " + std::to_string(i + 1) + " lc rgb '" + kColors[i] +
         "' lw 2 pt 7 ps 1.2\n";
  }
  g += "set title " + Quote(chart.title) + "\nset xlabel " +
       Quote(chart.x_label) + "\nset ylabel " + Quote(chart.y_label) +
       "\nset key outside bottom center horizontal Left reverse\n"
       "set grid ytics lc rgb '#d0d0d0'\nset border 3\nset tics nomirror\n";
  if (chart.log_x) g += "set logscale x 2\n";
  if (chart.log_y) {
    g += "set logscale y 10\nset format y '%.12g'\n";  // 1000000, not 1e+06
  } else {
    g += "set yrange [0:*]\n";  // throughput bars and lines start at zero
  }
  if (!chart.x_tics.empty()) {
    g += "set xtics (";
    for (std::size_t i = 0; i < chart.x_tics.size(); ++i) {
      g += (i ? ", " : "") + Quote(chart.x_tics[i].second) + " " +
           Num(chart.x_tics[i].first);
    }
    g += ")\n";
  }
  const std::vector<const PlotSeries*> drawn = Drawn(chart);
  const std::size_t n = drawn.size();
  const bool bars = chart.style == PlotStyle::kBars;
  const double width = 0.8 / static_cast<double>(n);  // of a bar
  if (bars) {
    double lo = drawn[0]->points[0].x;
    double hi = lo;
    for (const PlotSeries* s : drawn) {
      for (const PlotPoint& p : s->points) {
        lo = std::min(lo, p.x);
        hi = std::max(hi, p.x);
      }
    }
    g += "set xrange [" + Num(lo - 0.6) + ":" + Num(hi + 0.6) + "]\n";
    g += "set style fill solid 0.85 border -1\n";
    g += "set offsets 0, 0, graph 0.08, 0\n";  // room for the labels on top
  } else {
    g += "set offsets graph 0.04, graph 0.04, 0, 0\n";
  }
  std::vector<std::string> parts;
  for (std::size_t i = 0; i < n; ++i) {
    const PlotSeries& s = *drawn[i];
    const int lt = s.color > 0 ? s.color : static_cast<int>(i % kNumColors) + 1;
    const std::string data =
        Quote(chart.name + ".dat") + " index " + std::to_string(i) + " using ";
    const std::string t = " lt " + std::to_string(lt) + TitleClause(s.title);
    if (bars) {
      const double off = (static_cast<double>(i) - (n - 1) / 2.0) * width;
      const std::string x = data + "($1+(" + Num(off) + "))";
      parts.push_back(x + ":2:(" + Num(width) + ") with boxes" + t);
      if (HasErrorBars(s)) {
        // I-beams from y_min to y_max (vectors: `yerrorbars` would blank a
        // dot around the median).
        parts.push_back(x +
                        ":3:(0):($4-$3) with vectors heads size screen "
                        "0.006,90 lc rgb 'black' lw 1.5 notitle");
      }
      // The median written above the bar (and above its error bar).
      parts.push_back(x +
                      ":4:(sprintf('%.4g', $2)) with labels nopoint offset "
                      "0,0.8 font ',9' notitle");
    } else if (s.dashed) {
      parts.push_back(data + "1:2 with lines dt 2" + t);
    } else if (HasErrorBars(s)) {
      parts.push_back(data + "1:2:3:4 with yerrorlines" + t);
    } else {
      parts.push_back(data + "1:2 with linespoints" + t);
    }
  }
  g += "plot ";
  for (std::size_t i = 0; i < parts.size(); ++i) {
    g += (i ? ", \\\n     " : "") + parts[i];
  }
  return g + "\n";
}

}  // namespace

Status ValidateChart(const Chart& chart) {
  const std::string which = "chart '" + chart.name + "'";
  if (!ValidName(chart.name)) {
    return Status::InvalidArgument(
        which +
        ": the name must be non-empty and only [A-Za-z0-9._-], not "
        "starting with '.'");
  }
  if (Drawn(chart).empty()) {
    return Status::InvalidArgument(which + " (" + chart.title +
                                   ") has no data");
  }
  for (const PlotSeries& s : chart.series) {
    for (const PlotPoint& p : s.points) {
      const std::string at =
          which + ", series '" + s.title + "' at x=" + Num(p.x) + ": ";
      const double lo = p.y_min.value_or(p.y);
      const double hi = p.y_max.value_or(p.y);
      if (!std::isfinite(p.x) || !std::isfinite(p.y) || !std::isfinite(lo) ||
          !std::isfinite(hi)) {
        return Status::InvalidArgument(at + "a value is not finite");
      }
      if (lo > p.y || hi < p.y) {
        return Status::InvalidArgument(at + "y lies outside [y_min, y_max]");
      }
      if (chart.log_x && p.x <= 0) {
        return Status::InvalidArgument(at + "x <= 0 on a log x axis");
      }
      if (chart.log_y && lo <= 0) {
        return Status::InvalidArgument(at + "y <= 0 on a log y axis");
      }
    }
  }
  return Status::Ok();
}

std::string MedianOfRuns(std::size_t runs) {
  return "median of " + std::to_string(runs) +
         (runs == 1 ? " run" : " runs, bars min-max");
}

Result<Plotter> Plotter::Create(std::string dir) {
  const std::string gnuplot = bench::FindExecutable("gnuplot");
  if (gnuplot.empty()) {
    return Err(Status::NotFound(
        "gnuplot not found on PATH (install it: apt-get install "
        "gnuplot-nox)"));
  }
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec || !fs::is_directory(dir)) {
    return Err(Status::IoError("cannot create folder " + dir + ": " +
                               (ec ? ec.message() : "not a folder")));
  }
  // gnuplot runs in the folder, and the child's output files are opened
  // there too: absolute paths.
  const std::string abs = fs::absolute(dir, ec).lexically_normal().string();
  if (ec) {
    return Err(Status::IoError("cannot resolve " + dir + ": " + ec.message()));
  }
  // `set terminal` lists the terminals on stderr.
  const std::string list =
      (fs::path(abs) / (".gnuplot-terminals." + std::to_string(::getpid())))
          .string();
  auto r = bench::RunToCompletion(
      {gnuplot, "-e", "set terminal"},
      {.cwd = abs, .stdout_path = list, .stderr_path = list}, kGnuplotTimeout);
  const std::string text = bench::ReadFileText(list);
  ::unlink(list.c_str());
  if (!r.has_value()) return Err(r.error());
  const char* terminal = text.find("pngcairo") != std::string::npos ? "pngcairo"
                         : text.find(" png ") != std::string::npos  ? "png"
                                                                    : nullptr;
  if (terminal == nullptr) {
    return Err(Status::Unsupported(
        gnuplot +
        " has neither the pngcairo nor the png terminal (install "
        "gnuplot-nox)"));
  }
  return Plotter(std::move(dir), abs, gnuplot, terminal);
}

Result<std::string> Plotter::Render(const Chart& chart) const {
  ZT_RETURN_IF_ERROR(ValidateChart(chart));
  const fs::path base = fs::path(dir_) / chart.name;
  const fs::path png = base.string() + ".png";
  const fs::path log = (fs::path(abs_dir_) / chart.name).string() + ".log";
  ZT_RETURN_IF_ERROR(WriteTextFile(base.string() + ".dat", GnuplotData(chart)));
  ZT_RETURN_IF_ERROR(
      WriteTextFile(base.string() + ".gp", GnuplotScript(chart, terminal_)));
  std::error_code ec;
  fs::remove(png, ec);  // a stale picture must not pass the check below
  auto r = bench::RunToCompletion({gnuplot_, chart.name + ".gp"},
                                  {.cwd = abs_dir_,
                                   .stdout_path = log.string(),
                                   .stderr_path = log.string()},
                                  kGnuplotTimeout);
  const std::string output = bench::ReadFileText(log.string());
  fs::remove(log, ec);
  if (!r.has_value()) return Err(r.error());
  if (!r->ok()) {
    return Err(Status::IoError("gnuplot " + base.string() +
                               ".gp: " + r->Describe() + ": " + Tail(output)));
  }
  if (!bench::ReadFileText(png, kPngSignature.size())
           .starts_with(kPngSignature)) {
    return Err(Status::IoError("gnuplot " + base.string() +
                               ".gp wrote no PNG " + png.string() +
                               (output.empty() ? "" : ": " + Tail(output))));
  }
  return png.string();
}

}  // namespace ztier::tool
