// bench_latency.cc: `ztier bench latency` (see bench_latency.h).
//
// For each run, the modes alternate (shared, separate, shared, ...), so both
// see the same machine conditions. Per mode it reports: the slowest read of
// each run as median (min-max) over the runs, p99 and p99.9 over every read
// of every run, reads over 10 ms per run, the same for the high-priority
// stores, and the workers' throughput (stores + loads per second).
#include "bench_latency.h"

#include <algorithm>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "bench_harness.h"
#include "bench_stats.h"
#include "flags.h"
#include "latency_run.h"
#include "machine_info.h"
#include "plot.h"
#include "progress.h"
#include "tool_common.h"
#include "ztier/codec.h"

namespace ztier::tool {
namespace {

constexpr char kCommand[] = "ztier bench latency";
constexpr char kAbout[] =
    "how long a high-priority load or store waits behind preempted "
    "low-priority stores (the zswap load contention series), "
    "shared-stream baseline against separate paths.";
constexpr std::uint32_t kSlowNs = 10'000'000;  // 10 ms

// The points of the latency distribution charts: quantiles of each run.
struct Level {
  double q;  // 1: the slowest
  const char* label;
};
constexpr Level kLevels[] = {{0.5, "p50"},     {0.9, "p90"},
                             {0.99, "p99"},    {0.999, "p99.9"},
                             {0.9999, "p99.99"}, {1.0, "max"}};
constexpr std::size_t kNumLevels = sizeof(kLevels) / sizeof(kLevels[0]);

// One latency series (reads or stores) of one mode over all runs.
struct SeriesSummary {
  std::vector<double> slowest_us;     // per run
  std::vector<double> over_10ms;      // per run
  std::vector<double> level_us[kNumLevels];  // per level, one per run
  double p99_us = 0;
  double p999_us = 0;
  std::size_t count = 0;
};

struct ModeResult {
  std::string mode;
  SeriesSummary reads;
  SeriesSummary stores;
  std::vector<double> worker_ops_per_s;  // per run
  std::vector<double> worker_ops_per_cpu_s;  // per run
  bool priorities_applied = true;
};

// The q-quantile of `ns` in microseconds (bench_stats.h's rule), 0 for
// none; reorders `ns`.
double PercentileUs(std::vector<std::uint32_t>& ns, double q) {
  return ns.empty() ? 0 : Percentile(ns, q) / 1000.0;
}

void AddRun(const std::vector<std::uint32_t>& ns, SeriesSummary* s,
            std::vector<std::uint32_t>* pooled) {
  if (!ns.empty()) {
    std::vector<std::uint32_t> copy = ns;
    for (std::size_t l = 0; l < kNumLevels; ++l) {
      s->level_us[l].push_back(PercentileUs(copy, kLevels[l].q));
    }
  }
  std::uint32_t slowest = 0;
  std::size_t over = 0;
  for (std::uint32_t x : ns) {
    slowest = std::max(slowest, x);
    over += x > kSlowNs;
  }
  s->slowest_us.push_back(slowest / 1000.0);
  s->over_10ms.push_back(static_cast<double>(over));
  s->count += ns.size();
  pooled->insert(pooled->end(), ns.begin(), ns.end());
}

void PrintSeries(const char* what, const SeriesSummary& s) {
  const SampleStats over = Summarize(s.over_10ms);
  std::printf("  %-6s slowest %s us (cv %.0f%%)   p99 %.1f us   p99.9 %.1f us   over 10 ms per run: max %.0f, median %.0f   (%zu timed)\n",
              what, FormatSpread(s.slowest_us, 1).c_str(),
              Summarize(s.slowest_us).cv_percent, s.p99_us, s.p999_us,
              over.max, over.median, s.count);
}

// latency-cpusN-reads or -stores: each mode's quantiles of every run (median
// over the runs, bars min-max), on a log scale.
Chart LatencyChart(std::int64_t cpus, std::int64_t runs, bool reads,
                   const std::vector<ModeResult>& results) {
  const std::string what = reads ? "reads" : "stores";
  Chart c{.name = "latency-cpus" + std::to_string(cpus) + "-" + what,
          .title = "High-priority " + what + ", " + std::to_string(cpus) +
                   (cpus == 1 ? " CPU" : " CPUs") +
                   ": shared stream vs separate paths (" +
                   MedianOfRuns(runs) + ")",
          .x_label = "percentile of the " + what + " of one run",
          .y_label = "latency (microseconds, log scale)",
          .log_y = true};
  for (std::size_t l = 0; l < kNumLevels; ++l) {
    c.x_tics.push_back({static_cast<double>(l), kLevels[l].label});
  }
  for (const ModeResult& mr : results) {
    const SeriesSummary& s = reads ? mr.reads : mr.stores;
    PlotSeries line{.title = mr.mode};
    for (std::size_t l = 0; l < kNumLevels; ++l) {
      if (s.level_us[l].empty()) continue;
      const SampleStats st = Summarize(s.level_us[l]);
      // A log axis has no 0; steady_clock never times a load that short.
      auto floor = [](double us) { return std::max(us, 0.001); };
      line.points.push_back({static_cast<double>(l), floor(st.median),
                             floor(st.min), floor(st.max)});
    }
    c.series.push_back(std::move(line));
  }
  return c;
}

void WriteSeries(JsonWriter& j, const char* noun, const SeriesSummary& s) {
  const SampleStats slow = Summarize(s.slowest_us);
  const SampleStats over = Summarize(s.over_10ms);
  const std::string n(noun);
  WriteStatsJson(j, "slowest_" + n + "_us", slow, 1);
  j.Key(n + "_percentiles_us_per_run");
  j.BeginObject();
  for (std::size_t l = 0; l < kNumLevels; ++l) {
    j.Key(kLevels[l].label);
    j.BeginArray();
    for (double x : s.level_us[l]) j.Double(x, 2);
    j.EndArray();
  }
  j.EndObject();
  j.Key("slowest_" + n + "_us_per_run");
  j.BeginArray();
  for (double x : s.slowest_us) j.Double(x, 1);
  j.EndArray();
  j.DoubleField("p99_" + n + "_us", s.p99_us, 1);
  j.DoubleField("p999_" + n + "_us", s.p999_us, 1);
  j.UintField(n + "s_over_10ms", static_cast<std::uint64_t>(over.max));
  j.Key(n + "s_over_10ms_per_run");
  j.BeginArray();
  for (double x : s.over_10ms) j.Uint(static_cast<std::uint64_t>(x));
  j.EndArray();
  j.UintField(n + "s_timed", s.count);
}

struct Flags {
  std::int64_t cpus = 1;
  std::int64_t seconds = 12;
  std::int64_t runs = 5;
  std::string mode = "both";
  std::string codec = "zstd";
  std::string corpus = kDefaultCorpusFile;
  std::string json;
  std::string plot;
  std::vector<std::string> modes;  // from `mode`, in the order they run
};

// The command line into *f; the exit status when it is bad (2) or asked for
// --help (0).
std::optional<int> ParseFlags(std::span<const std::string_view> args,
                              Flags* f) {
  FlagSet flags(kCommand,
                "[--cpus N] [--seconds S] [--runs R] [--mode shared|separate|both] "
                "[--codec NAME] [--corpus FILE] [--json FILE] [--plot DIR]");
  flags.AddInt("cpus", &f->cpus, "N",
               "CPUs used, 0..N-1; each gets 2 workers (nice +10), a spinner "
               "(nice 0), a reader and a storer (nice -19), pinned to it "
               "(default 1)",
               1, 1024);
  flags.AddInt("seconds", &f->seconds, "S",
               "seconds per run and mode (default 12)", 1, 3600);
  flags.AddInt("runs", &f->runs, "R",
               "runs; modes alternate within each (default 5)", 1, 1000);
  flags.AddString("mode", &f->mode, "MODE",
                  "shared (the baseline: one mutex per CPU stream for stores "
                  "and loads), separate (ztier's paths), or both (default)");
  flags.AddString("codec", &f->codec, "NAME",
                  "codec (default zstd, as the zswap load contention series)");
  AddCorpusFileFlag(flags, &f->corpus, "pages to store");
  AddJsonFlag(flags, &f->json);
  AddPlotFlag(flags, &f->plot);
  if (auto rc = flags.ParseCommandLine(args, kAbout)) return *rc;
  if (f->mode == "both") {
    f->modes = {"shared", "separate"};
  } else if (f->mode == "shared" || f->mode == "separate") {
    f->modes = {f->mode};
  } else {
    return ReportUsageError(kCommand,
                            "--mode must be shared, separate or both");
  }
  if (!MakeCodec(f->codec).has_value()) {
    return ReportUsageError(kCommand, "unknown codec '" + f->codec + "'");
  }
  return std::nullopt;
}

// Every run, the modes alternating within each, into *results (one per
// mode); the loads that returned wrong data go to *mismatches.
Status RunModes(const Flags& f, const corpus::PageSet& pages,
                std::vector<ModeResult>* results, std::uint64_t* mismatches) {
  const std::size_t n = f.modes.size();
  results->assign(n, ModeResult{});
  std::vector<std::vector<std::uint32_t>> pooled_reads(n), pooled_stores(n);
  Progress progress;
  for (std::int64_t r = 0; r < f.runs; ++r) {
    for (std::size_t m = 0; m < n; ++m) {
      progress.Update("[" + RunLabel(r + 1, f.runs) + "] " + f.modes[m] + ", " +
                      std::to_string(f.seconds) + " s");
      LatencyConfig cfg;
      cfg.shared = f.modes[m] == "shared";
      cfg.cpus = static_cast<std::size_t>(f.cpus);
      cfg.seconds = static_cast<double>(f.seconds);
      cfg.codec = f.codec;
      ZT_ASSIGN_OR_RETURN(const LatencyRunResult run,
                          RunLatencyOnce(cfg, pages));
      ModeResult& mr = (*results)[m];
      mr.mode = f.modes[m];
      AddRun(run.read_ns, &mr.reads, &pooled_reads[m]);
      AddRun(run.store_ns, &mr.stores, &pooled_stores[m]);
      mr.worker_ops_per_s.push_back(run.worker_ops / run.seconds);
      mr.worker_ops_per_cpu_s.push_back(
          run.worker_cpu_seconds > 0 ? run.worker_ops / run.worker_cpu_seconds
                                     : 0);
      mr.priorities_applied = mr.priorities_applied && run.priorities_applied;
      *mismatches += run.mismatches;
    }
  }
  for (std::size_t m = 0; m < n; ++m) {
    (*results)[m].reads.p99_us = PercentileUs(pooled_reads[m], 0.99);
    (*results)[m].reads.p999_us = PercentileUs(pooled_reads[m], 0.999);
    (*results)[m].stores.p99_us = PercentileUs(pooled_stores[m], 0.99);
    (*results)[m].stores.p999_us = PercentileUs(pooled_stores[m], 0.999);
  }
  return Status::Ok();
}

// The separate mode against the shared one, same runs, with the targets.
void PrintComparison(const ModeResult& sh, const ModeResult& se) {
  auto ratio = [](const std::vector<double>& a, const std::vector<double>& b) {
    const double d = Summarize(b).median;
    return d > 0 ? Summarize(a).median / d : 0.0;
  };
  const double rr = ratio(se.reads.slowest_us, sh.reads.slowest_us);
  const double sr = ratio(se.stores.slowest_us, sh.stores.slowest_us);
  const double tp = ratio(se.worker_ops_per_s, sh.worker_ops_per_s);
  const double tpc = ratio(se.worker_ops_per_cpu_s, sh.worker_ops_per_cpu_s);
  const double r_over = Summarize(se.reads.over_10ms).max;
  const double s_over = Summarize(se.stores.over_10ms).max;
  std::printf("\nseparate against shared, same run (targets of issue P4):\n");
  std::printf("  slowest read, median       %.3f x  (<= 0.1: %s)\n", rr,
              rr <= 0.1 ? "yes" : "NO");
  std::printf("  reads over 10 ms, any run  %.0f      (0: %s)\n", r_over,
              r_over == 0 ? "yes" : "NO");
  std::printf("  slowest store, median      %.3f x  (<= 0.1: %s)\n", sr,
              sr <= 0.1 ? "yes" : "NO");
  std::printf("  stores over 10 ms, any run %.0f      (0: %s)\n", s_over,
              s_over == 0 ? "yes" : "NO");
  std::printf("  worker throughput          %.3f x  (>= 0.95: %s)\n", tp,
              tp >= 0.95 ? "yes" : "NO");
  std::printf("  worker ops per CPU-second  %.3f x\n", tpc);
}

// Every mode's figures, then the comparison of the two; false when nice
// values or pinning could not be applied in some run.
bool PrintResults(const std::vector<ModeResult>& results) {
  bool priorities = true;
  for (const ModeResult& mr : results) {
    std::printf("\n%s:\n", mr.mode.c_str());
    PrintSeries("reads", mr.reads);
    PrintSeries("stores", mr.stores);
    std::printf("  workers %s stores+loads/s, %s per CPU-second\n",
                FormatSpread(mr.worker_ops_per_s, 0).c_str(),
                FormatSpread(mr.worker_ops_per_cpu_s, 0).c_str());
    priorities = priorities && mr.priorities_applied;
  }
  if (!priorities) {
    std::printf("\nWARNING: nice values or CPU pinning could not be applied "
                "(run as root); these figures do not show the effect.\n");
  }
  if (results.size() == 2) PrintComparison(results[0], results[1]);
  return priorities;
}

Status WriteLatencyJson(const std::string& path, const MachineInfo& machine,
                        const Flags& f, bool priorities,
                        const std::vector<ModeResult>& results,
                        std::uint64_t mismatches) {
  JsonWriter j;
  BeginResultJson(j, "ztier bench latency", machine);
  j.Key("config");
  j.BeginObject();
  j.IntField("cpus", f.cpus);
  j.IntField("seconds", f.seconds);
  j.IntField("runs", f.runs);
  j.StringField("codec", f.codec);
  j.StringField("corpus", f.corpus);
  j.BoolField("priorities_applied", priorities);
  j.EndObject();
  j.Key("modes");
  j.BeginArray();
  for (const ModeResult& mr : results) {
    j.BeginObject();
    j.StringField("mode", mr.mode);
    WriteSeries(j, "read", mr.reads);
    WriteSeries(j, "store", mr.stores);
    WriteFigureJson(j, "worker_ops_per_s", mr.worker_ops_per_s, 0);
    j.DoubleField("worker_ops_per_cpu_s_median",
                  Summarize(mr.worker_ops_per_cpu_s).median, 0);
    j.EndObject();
  }
  j.EndArray();
  j.UintField("mismatches", mismatches);
  j.EndObject();
  return WriteJsonFile(path, j);
}

}  // namespace

int RunBenchLatency(std::span<const std::string_view> args) {
  Flags f;
  if (auto rc = ParseFlags(args, &f)) return *rc;
  auto pages = LoadCorpus(f.corpus);
  if (!pages.has_value())
    return ReportFailure(kCommand, pages.error().message());

  const MachineInfo machine = GetMachineInfo();
  std::printf("%s\n", MachineLine(machine).c_str());
  std::printf(
      "config: cpus=%lld seconds=%lld runs=%lld mode=%s codec=%s corpus=%s; "
      "per CPU: 2 workers nice +10, 1 spinner nice 0, 1 reader and 1 storer "
      "nice -19, %zu-page buffers, a timed round every %u us\n",
      static_cast<long long>(f.cpus), static_cast<long long>(f.seconds),
      static_cast<long long>(f.runs), f.mode.c_str(), f.codec.c_str(),
      f.corpus.c_str(), LatencyConfig{}.buffer_pages,
      LatencyConfig{}.round_period_us);
  std::fflush(stdout);
  ChartWriter charts(kCommand, f.plot);

  std::vector<ModeResult> results;
  std::uint64_t mismatches = 0;
  if (Status s = RunModes(f, *pages, &results, &mismatches); !s.ok()) {
    PrintError(kCommand, s.ToString());
    return s.code() == StatusCode::kInvalidArgument ? 2 : 1;
  }
  const bool priorities = PrintResults(results);
  if (mismatches != 0) {
    PrintError(kCommand,
               std::to_string(mismatches) + " loads returned wrong data");
  }
  const int rc = FinishJson(kCommand, f.json, [&](const std::string& path) {
    return WriteLatencyJson(path, machine, f, priorities, results, mismatches);
  });
  const Chart latency_charts[] = {LatencyChart(f.cpus, f.runs, true, results),
                                  LatencyChart(f.cpus, f.runs, false, results)};
  const bool drawn = charts.Write(latency_charts);
  return mismatches == 0 && drawn && rc == 0 ? 0 : 1;
}

}  // namespace ztier::tool
