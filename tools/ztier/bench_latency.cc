// bench_latency.cc: `ztier bench latency` (see bench_latency.h). Per mode
// and series (reads, stores): p50 .. p99.99 and the slowest of each run,
// and how many took over 10 ms; the workers' stores + loads per second;
// then separate against shared, run by run.
#include "bench_latency.h"

#include <algorithm>
#include <optional>

#include "bench_harness.h"
#include "bench_report.h"
#include "bench_stats.h"
#include "latency_run.h"
#include "tool_common.h"
#include "ztier/codec.h"

namespace ztier::tool {
namespace {

constexpr char kCommand[] = "ztier bench latency";
constexpr const char* kSeries[] = {"reads", "stores"};

struct Flags {
  std::int64_t cpus = 1, seconds = 12;
  std::string mode = "both", codec = "zstd", corpus = kDefaultCorpusFile;
  BenchFlags common{.runs = 5};
  std::vector<std::string> modes;  // in the order they run
};

std::optional<int> ParseFlags(std::span<const std::string_view> args,
                              Flags* f) {
  FlagSet flags(kCommand,
                "[--cpus N] [--seconds S] [--runs N] "
                "[--mode shared|separate|both] [--codec NAME] [--corpus FILE] "
                "[--json FILE] [--plot DIR]");
  flags.AddInt("cpus", &f->cpus, "N",
               "CPUs used, 0..N-1; each gets 2 workers (nice +10), a spinner "
               "(nice 0), a reader and a storer (nice -19), pinned to it "
               "(default 1)",
               1, 1024);
  flags.AddInt("seconds", &f->seconds, "S",
               "seconds per run and mode (default 12)", 1, 3600);
  AddBenchFlags(flags, &f->common);
  flags.AddString("mode", &f->mode, "MODE",
                  "shared (the baseline: one mutex per CPU stream for stores "
                  "and loads), separate (ztier's paths), or both (default)");
  flags.AddString("codec", &f->codec, "NAME",
                  "codec (default zstd, as the zswap load contention series)");
  AddCorpusFileFlag(flags, &f->corpus, "pages to store");
  if (auto rc = flags.ParseCommandLine(
          args,
          "how long a high-priority load or store waits behind "
          "preempted low-priority stores (the zswap load contention "
          "series), shared-stream baseline against separate paths.")) {
    return *rc;
  }
  if (f->mode == "both") f->modes = {"shared", "separate"};
  if (f->mode == "shared" || f->mode == "separate") f->modes = {f->mode};
  if (f->modes.empty()) {
    return ReportUsageError(kCommand,
                            "--mode must be shared, separate or both");
  }
  if (MakeCodec(f->codec).has_value()) return std::nullopt;
  return ReportUsageError(kCommand, "unknown codec '" + f->codec + "'");
}

// latency-cpusN-reads or -stores: each mode's quantiles of each run.
Chart LatencyChart(const Flags& f, const Measurements& m,
                   const std::string& what) {
  const std::string cpus = std::to_string(f.cpus);
  Chart c{.name = "latency-cpus" + cpus + "-" + what,
          .title = "High-priority " + what + ", " + cpus +
                   (f.cpus == 1 ? " CPU" : " CPUs") +
                   ": shared stream vs separate paths (" +
                   MedianOfRuns(f.common.runs) + ")",
          .x_label = "percentile of the " + what + " of one run",
          .y_label = "latency (microseconds, log scale)",
          .log_y = true};
  for (std::size_t l = 0; l < std::size(kLatencyLevels); ++l) {
    c.x_tics.push_back({static_cast<double>(l), kLatencyLevels[l].second});
  }
  for (const std::string& mode : f.modes) {
    PlotSeries& line = c.series.emplace_back(PlotSeries{.title = mode});
    for (std::size_t l = 0; l < std::size(kLatencyLevels); ++l) {
      std::vector<double> us =
          m.Of(mode, what + " " + kLatencyLevels[l].second);
      // A log axis has no 0; steady_clock never times a load that short.
      for (double& x : us) x = std::max(x, 0.001);
      if (!us.empty()) line.points.push_back(SpreadPoint(double(l), us));
    }
  }
  return c;
}

// The separate mode against the shared one, run by run, with the targets.
void AddComparison(const Measurements& m, Report& report) {
  Table& t = report.AddTable(
      "separate_vs_shared",
      "separate against shared, same run (targets of issue P4)");
  struct Target {
    const char *label, *figure, *target;
    double lo, hi;  // met: the median ratio within [lo, hi]
  };
  constexpr Target kTargets[] = {
      {"slowest read", "reads max", "<= 0.1", 0, 0.1},
      {"slowest store", "stores max", "<= 0.1", 0, 0.1},
      {"worker throughput", "ops_s", ">= 0.95", 0.95, 1e300},
      {"worker ops per CPU-second", "ops_cpu_s", "", 0, 0}};
  for (const Target& g : kTargets) {
    const auto r = m.Ratios("separate", g.figure, "shared", g.figure);
    const double med = Summarize(r).median;
    Row& row = t.AddRow().Text("figure", g.label).Figure("ratio", r, 3);
    if (*g.target == '\0') continue;
    row.Text("target", g.target)
        .Bool("met", !r.empty() && med >= g.lo && med <= g.hi);
  }
  for (const std::string what : kSeries) {
    const double most = Summarize(m.Of("separate", what + " over 10 ms")).max;
    t.AddRow()
        .Text("figure", what + " over 10 ms, any run")
        .Number("count", most, 0)
        .Text("target", "0")
        .Bool("met", most == 0);
  }
}

// The tables of every mode: each latency level of one run (the slowest
// with its spread), median over the runs; the workers' throughput.
void AddModes(const Flags& f, const Measurements& m, Report& report) {
  Table& lat = report.AddTable("latency", "high-priority latency (us)");
  for (const std::string& mode : f.modes) {
    for (const std::string what : kSeries) {
      Row& row = lat.AddRow().Text("mode", mode).Text("series", what);
      for (auto [q, label] : kLatencyLevels) {
        row.Figure(q < 1 ? label : "slowest", m.Of(mode, what + " " + label), 1,
                   q < 1 ? kMedian : kRange | kCv);
      }
      row.Figure("over 10 ms per run", m.Of(mode, what + " over 10 ms"), 0)
          .Figure("timed per run", m.Of(mode, what + " timed"), 0, kMedian);
    }
  }
  Table& workers = report.AddTable("workers", "workers: stores + loads");
  for (const std::string& mode : f.modes) {
    workers.AddRow()
        .Text("mode", mode)
        .Figure("per second", m.Of(mode, "ops_s"), 0)
        .Figure("per CPU-second", m.Of(mode, "ops_cpu_s"), 0);
  }
}

}  // namespace

int RunBenchLatency(std::span<const std::string_view> args) {
  Flags f;
  if (auto rc = ParseFlags(args, &f)) return *rc;
  auto pages = LoadCorpus(f.corpus);
  if (!pages) return ReportFailure(kCommand, pages.error().message());
  const LatencyConfig base{.cpus = static_cast<std::size_t>(f.cpus),
                           .seconds = static_cast<double>(f.seconds),
                           .codec = f.codec};
  const std::string config = "cpus=" + std::to_string(f.cpus) +
                             " seconds=" + std::to_string(f.seconds) +
                             " runs=" + std::to_string(f.common.runs) +
                             " mode=" + f.mode + " codec=" + f.codec +
                             " corpus=" + f.corpus;
  Report report(kCommand, GetMachineInfo());
  report.Condition("config", config);
  report.Line("config: " + config +
              "; per CPU: 2 workers nice +10, 1 spinner nice 0, 1 reader and "
              "1 storer nice -19, " +
              std::to_string(base.buffer_pages) +
              "-page buffers, a timed round every " +
              std::to_string(base.round_period_us) + " us\n");
  std::vector<Variant> variants;
  for (const std::string& mode : f.modes) {
    LatencyConfig cfg = base;
    cfg.shared = mode == "shared";
    variants.push_back({mode, [&pages, cfg](std::size_t, Samples& s) {
                          return RunLatencyOnce(cfg, *pages, s);
                        }});
  }
  Progress progress;
  auto m = RunVariants({.runs = static_cast<std::size_t>(f.common.runs),
                        .label = std::to_string(f.seconds) + " s per mode"},
                       variants, progress);
  progress.Clear();
  if (!m) {
    PrintError(kCommand, m.error().message());
    return m.error().code() == StatusCode::kInvalidArgument ? 2 : 1;
  }
  AddModes(f, *m, report);
  bool priorities = true;
  for (const std::string& mode : f.modes) {
    for (double p : m->Of(mode, "priorities")) priorities = priorities && p;
  }
  report.Condition("priorities_applied", priorities ? "yes" : "no");
  if (!priorities) {
    report.Line(
        "WARNING: nice values or CPU pinning could not be applied "
        "(run as root); these figures do not show the effect.\n");
  }
  if (f.modes.size() == 2) AddComparison(*m, report);
  for (const char* what : kSeries) report.AddChart(LatencyChart(f, *m, what));
  return report.Finish(kCommand, f.common);
}

}  // namespace ztier::tool
