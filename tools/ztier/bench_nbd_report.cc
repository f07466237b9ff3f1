// File: tools/ztier/bench_nbd_report.cc
//
// The Report of `ztier bench nbd` (bench_nbd_report.h).
#include "bench_nbd_report.h"

#include "bench_stats.h"

namespace ztier::tool::bench {
namespace {

// The IOPS of a ztier variant over a peer's in job StandardJobs()[job], and
// its target.
struct RatioDef {
  std::size_t job;
  const char* peer;
  double target;
};

constexpr RatioDef kRatios[] = {
    {3, "nbdkit", 1.0},       // randread 4k QD32
    {1, "nbdkit", 0.75},      // randwrite 4k QD32
    {3, "nbdkit-zstd", 5.0},  // randread 4k QD32
    {1, "nbdkit-zstd", 5.0},  // randwrite 4k QD32
};

std::string SizeText(std::uint64_t bytes) {
  if (bytes % (1ull << 30) == 0) return std::to_string(bytes >> 30) + " GiB";
  if (bytes % (1ull << 20) == 0) return std::to_string(bytes >> 20) + " MiB";
  return std::to_string(bytes) + " bytes";
}

std::string Joined(const std::vector<std::string>& words,
                   std::string_view sep) {
  std::string out;
  for (const std::string& w : words) {
    if (!out.empty()) out += sep;
    out += w;
  }
  return out;
}

std::string ConfigText(const NbdBenchConfig& cfg) {
  std::vector<std::string> servers;
  for (const ServerSpec& s : cfg.servers) servers.push_back(s.label);
  const auto tool = [](const char* name, const ToolInfo& t) {
    return std::string(name) + " " +
           (t.path.empty() ? "not found" : t.version + " (" + t.path + ")");
  };
  std::string text =
      "config: runs=" + std::to_string(cfg.common.runs) +
      ", fio seconds per job=" + std::to_string(cfg.seconds) +
      ", size=" + SizeText(cfg.size_bytes) + " (jobs and fill on the first " +
      SizeText(cfg.area_bytes) + "), codecs=" + Joined(cfg.codecs, ",") +
      "\nservers (one at a time, the order reversed every other run; each "
      "started fresh for its fio jobs and for each copy): " +
      Joined(servers, ", ") + "\ntools: " + tool("ztier", cfg.ztier) + "; " +
      tool("fio", cfg.fio) + "; " + tool("nbdkit", cfg.nbdkit) + "; " +
      tool("nbdcopy", cfg.nbdcopy);
  if (!cfg.fio.path.empty()) {
    text += "\nfio: " + Joined(FioCommonFlags(), " ") +
            " --uri=URI --size=" + std::to_string(cfg.area_bytes) +
            " --time_based --runtime=" + std::to_string(cfg.seconds) +
            "\n  fill (untimed, first on every server): write 128k QD8, one "
            "pass over the area";
  }
  for (const NbdBenchConfig::Corpus& c : cfg.corpora) {
    text += "\ncorpus: " + c.name + " (" + std::to_string(c.bytes) +
            " bytes) from " + c.path;
  }
  for (const std::string& n : cfg.notes) text += "\nnote: " + n;
  return text + "\n";
}

void FioTable(const NbdBenchConfig& cfg, const Measurements& m, Report& r) {
  Table& t = r.AddTable(
      "fio", "fio over NBD (" + std::to_string(cfg.seconds) + " s per job, " +
                 std::to_string(cfg.common.runs) +
                 " runs; MB/s = 10^6 bytes/s; cv% = stddev/mean of IOPS; fio "
                 "CPU% = the fio client's user + system CPU, median, 100 = "
                 "one CPU)");
  for (const NbdJob& job : StandardJobs()) {
    for (const ServerSpec& s : cfg.servers) {
      const auto of = [&](std::string_view f) {
        return m.Of(s.label, SampleName(job.name, f));
      };
      t.AddRow()
          .Text("job", JobTitle(job))
          .Text("server", s.label)
          .Figure("IOPS", of("iops"), 0, kRange | kCv)
          .Figure("MB/s", of("mb_s"), 1)
          .Figure("fio CPU%", of("cpu"), 0, kMedian);
    }
  }
}

void CopyTable(const NbdBenchConfig& cfg, const Measurements& m, Report& r) {
  Table& t = r.AddTable("copies", "nbdcopy of each corpus (medians over " +
                                      std::to_string(cfg.common.runs) +
                                      " runs; stored = memory holding the "
                                      "copied corpus)");
  for (const NbdBenchConfig::Corpus& c : cfg.corpora) {
    for (const ServerSpec& s : cfg.servers) {
      const auto of = [&](std::string_view f) {
        return m.Of(s.label, SampleName(c.name, f));
      };
      t.AddRow()
          .Text("corpus", c.name)
          .Text("server", s.label)
          .Figure("in MB/s", of("in_mb_s"), 1, kMedian)
          .Figure("out MB/s", of("out_mb_s"), 1, kMedian)
          .Figure("stored MiB", of("stored_mib"), 2, kMedian)
          .Text("measured as",
                s.kind == ServerKind::kZtier ? "mem_used_total" : "RSS growth")
          .Figure("orig/stored", of("orig_over_stored"), 3, kMedian)
          .Figure("RSS growth MiB", of("rss_mib"), 2, kMedian);
    }
  }
}

void RatioTable(const NbdBenchConfig& cfg, const Measurements& m, Report& r) {
  if (cfg.nbdkit.path.empty()) return;
  Table& t = r.AddTable("ratios",
                        "derived ratios (IOPS ratio within each "
                        "run, then median over runs)");
  for (const ServerSpec& z : cfg.servers) {
    for (const RatioDef& def : kRatios) {
      if (z.kind != ServerKind::kZtier) continue;
      const NbdJob& job = StandardJobs()[def.job];
      const std::string figure = SampleName(job.name, "iops");
      const std::vector<double> v = m.Ratios(z.label, figure, def.peer, figure);
      const bool met = !v.empty() && Summarize(v).median >= def.target;
      t.AddRow()
          .Text("ratio",
                z.label + "/" + def.peer + " " + JobTitle(job) + " IOPS")
          .Figure("IOPS ratio", v, 3)
          .Number("target >=", def.target, 2)
          .Text("met", v.empty() ? "-" : (met ? "yes" : "NO"));
    }
  }
}

// "nbd-4k", IOPS of the 4 KiB jobs in thousands, and "nbd-128k", MB/s of
// the 128 KiB jobs: a bar per server at each job, median and min-max.
void Charts(const NbdBenchConfig& cfg, const Measurements& m, Report& r) {
  const struct {
    const char *name, *what, *y_label, *figure;
    double unit;  // short bar labels
  } kCharts[] = {
      {"nbd-4k", "4 KiB random", "thousand I/Os per second", "iops", 1000},
      {"nbd-128k", "128 KiB sequential", "throughput (MB/s = 10^6 bytes/s)",
       "mb_s", 1}};
  for (const auto& k : kCharts) {
    Chart c{.name = k.name,
            .title = "fio over NBD, " + std::string(k.what) + " I/O (" +
                     MedianOfRuns(cfg.common.runs) + ")",
            .x_label = "fio job (" + std::to_string(cfg.seconds) + " s each)",
            .y_label = k.y_label,
            .style = PlotStyle::kBars};
    for (const ServerSpec& s : cfg.servers)
      c.series.push_back({.title = s.label});
    for (const NbdJob& job : StandardJobs()) {
      if ((job.block_size <= 4096) != (k.unit > 1)) continue;
      const double x = static_cast<double>(c.x_tics.size());
      c.x_tics.push_back({x, JobTitle(job)});
      for (std::size_t s = 0; s < cfg.servers.size(); ++s) {
        std::vector<double> v =
            m.Of(cfg.servers[s].label, SampleName(job.name, k.figure));
        for (double& y : v) y /= k.unit;
        if (!v.empty()) c.series[s].points.push_back(SpreadPoint(x, v));
      }
    }
    r.AddChart(std::move(c));
  }
}

}  // namespace

std::string SampleName(std::string_view name, std::string_view figure) {
  return std::string(name) + " " + std::string(figure);
}

Report NbdReport(const NbdBenchConfig& cfg, const Measurements& m,
                 MachineInfo machine) {
  Report r("ztier bench nbd", std::move(machine));
  std::vector<std::string> servers, corpora;
  for (const ServerSpec& s : cfg.servers) servers.push_back(s.label);
  for (const auto& c : cfg.corpora) {
    corpora.push_back(c.name + " (" + std::to_string(c.bytes) + " bytes)");
  }
  for (const auto& [key, value] :
       {std::pair{"runs", std::to_string(cfg.common.runs)},
        {"seconds", std::to_string(cfg.seconds)},
        {"size_bytes", std::to_string(cfg.size_bytes)},
        {"area_bytes", std::to_string(cfg.area_bytes)},
        {"codecs", Joined(cfg.codecs, ",")},
        {"servers", Joined(servers, ",")},
        {"corpora", Joined(corpora, ", ")},
        {"fio", cfg.fio.version},
        {"nbdkit", cfg.nbdkit.version},
        {"nbdcopy", cfg.nbdcopy.version}}) {
    r.Condition(key, value);
  }
  r.Line(ConfigText(cfg));
  if (!cfg.fio.path.empty()) FioTable(cfg, m, r);
  if (!cfg.corpora.empty()) CopyTable(cfg, m, r);
  if (!cfg.fio.path.empty()) RatioTable(cfg, m, r), Charts(cfg, m, r);
  return r;
}

}  // namespace ztier::tool::bench
