// File: tools/ztier/bench_nbd_report.cc
//
// Tables and JSON for `ztier bench nbd` (bench_nbd_report.h).
#include "bench_nbd_report.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <limits>

#include "bench_fio.h"
#include "bench_stats.h"

namespace ztier::tool::bench {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

std::string Fixed(double v, int decimals) {
  return std::isfinite(v) ? FormatDouble(v, decimals) : "-";
}

std::string MiB(double bytes) {
  return Fixed(bytes / (1024.0 * 1024.0), 2);
}

std::string SizeText(std::uint64_t bytes) {
  if (bytes % (1ull << 30) == 0) return std::to_string(bytes >> 30) + " GiB";
  if (bytes % (1ull << 20) == 0) return std::to_string(bytes >> 20) + " MiB";
  return std::to_string(bytes) + " bytes";
}

// Median/min/max of `v`, NaN for an empty one.
SampleStats Stats(const std::vector<double>& v) {
  SampleStats s = Summarize(v);
  if (v.empty()) s.median = s.min = s.max = s.mean = s.stddev = kNaN;
  return s;
}

void JsonServer(JsonWriter& w, const ServerSpec& s) {
  w.StringField("server", ServerName(s.kind));
  w.StringField("codec", s.codec);
  w.StringField("label", s.label);
}

void JsonTool(JsonWriter& w, std::string_view key, const ToolInfo& t) {
  w.Key(key);
  w.BeginObject();
  w.Key("path");
  if (t.path.empty()) {
    w.Null();
  } else {
    w.String(t.path);
  }
  w.Key("version");
  if (t.path.empty()) {
    w.Null();
  } else {
    w.String(t.version);
  }
  w.EndObject();
}

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

}  // namespace

std::string_view ServerName(ServerKind kind) {
  switch (kind) {
    case ServerKind::kZtier:
      return "ztier";
    case ServerKind::kNbdkit:
      return "nbdkit";
    case ServerKind::kNbdkitZstd:
      return "nbdkit-zstd";
  }
  return "?";
}

NbdResults NbdResults::For(const NbdBenchConfig& cfg) {
  NbdResults r;
  const std::size_t jobs = StandardJobs().size();
  const std::size_t servers = cfg.servers.size();
  r.iops.assign(jobs, std::vector<std::vector<double>>(servers));
  r.mb_s.assign(jobs, std::vector<std::vector<double>>(servers));
  r.fio_cpu.assign(jobs, std::vector<std::vector<double>>(servers));
  r.copies.assign(cfg.corpora.size(), std::vector<CopySamples>(servers));
  return r;
}

std::vector<DerivedRatio> DeriveRatios(const NbdBenchConfig& cfg,
                                       const NbdResults& results) {
  std::vector<DerivedRatio> out;
  const auto jobs = StandardJobs();
  for (std::size_t z = 0; z < cfg.servers.size(); ++z) {
    if (cfg.servers[z].kind != ServerKind::kZtier) continue;
    for (const RatioDef& def : kRatios) {
      std::size_t peer = cfg.servers.size();
      for (std::size_t s = 0; s < cfg.servers.size(); ++s) {
        if (cfg.servers[s].kind == def.peer) peer = s;
      }
      if (peer == cfg.servers.size()) continue;
      std::size_t job = 0;
      while (job < jobs.size() && jobs[job].name != def.job) ++job;
      DerivedRatio d;
      d.numerator = cfg.servers[z].label;
      d.denominator = cfg.servers[peer].label;
      d.job = std::string(def.job);
      d.name = d.numerator + "/" + d.denominator + " " +
               JobTitle(jobs[job]) + " IOPS";
      d.target = def.target;
      const auto& num = results.iops[job][z];
      const auto& den = results.iops[job][peer];
      for (std::size_t run = 0; run < std::min(num.size(), den.size());
           ++run) {
        if (den[run] > 0) d.per_run.push_back(num[run] / den[run]);
      }
      const SampleStats st = Stats(d.per_run);
      d.median = st.median;
      d.min = st.min;
      d.max = st.max;
      out.push_back(std::move(d));
    }
  }
  return out;
}

