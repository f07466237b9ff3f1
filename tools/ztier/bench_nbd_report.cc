// File: tools/ztier/bench_nbd_report.cc
//
// The Report of `ztier bench nbd` (bench_nbd_report.h).
#include "bench_nbd_report.h"

#include <algorithm>

#include "bench_stats.h"

namespace ztier::tool::bench {
namespace {

struct RatioDef {
  std::string_view job;
  ServerKind peer;
  double target;
};

constexpr RatioDef kRatios[] = {
    {"randread-4k-qd32", ServerKind::kNbdkit, 1.0},
    {"randwrite-4k-qd32", ServerKind::kNbdkit, 0.75},
    {"randread-4k-qd32", ServerKind::kNbdkitZstd, 5.0},
    {"randwrite-4k-qd32", ServerKind::kNbdkitZstd, 5.0},
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
  std::vector<std::string> servers, jobs;
  for (const ServerSpec& s : cfg.servers) servers.push_back(s.label);
  for (const NbdJob& j : StandardJobs()) jobs.push_back(JobTitle(j));
  const auto tool = [](const char* name, const ToolInfo& t) {
    return std::string(name) + " " +
           (t.path.empty() ? "not found" : t.version + " (" + t.path + ")");
  };
  std::string text =
      "config: runs=" + std::to_string(cfg.common.runs) +
      ", fio seconds per job=" + std::to_string(cfg.seconds) +
      ", size=" + SizeText(cfg.size_bytes) + " (jobs and fill on the first " +
      SizeText(cfg.area_bytes) + "), codecs=" + Joined(cfg.codecs, ",") +
      "\nservers (one at a time, in alternating order per run; each started "
      "fresh for its fio jobs and for each copy): " +
      Joined(servers, ", ") +
      "\n  ztier-CODEC: ztier serve --device zram0:SIZE --comp-algorithm "
      "CODEC --unix S --ctl C\n" +
      (cfg.nbdkit.path.empty()
           ? ""
           : "  nbdkit: nbdkit --foreground --unix S memory SIZE\n"
             "  nbdkit-zstd: nbdkit --foreground --unix S memory SIZE "
             "allocator=zstd\n") +
      "tools: " + tool("ztier", cfg.ztier) + "; " + tool("fio", cfg.fio) +
      "; " + tool("nbdkit", cfg.nbdkit) + "; " + tool("nbdcopy", cfg.nbdcopy);
  if (!cfg.fio.path.empty()) {
    text += "\nfio: " + Joined(FioCommonFlags(), " ") +
            " --uri=URI --size=" + std::to_string(cfg.area_bytes) +
            " --time_based --runtime=" + std::to_string(cfg.seconds) +
            "\n  jobs: " + Joined(jobs, ", ") +
            "\n  fill (untimed, first on every server in every run): write "
            "128k QD8, one pass over the area\n  fio time: " +
            std::to_string(cfg.common.runs) + " runs x " +
            std::to_string(jobs.size()) + " jobs x " +
            std::to_string(servers.size()) + " servers x " +
            std::to_string(cfg.seconds) + " s = " +
            std::to_string(cfg.common.runs * jobs.size() * servers.size() *
                           cfg.seconds) +
            " s";
  }
  for (const NbdBenchConfig::Corpus& c : cfg.corpora) {
    text += "\ncorpus: " + c.name + " (" + std::to_string(c.bytes) +
            " bytes) from " + c.path;
  }
  if (!cfg.nbdcopy.path.empty()) {
    text +=
        "\nnbdcopy: FILE -> URI and URI -> FILE2 on an export of the "
        "file's size; MB/s = 10^6 bytes / wall time of the nbdcopy process";
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
  Table* t = nullptr;
  for (const ServerSpec& z : cfg.servers) {
    for (const RatioDef& def : kRatios) {
      auto peer =
          std::find_if(cfg.servers.begin(), cfg.servers.end(),
                       [&](const ServerSpec& s) { return s.kind == def.peer; });
      if (z.kind != ServerKind::kZtier || peer == cfg.servers.end()) continue;
      const NbdJob& job =
          *std::find_if(StandardJobs().begin(), StandardJobs().end(),
                        [&](const NbdJob& j) { return j.name == def.job; });
      const std::string figure = SampleName(job.name, "iops");
      const std::vector<double> v =
          m.Ratios(z.label, figure, peer->label, figure);
      if (t == nullptr) {
        t = &r.AddTable("ratios",
                        "derived ratios (IOPS ratio within each "
                        "run, then median over runs)");
      }
      const bool met = !v.empty() && Summarize(v).median >= def.target;
      t->AddRow()
          .Text("ratio",
                z.label + "/" + peer->label + " " + JobTitle(job) + " IOPS")
          .Figure("IOPS ratio", v, 3)
          .Number("target >=", def.target, 2)
          .Text("met", v.empty() ? "-"
                       : met     ? "yes"
                                 : "NO");
    }
  }
}

// "nbd-4k", IOPS of the 4 KiB jobs in thousands, and "nbd-128k", MB/s of
// the 128 KiB jobs: a bar per server at each job, median and min-max.
void Charts(const NbdBenchConfig& cfg, const Measurements& m, Report& r) {
  const std::string x_label =
      "fio job (" + std::to_string(cfg.seconds) + " s each)";
  const std::string runs = MedianOfRuns(cfg.common.runs);
  Chart charts[2] = {
      {.name = "nbd-4k",
       .title = "fio over NBD, 4 KiB random I/O (" + runs + ")",
       .x_label = x_label,
       .y_label = "thousand I/Os per second",
       .style = PlotStyle::kBars},
      {.name = "nbd-128k",
       .title = "fio over NBD, 128 KiB sequential I/O (" + runs + ")",
       .x_label = x_label,
       .y_label = "throughput (MB/s = 10^6 bytes/s)",
       .style = PlotStyle::kBars}};
  for (Chart& c : charts) {
    for (const ServerSpec& s : cfg.servers)
      c.series.push_back({.title = s.label});
  }
  for (const NbdJob& job : StandardJobs()) {
    const bool small = job.block_size <= 4096;
    Chart& c = charts[small ? 0 : 1];
    const double x = static_cast<double>(c.x_tics.size());
    c.x_tics.push_back({x, JobTitle(job)});
    for (std::size_t s = 0; s < cfg.servers.size(); ++s) {
      std::vector<double> v = m.Of(
          cfg.servers[s].label, SampleName(job.name, small ? "iops" : "mb_s"));
      for (double& y : v) y /= small ? 1000 : 1;  // short bar labels
      if (!v.empty()) c.series[s].points.push_back(SpreadPoint(x, v));
    }
  }
  for (Chart& c : charts) r.AddChart(std::move(c));
}

}  // namespace

std::string SampleName(std::string_view name, std::string_view figure) {
  return std::string(name) + " " + std::string(figure);
}

Report NbdReport(const NbdBenchConfig& cfg, const Measurements& m,
                 MachineInfo machine) {
  Report r("ztier bench nbd", std::move(machine));
  r.Condition("runs", std::to_string(cfg.common.runs));
  r.Condition("seconds", std::to_string(cfg.seconds));
  r.Condition("size_bytes", std::to_string(cfg.size_bytes));
  r.Condition("area_bytes", std::to_string(cfg.area_bytes));
  r.Condition("codecs", Joined(cfg.codecs, ","));
  for (const auto& [name, t] : {std::pair{"fio", &cfg.fio},
                                {"nbdkit", &cfg.nbdkit},
                                {"nbdcopy", &cfg.nbdcopy}}) {
    r.Condition(name, t->path.empty() ? "not found" : t->version);
  }
  r.Line(ConfigText(cfg));
  if (!cfg.fio.path.empty()) FioTable(cfg, m, r);
  if (!cfg.nbdcopy.path.empty() && !cfg.corpora.empty()) CopyTable(cfg, m, r);
  if (!cfg.fio.path.empty()) {
    RatioTable(cfg, m, r);
    Charts(cfg, m, r);
  }
  return r;
}

}  // namespace ztier::tool::bench
