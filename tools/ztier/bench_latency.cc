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
#include <string>
#include <vector>

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

double Percentile(std::vector<std::uint32_t>& v, double q) {
  if (v.empty()) return 0;
  const std::size_t k = std::min(v.size() - 1, static_cast<std::size_t>(q * v.size()));
  std::nth_element(v.begin(), v.begin() + k, v.end());
  return v[k] / 1000.0;
}

void AddRun(const std::vector<std::uint32_t>& ns, SeriesSummary* s,
            std::vector<std::uint32_t>* pooled) {
  if (!ns.empty()) {
    std::vector<std::uint32_t> copy = ns;
    for (std::size_t l = 0; l < kNumLevels; ++l) {
      s->level_us[l].push_back(Percentile(copy, kLevels[l].q));
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
  j.Key("slowest_" + n + "_us_median");
  j.Double(slow.median, 1);
  j.Key("slowest_" + n + "_us_min");
  j.Double(slow.min, 1);
  j.Key("slowest_" + n + "_us_max");
  j.Double(slow.max, 1);
  j.Key("slowest_" + n + "_us_stddev");
  j.Double(slow.stddev, 1);
  j.Key("slowest_" + n + "_us_cv");
  j.Double(slow.cv_percent, 2);
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
  j.Key("p99_" + n + "_us");
  j.Double(s.p99_us, 1);
  j.Key("p999_" + n + "_us");
  j.Double(s.p999_us, 1);
  j.Key(n + "s_over_10ms");
  j.Uint(static_cast<std::uint64_t>(over.max));
  j.Key(n + "s_over_10ms_per_run");
  j.BeginArray();
  for (double x : s.over_10ms) j.Uint(static_cast<std::uint64_t>(x));
  j.EndArray();
  j.Key(n + "s_timed");
  j.Uint(s.count);
}

}  // namespace

int RunBenchLatency(std::span<const std::string_view> args) {
  std::int64_t cpus = 1;
  std::int64_t seconds = 12;
  std::int64_t runs = 5;
  std::string mode = "both";
  std::string codec = "zstd";
  std::string corpus_path = kDefaultCorpusFile;
  std::string json_path;
  std::string plot_dir;
  FlagSet flags(kCommand,
                "[--cpus N] [--seconds S] [--runs R] [--mode shared|separate|both] "
                "[--codec NAME] [--corpus FILE] [--json FILE] [--plot DIR]");
  flags.AddInt("cpus", &cpus, "N",
               "CPUs used, 0..N-1; each gets 2 workers (nice +10), a spinner "
               "(nice 0), a reader and a storer (nice -19), pinned to it "
               "(default 1)",
               1, 1024);
  flags.AddInt("seconds", &seconds, "S", "seconds per run and mode (default 12)",
               1, 3600);
  flags.AddInt("runs", &runs, "R", "runs; modes alternate within each (default 5)",
               1, 1000);
  flags.AddString("mode", &mode, "MODE",
                  "shared (the baseline: one mutex per CPU stream for stores "
                  "and loads), separate (ztier's paths), or both (default)");
  flags.AddString("codec", &codec, "NAME", "codec (default zstd, as the zswap load contention series)");
  flags.AddString("corpus", &corpus_path, "FILE",
                  "pages to store (default " + std::string(kDefaultCorpusFile) + ")");
  flags.AddString("json", &json_path, "FILE", "also write the results as JSON");
  flags.AddString("plot", &plot_dir, "DIR", kPlotFlagHelp);
  if (auto rc = flags.ParseCommandLine(args, kAbout)) return *rc;
  std::vector<std::string> modes;
  if (mode == "both") {
    modes = {"shared", "separate"};
  } else if (mode == "shared" || mode == "separate") {
    modes = {mode};
  } else {
    std::fprintf(stderr, "%s: --mode must be shared, separate or both\n",
                 kCommand);
    return 2;
  }
  if (!MakeCodec(codec).has_value()) {
    std::fprintf(stderr, "%s: unknown codec '%s'\n", kCommand, codec.c_str());
    return 2;
  }
  auto pages = corpus::LoadPageSet(corpus_path);
  if (!pages.has_value()) {
    std::fprintf(stderr, "%s: %s\nPass --corpus FILE (any file, read as pages).\n",
                 kCommand, pages.error().ToString().c_str());
    return 1;
  }

  const MachineInfo machine = GetMachineInfo();
  std::printf("%s\n", MachineLine(machine).c_str());
  std::printf(
      "config: cpus=%lld seconds=%lld runs=%lld mode=%s codec=%s corpus=%s; "
      "per CPU: 2 workers nice +10, 1 spinner nice 0, 1 reader and 1 storer "
      "nice -19, %zu-page buffers, a timed round every %u us\n",
      static_cast<long long>(cpus), static_cast<long long>(seconds),
      static_cast<long long>(runs), mode.c_str(), codec.c_str(),
      corpus_path.c_str(), LatencyConfig{}.buffer_pages,
      LatencyConfig{}.round_period_us);
  std::fflush(stdout);
  ChartWriter charts(kCommand, plot_dir);

  std::vector<ModeResult> results(modes.size());
  std::vector<std::vector<std::uint32_t>> pooled_reads(modes.size());
  std::vector<std::vector<std::uint32_t>> pooled_stores(modes.size());
  Progress progress;
  std::uint64_t mismatches = 0;
  for (std::int64_t r = 0; r < runs; ++r) {
    for (std::size_t m = 0; m < modes.size(); ++m) {
      progress.Update("[run " + std::to_string(r + 1) + "/" +
                      std::to_string(runs) + "] " + modes[m] + ", " +
                      std::to_string(seconds) + " s");
      LatencyConfig cfg;
      cfg.shared = modes[m] == "shared";
      cfg.cpus = static_cast<std::size_t>(cpus);
      cfg.seconds = static_cast<double>(seconds);
      cfg.codec = codec;
      auto run = RunLatencyOnce(cfg, *pages);
      if (!run.has_value()) {
        progress.Clear();
        std::fprintf(stderr, "%s: %s\n", kCommand,
                     run.error().ToString().c_str());
        return run.error().code() == StatusCode::kInvalidArgument ? 2 : 1;
      }
      ModeResult& mr = results[m];
      mr.mode = modes[m];
      AddRun(run->read_ns, &mr.reads, &pooled_reads[m]);
      AddRun(run->store_ns, &mr.stores, &pooled_stores[m]);
      mr.worker_ops_per_s.push_back(run->worker_ops / run->seconds);
      mr.worker_ops_per_cpu_s.push_back(
          run->worker_cpu_seconds > 0 ? run->worker_ops / run->worker_cpu_seconds
                                      : 0);
      mr.priorities_applied = mr.priorities_applied && run->priorities_applied;
      mismatches += run->mismatches;
    }
  }
  progress.Clear();
  for (std::size_t m = 0; m < modes.size(); ++m) {
    results[m].reads.p99_us = Percentile(pooled_reads[m], 0.99);
    results[m].reads.p999_us = Percentile(pooled_reads[m], 0.999);
    results[m].stores.p99_us = Percentile(pooled_stores[m], 0.99);
    results[m].stores.p999_us = Percentile(pooled_stores[m], 0.999);
  }

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
  if (results.size() == 2) {
    const ModeResult& sh = results[0];
    const ModeResult& se = results[1];
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
  if (mismatches != 0) {
    std::fprintf(stderr, "%s: %llu loads returned wrong data\n", kCommand,
                 static_cast<unsigned long long>(mismatches));
  }

  if (!json_path.empty()) {
    JsonWriter j;
    j.BeginObject();
    j.Key("machine");
    WriteMachineJson(machine, j);
    j.Key("config");
    j.BeginObject();
    j.Key("cpus");
    j.Int(cpus);
    j.Key("seconds");
    j.Int(seconds);
    j.Key("runs");
    j.Int(runs);
    j.Key("codec");
    j.String(codec);
    j.Key("corpus");
    j.String(corpus_path);
    j.Key("priorities_applied");
    j.Bool(priorities);
    j.EndObject();
    j.Key("modes");
    j.BeginArray();
    for (const ModeResult& mr : results) {
      j.BeginObject();
      j.Key("mode");
      j.String(mr.mode);
      WriteSeries(j, "read", mr.reads);
      WriteSeries(j, "store", mr.stores);
      const SampleStats tp = Summarize(mr.worker_ops_per_s);
      j.Key("worker_ops_per_s_median");
      j.Double(tp.median, 0);
      j.Key("worker_ops_per_s_min");
      j.Double(tp.min, 0);
      j.Key("worker_ops_per_s_max");
      j.Double(tp.max, 0);
      j.Key("worker_ops_per_s_stddev");
      j.Double(tp.stddev, 0);
      j.Key("worker_ops_per_s_cv");
      j.Double(tp.cv_percent, 2);
      j.Key("worker_ops_per_cpu_s_median");
      j.Double(Summarize(mr.worker_ops_per_cpu_s).median, 0);
      j.EndObject();
    }
    j.EndArray();
    j.Key("mismatches");
    j.Uint(mismatches);
    j.EndObject();
    if (Status s = WriteJsonFile(json_path, j); !s.ok()) {
      std::fprintf(stderr, "%s: %s\n", kCommand, s.message().c_str());
      return 1;
    }
  }
  const Chart latency_charts[] = {LatencyChart(cpus, runs, true, results),
                                  LatencyChart(cpus, runs, false, results)};
  const bool drawn = charts.Write(latency_charts);
  return mismatches == 0 && drawn ? 0 : 1;
}

}  // namespace ztier::tool