std::string ConfigText(const NbdBenchConfig& cfg) {
  std::string codecs;
  for (const std::string& c : cfg.codecs) {
    codecs += (codecs.empty() ? "" : ",") + c;
  }
  std::string servers;
  for (const ServerSpec& s : cfg.servers) {
    servers += (servers.empty() ? "" : ", ") + s.label;
  }
  const auto version = [](const ToolInfo& t) {
    return t.path.empty() ? std::string("not found")
                          : t.version + " (" + t.path + ")";
  };
  std::string text =
      "config: runs=" + std::to_string(cfg.runs) +
      ", fio seconds per job=" + std::to_string(cfg.seconds) +
      ", size=" + SizeText(cfg.size_bytes) + " (jobs and fill on the first " +
      SizeText(cfg.area_bytes) + "), codecs=" + codecs + "\n" +
      "servers (in turn, each started fresh per run): " + servers + "\n" +
      "  ztier-CODEC: ztier serve --device zram0:SIZE --comp-algorithm CODEC "
      "--unix S --ctl C\n" +
      (cfg.nbdkit.path.empty()
           ? std::string()
           : "  nbdkit: nbdkit --foreground --unix S memory SIZE\n"
             "  nbdkit-zstd: nbdkit --foreground --unix S memory SIZE "
             "allocator=zstd\n") +
      "tools: ztier " + version(cfg.ztier) + "; fio " + version(cfg.fio) +
      "; nbdkit " + version(cfg.nbdkit) + "; nbdcopy " + version(cfg.nbdcopy) +
      "\n";
  if (cfg.fio_part) {
    std::string common;
    for (const std::string& f : FioCommonFlags()) common += " " + f;
    std::string jobs;
    for (const NbdJob& j : StandardJobs()) {
      jobs += (jobs.empty() ? "" : ", ") + JobTitle(j);
    }
    text += "fio:" + common + " --uri=URI --size=" +
            std::to_string(cfg.area_bytes) +
            " --time_based --runtime=" + std::to_string(cfg.seconds) +
            "\n  jobs: " + jobs +
            "\n  fill (untimed, first in every run on every server): write "
            "128k QD8, one pass over the area\n";
    const std::size_t fio_seconds = cfg.runs * StandardJobs().size() *
                                    cfg.servers.size() *
                                    static_cast<std::size_t>(cfg.seconds);
    text += "  fio time: " + std::to_string(cfg.runs) + " runs x " +
            std::to_string(StandardJobs().size()) + " jobs x " +
            std::to_string(cfg.servers.size()) + " servers x " +
            std::to_string(cfg.seconds) + " s = " +
            std::to_string(fio_seconds) + " s\n";
  }
  if (cfg.copy_part) {
    for (const NbdBenchConfig::Corpus& c : cfg.corpora) {
      text += "corpus: " + c.name + " (" + std::to_string(c.bytes) +
              " bytes) from " + c.path + "\n";
    }
    text +=
        "nbdcopy: FILE -> URI and URI -> FILE2 on an export of the file's "
        "size; MB/s = 10^6 bytes / wall time of the nbdcopy process\n";
  }
  for (const std::string& n : cfg.notes) text += "note: " + n + "\n";
  return text;
}

std::string FioTable(const NbdBenchConfig& cfg, const NbdResults& results) {
  TextTable t({"job", "server", "IOPS median", "min", "max", "cv%",
               "MB/s median", "min", "max", "fio CPU%"},
              {Align::kLeft, Align::kLeft, Align::kRight, Align::kRight,
               Align::kRight, Align::kRight, Align::kRight, Align::kRight,
               Align::kRight, Align::kRight});
  const auto jobs = StandardJobs();
  for (std::size_t j = 0; j < jobs.size(); ++j) {
    for (std::size_t s = 0; s < cfg.servers.size(); ++s) {
      const SampleStats io = Stats(results.iops[j][s]);
      const SampleStats mb = Stats(results.mb_s[j][s]);
      const SampleStats cpu = Stats(results.fio_cpu[j][s]);
      t.AddRow({s == 0 ? JobTitle(jobs[j]) : "", cfg.servers[s].label,
                Fixed(io.median, 0), Fixed(io.min, 0), Fixed(io.max, 0),
                io.n > 0 ? FormatDouble(io.cv_percent, 1) : "-",
                Fixed(mb.median, 1), Fixed(mb.min, 1), Fixed(mb.max, 1),
                cpu.n > 0 ? Fixed(cpu.median, 0) : "-"});
    }
  }
  return "== fio over NBD (" + std::to_string(cfg.seconds) +
         " s per job, " + std::to_string(cfg.runs) +
         " runs; MB/s = 10^6 bytes/s; cv% = stddev/mean of IOPS; fio CPU% "
         "= the fio client's user + system CPU, median, 100 = one CPU) ==\n" +
         t.Render();
}

std::vector<Chart> NbdCharts(const NbdBenchConfig& cfg,
                             const NbdResults& results) {
  const auto jobs = StandardJobs();
  const std::string runs = MedianOfRuns(cfg.runs);
  const std::string x_label =
      "fio job (" + std::to_string(cfg.seconds) + " s each)";
  Chart small{.name = "nbd-4k",
              .title = "fio over NBD, 4 KiB random I/O (" + runs + ")",
              .x_label = x_label,
              .y_label = "thousand I/Os per second",
              .style = PlotStyle::kBars};
  Chart large{.name = "nbd-128k",
              .title = "fio over NBD, 128 KiB sequential I/O (" + runs + ")",
              .x_label = x_label,
              .y_label = "throughput (MB/s = 10^6 bytes/s)",
              .style = PlotStyle::kBars};
  for (std::size_t s = 0; s < cfg.servers.size(); ++s) {
    small.series.push_back({.title = cfg.servers[s].label});
    large.series.push_back({.title = cfg.servers[s].label});
  }
  for (std::size_t j = 0; j < jobs.size(); ++j) {
    const bool is_small = jobs[j].block_size <= 4096;
    Chart& c = is_small ? small : large;
    const double x = static_cast<double>(c.x_tics.size());
    c.x_tics.push_back({x, JobTitle(jobs[j])});
    for (std::size_t s = 0; s < cfg.servers.size(); ++s) {
      const auto& samples = is_small ? results.iops[j][s] : results.mb_s[j][s];
      if (samples.empty()) continue;
      const SampleStats st = Stats(samples);
      const double unit = is_small ? 1000 : 1;  // short bar labels
      c.series[s].points.push_back(
          {x, st.median / unit, st.min / unit, st.max / unit});
    }
  }
  return {std::move(small), std::move(large)};
}

std::string CopyTable(const NbdBenchConfig& cfg, const NbdResults& results) {
  TextTable t({"corpus", "server", "in MB/s", "out MB/s", "stored MiB",
               "measured as", "orig/stored", "RSS growth MiB"},
              {Align::kLeft, Align::kLeft, Align::kRight, Align::kRight,
               Align::kRight, Align::kLeft, Align::kRight, Align::kRight});
  for (std::size_t c = 0; c < cfg.corpora.size(); ++c) {
    for (std::size_t s = 0; s < cfg.servers.size(); ++s) {
      const CopySamples& cs = results.copies[c][s];
      const SampleStats stored = Stats(cs.stored_bytes);
      const double orig = static_cast<double>(cfg.corpora[c].bytes);
      t.AddRow({s == 0 ? cfg.corpora[c].name : "", cfg.servers[s].label,
                Fixed(Stats(cs.in_mb_s).median, 1),
                Fixed(Stats(cs.out_mb_s).median, 1), MiB(stored.median),
                cfg.servers[s].kind == ServerKind::kZtier ? "mem_used_total"
                                                          : "RSS growth",
                stored.median > 0 ? Fixed(orig / stored.median, 3) : "-",
                MiB(Stats(cs.rss_growth_bytes).median)});
    }
  }
  return "== nbdcopy of each corpus (medians over " +
         std::to_string(cfg.runs) +
         " runs; stored = memory holding the copied corpus) ==\n" + t.Render();
}

std::string DerivedTable(const std::vector<DerivedRatio>& ratios) {
  TextTable t({"ratio", "median", "min", "max", "target", "met"},
              {Align::kLeft, Align::kRight, Align::kRight, Align::kRight,
               Align::kRight, Align::kLeft});
  for (const DerivedRatio& d : ratios) {
    t.AddRow({d.name, Fixed(d.median, 3), Fixed(d.min, 3), Fixed(d.max, 3),
              ">= " + FormatDouble(d.target, 2),
              d.per_run.empty() ? "-" : d.met() ? "yes" : "NO"});
  }
  return "== derived ratios (IOPS ratio within each run, then median over "
         "runs) ==\n" +
         t.Render();
}

void WriteJobKeysJson(JsonWriter& w, const NbdJob& job) {
  w.StringField("job", job.name);
  w.StringField("rw", job.rw);
  w.UintField("block_size", job.block_size);
  w.UintField("iodepth", job.iodepth);
}

Status WriteNbdJson(const std::string& path, const MachineInfo& machine,
                    const NbdBenchConfig& cfg, const NbdResults& results,
                    const std::vector<DerivedRatio>& ratios) {
  JsonWriter w;
  BeginResultJson(w, "ztier bench nbd", machine);

  w.Key("config");
  w.BeginObject();
  w.UintField("runs", cfg.runs);
  w.IntField("seconds", cfg.seconds);
  w.UintField("size_bytes", cfg.size_bytes);
  w.UintField("area_bytes", cfg.area_bytes);
  w.Key("fill");
  w.String("write 128k QD8, one pass over the area, untimed, before the "
           "jobs of every run on every server");
  w.Key("codecs");
  w.BeginArray();
  for (const std::string& c : cfg.codecs) w.String(c);
  w.EndArray();
  w.Key("servers");
  w.BeginArray();
  for (const ServerSpec& s : cfg.servers) {
    w.BeginObject();
    JsonServer(w, s);
    w.EndObject();
  }
  w.EndArray();
  w.Key("fio_common_flags");
  w.BeginArray();
  for (const std::string& f : FioCommonFlags()) w.String(f);
  w.String("--time_based");
  w.EndArray();
  w.Key("jobs");
  w.BeginArray();
  for (const NbdJob& j : StandardJobs()) {
    w.BeginObject();
    WriteJobKeysJson(w, j);
    w.EndObject();
  }
  w.EndArray();
  w.Key("corpora");
  w.BeginArray();
  for (const NbdBenchConfig::Corpus& c : cfg.corpora) {
    WriteCorpusJson(w, c.name, c.path, "bytes", c.bytes);
  }
  w.EndArray();
  w.Key("tools");
  w.BeginObject();
  JsonTool(w, "ztier", cfg.ztier);
  JsonTool(w, "fio", cfg.fio);
  JsonTool(w, "nbdkit", cfg.nbdkit);
  JsonTool(w, "nbdcopy", cfg.nbdcopy);
  w.EndObject();
  w.BoolField("no_nbdkit", cfg.no_nbdkit);
  w.Key("units");
  w.String("iops: I/Os per second; mb_s: 10^6 bytes per second; bytes: "
           "bytes");
  w.EndObject();

  w.Key("notes");
  w.BeginArray();
  for (const std::string& n : cfg.notes) w.String(n);
  w.EndArray();

  w.Key("measurements");
  w.BeginArray();
  const auto jobs = StandardJobs();
  for (std::size_t j = 0; j < jobs.size(); ++j) {
    for (std::size_t s = 0; s < cfg.servers.size(); ++s) {
      const auto& iops = results.iops[j][s];
      if (iops.empty()) continue;
      w.BeginObject();
      JsonServer(w, cfg.servers[s]);
      WriteJobKeysJson(w, jobs[j]);
      WriteFigureJson(w, "iops", iops, 1);
      WriteFigureJson(w, "mb_s", results.mb_s[j][s], 2);
      w.UintField("runs", iops.size());
      WriteSamplesJson(w, "iops_samples", iops, 1);
      WriteSamplesJson(w, "mb_s_samples", results.mb_s[j][s], 2);
      if (!results.fio_cpu[j][s].empty()) {
        WriteFigureJson(w, "fio_cpu_percent", results.fio_cpu[j][s], 1);
      }
      w.EndObject();
    }
  }
  w.EndArray();

  w.Key("copies");
  w.BeginArray();
  for (std::size_t c = 0; c < cfg.corpora.size(); ++c) {
    for (std::size_t s = 0; s < cfg.servers.size(); ++s) {
      const CopySamples& cs = results.copies[c][s];
      if (cs.in_mb_s.empty()) continue;
      w.BeginObject();
      JsonServer(w, cfg.servers[s]);
      w.StringField("corpus", cfg.corpora[c].name);
      w.UintField("bytes", cfg.corpora[c].bytes);
      WriteFigureJson(w, "in_mb_s", cs.in_mb_s, 2);
      WriteFigureJson(w, "out_mb_s", cs.out_mb_s, 2);
      w.UintField("runs", cs.in_mb_s.size());
      w.EndObject();
    }
  }
  w.EndArray();

  w.Key("memory");
  w.BeginArray();
  for (std::size_t c = 0; c < cfg.corpora.size(); ++c) {
    for (std::size_t s = 0; s < cfg.servers.size(); ++s) {
      const CopySamples& cs = results.copies[c][s];
      if (cs.stored_bytes.empty()) continue;
      const SampleStats stored = Stats(cs.stored_bytes);
      w.BeginObject();
      JsonServer(w, cfg.servers[s]);
      w.StringField("corpus", cfg.corpora[c].name);
      w.Key("metric");
      w.String(cfg.servers[s].kind == ServerKind::kZtier ? "mem_used_total"
                                                         : "rss_growth");
      w.UintField("bytes",
                  static_cast<std::uint64_t>(std::llround(stored.median)));
      w.UintField("bytes_min",
                  static_cast<std::uint64_t>(std::llround(stored.min)));
      w.UintField("bytes_max",
                  static_cast<std::uint64_t>(std::llround(stored.max)));
      w.UintField("orig_bytes", cfg.corpora[c].bytes);
      w.Key("orig_over_stored");
      w.Double(stored.median > 0
                   ? static_cast<double>(cfg.corpora[c].bytes) / stored.median
                   : kNaN,
               4);
      w.Key("rss_growth_bytes");
      w.Uint(static_cast<std::uint64_t>(
          std::llround(Stats(cs.rss_growth_bytes).median)));
      w.UintField("runs", cs.stored_bytes.size());
      WriteSamplesJson(w, "samples", cs.stored_bytes, 0);
      w.EndObject();
    }
  }
  w.EndArray();

  w.Key("derived");
  w.BeginArray();
  for (const DerivedRatio& d : ratios) {
    w.BeginObject();
    w.StringField("name", d.name);
    w.StringField("numerator", d.numerator);
    w.StringField("denominator", d.denominator);
    w.StringField("job", d.job);
    WriteRatiosJson(w, "ratio", d.per_run);
    w.DoubleField("target", d.target, 2);
    w.Key("met");
    if (d.per_run.empty()) {
      w.Null();
    } else {
      w.Bool(d.met());
    }
    WriteSamplesJson(w, "per_run", d.per_run, 4);
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();

  return WriteJsonFile(path, w);
}

}  // namespace ztier::tool::bench
