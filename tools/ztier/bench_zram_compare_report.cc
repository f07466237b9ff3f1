// File: tools/ztier/bench_zram_compare_report.cc
//
// The configuration lines and tables of `ztier bench zram-compare`
// (bench_zram_compare_report.h).
#include "bench_zram_compare_report.h"

#include <algorithm>
#include <cmath>

#include "bench_proc.h"
#include "bench_stats.h"
#include "bench_zram_compare_io.h"

namespace ztier::tool::zramcmp {
namespace {

bool ReportsMbS(const IoCase& c) { return c.job.block_size > 4096; }

std::vector<double> Scaled(std::vector<double> v, double by) {
  for (double& x : v) x *= by;
  return v;
}

// The variant that holds `path` of pair `p`: the pair's own, or for the
// ztier paths the first pair with the same ztier codec.
std::string Holder(const ZramCompareConfig& cfg, std::size_t p, IoPath path) {
  std::size_t h = p;
  while (!IsKernelPath(path) && !cfg.MeasuresZtier(h)) --h;
  return PairName(cfg.pairs[h]);
}

std::string Joined(const std::vector<std::string>& v, std::string_view sep) {
  std::string out;
  for (const std::string& s : v) {
    out += (out.empty() ? std::string() : std::string(sep)) + s;
  }
  return out;
}

void AddConfig(Report& r, const ZramCompareConfig& cfg) {
  std::vector<std::string> pairs, paths, jobs, threads;
  for (const CodecPair& p : cfg.pairs) pairs.push_back(PairName(p));
  for (IoPath p : cfg.paths) {
    paths.push_back(std::string(IoPathName(p)) +
                    (cfg.Measures(p) ? "" : " (skipped)"));
  }
  for (const IoCase& c : cfg.cases) {
    const std::string t = std::to_string(c.threads);
    if (c.threads == cfg.cases.front().threads) {
      jobs.push_back(bench::JobTitle(c.job));
    }
    if (std::find(threads.begin(), threads.end(), t) == threads.end()) {
      threads.push_back(t);
    }
  }
  const auto version = [](const ZramCompareConfig::Tool& t) {
    return t.path.empty() ? std::string("not found")
                          : t.version + " (" + t.path + ")";
  };
  r.Line("config: runs=" + std::to_string(cfg.bench.runs) +
         " (after 1 warm-up run, not counted), IO job time=" +
         std::to_string(cfg.seconds) + " s, area=" + FormatMiB(cfg.area_bytes) +
         " (each thread on its own equal share), threads: " +
         Joined(threads, " and ") + "\ncodec pairs (kernel/ztier): " +
         Joined(pairs, ", ") + "\nkernel device: " + cfg.zram_dev + ": " +
         cfg.kernel_state +
         (cfg.kernel_message.empty() ? "" : " (" + cfg.kernel_message + ")"));
  if (!cfg.kernel_algorithms.empty()) {
    r.Line("  kernel comp_algorithm offers: " +
           Joined(cfg.kernel_algorithms, " "));
  }
  r.Line("part (b): paths, alternating in this order for every job: " +
         Joined(paths, ", ") + "\n  jobs (reads first): " +
         Joined(jobs, ", ") + "\n  fill (untimed): area page p = data page "
         "p % " + std::to_string(cfg.data_pages) + ", every 61st page read "
         "back and compared; psync and lib rows at QD32 repeat QD1 (a "
         "synchronous call has no queue)");
  if (!cfg.cases.empty()) {
    const IoCase& c = cfg.cases.front();
    r.Line("  kernel-fio, e.g.: " +
           bench::CommandLine(FioArgs("fio", c.job, c.threads, cfg.area_bytes,
                                      cfg.seconds, "", cfg.zram_dev)) +
           "\n  ztier-nbd, e.g.: " +
           bench::CommandLine(FioArgs("fio", c.job, c.threads, cfg.area_bytes,
                                      cfg.seconds, "URI")) +
           "\n  fio writes its own buffers, not corpus data: fio rows compare "
           "fio's data on both sides");
  }
  r.Line("tools: ztier " + version(cfg.ztier) + "; fio " + version(cfg.fio) +
         "; nbdcopy " + version(cfg.nbdcopy));
  for (const ZramCompareConfig::Corpus& c : cfg.corpora) {
    r.Line("corpus: " + c.name + " (" + std::to_string(c.pages) +
           " pages) from " + c.path);
  }
  for (const std::string& n : cfg.notes) r.Line("note: " + n);
  r.Line("");
  r.Condition("runs", std::to_string(cfg.bench.runs));
  r.Condition("seconds", std::to_string(cfg.seconds));
  r.Condition("area_bytes", std::to_string(cfg.area_bytes));
  r.Condition("codec_pairs", Joined(pairs, ", "));
  r.Condition("paths", Joined(paths, ", "));
  r.Condition("kernel_device", cfg.zram_dev + ": " + cfg.kernel_state);
  r.Condition("tools", "ztier " + version(cfg.ztier) + "; fio " +
                           version(cfg.fio) + "; nbdcopy " +
                           version(cfg.nbdcopy));
}

// "91/91": the medians of a count on both sides ("-" for a side without).
std::string KZ(const Measurements& m, std::size_t c, std::size_t p,
               std::string_view field) {
  const auto one = [&](char side) {
    const std::vector<double> v = m.Of("mm_stat", MmFigure(c, p, side, field));
    return v.empty() ? std::string("-")
                     : std::to_string(std::llround(Summarize(v).median));
  };
  return one('k') + "/" + one('z');
}

void AddMmTable(Report& r, const ZramCompareConfig& cfg,
                const Measurements& m) {
  Table& t = r.AddTable(
      "mm_stat", "(a) mm_stat after writing each corpus to a fresh device "
                 "(medians over " + std::to_string(cfg.bench.runs) +
                 " runs; MiB = 2^20 bytes; k = kernel zram, z = ztier; "
                 "z/k < 1: ztier smaller)");
  constexpr double kMiB = 1.0 / (1 << 20);
  for (std::size_t c = 0; c < cfg.corpora.size(); ++c) {
    for (std::size_t p = 0; p < cfg.pairs.size(); ++p) {
      const auto of = [&](char side, std::string_view f, double by) {
        return Scaled(m.Of("mm_stat", MmFigure(c, p, side, f)), by);
      };
      const auto zk = [&](std::string_view f) {
        return m.Ratios("mm_stat", MmFigure(c, p, 'z', f), "mm_stat",
                        MmFigure(c, p, 'k', f));
      };
      t.AddRow()
          .Text("corpus", cfg.corpora[c].name)
          .Text("kernel/ztier", PairName(cfg.pairs[p]))
          .Number("orig MiB", cfg.corpora[c].pages * 4096.0 * kMiB, 2)
          .Figure("compr k", of('k', "compr", kMiB), 2, kMedian)
          .Figure("compr z", of('z', "compr", kMiB), 2, kMedian)
          .Figure("compr z/k", zk("compr"), 3, kMedian)
          .Figure("mem_used k", of('k', "used", kMiB), 2, kMedian)
          .Figure("mem_used z", of('z', "used", kMiB), 2, kMedian)
          .Figure("mem_used z/k", zk("used"), 3, kMedian)
          .Text("huge k/z", KZ(m, c, p, "huge"))
          .Text("same k/z", KZ(m, c, p, "same"))
          .Figure("z pool meta KiB", of('z', "meta", 1.0 / 1024), 1, kMedian);
    }
  }
}

void AddIoTable(Report& r, const ZramCompareConfig& cfg,
                const Measurements& m, IoPath kernel, IoPath ztier,
                std::string name, std::string_view title) {
  if (!cfg.Measures(kernel) && !cfg.Measures(ztier)) return;
  Table& t = r.AddTable(
      std::move(name),
      std::string(title) + ": " + std::string(IoPathName(ztier)) + " vs " +
          std::string(IoPathName(kernel)) + " (" + std::to_string(cfg.seconds) +
          " s per job, " + std::to_string(cfg.bench.runs) +
          " runs; MB/s = 10^6 bytes/s; ratio within each run, then median)");
  for (std::size_t c = 0; c < cfg.cases.size(); ++c) {
    const bool mb_s = ReportsMbS(cfg.cases[c]);
    const std::string unit = mb_s ? "mb_s" : "iops";
    for (std::size_t p = 0; p < cfg.pairs.size(); ++p) {
      const std::string kv = Holder(cfg, p, kernel), zv = Holder(cfg, p, ztier);
      const std::string kf = IoFigure(c, kernel, unit);
      const std::string zf = IoFigure(c, ztier, unit);
      const std::vector<double> k = m.Of(kv, kf), z = m.Of(zv, zf);
      if (k.empty() && z.empty()) continue;
      t.AddRow()
          .Text("job x threads", CaseTitle(cfg.cases[c]))
          .Text("kernel/ztier", PairName(cfg.pairs[p]))
          .Text("unit", mb_s ? "MB/s" : "IOPS")
          .Figure("kernel", k, mb_s ? 1 : 0, kRange | kOwnCv)
          .Figure("ztier", z, mb_s ? 1 : 0, kRange | kOwnCv)
          .Figure("ztier/kernel", m.Ratios(zv, zf, kv, kf), 3, kRange);
    }
  }
}

void AddDriverCheck(Report& r, const ZramCompareConfig& cfg,
                    const Measurements& m) {
  Table& t = r.AddTable("driver_check",
                        "check: this tool's io_uring driver vs fio on the "
                        "same kernel device (reads: same data; writes: "
                        "corpus vs fio's data)");
  for (std::size_t c = 0; c < cfg.cases.size(); ++c) {
    const std::string unit = ReportsMbS(cfg.cases[c]) ? "mb_s" : "iops";
    for (const CodecPair& p : cfg.pairs) {
      if (!p.kernel_offered) continue;
      t.AddRow()
          .Text("job x threads", CaseTitle(cfg.cases[c]))
          .Text("kernel codec", p.kernel)
          .Figure("io_uring driver / fio",
                  m.Ratios(PairName(p), IoFigure(c, IoPath::kKernelUring, unit),
                           PairName(p), IoFigure(c, IoPath::kKernelFio, unit)),
                  3, kRange);
    }
  }
}

}  // namespace

std::string_view IoPathName(IoPath p) {
  constexpr std::string_view kNames[] = {"kernel-io_uring", "ztier-lib",
                                         "kernel-psync", "kernel-fio",
                                         "ztier-nbd"};
  return kNames[static_cast<int>(p)];
}

bool IsKernelPath(IoPath p) {
  return p != IoPath::kZtierLib && p != IoPath::kZtierNbd;
}

bool ZramCompareConfig::Measures(IoPath p) const {
  if (std::find(paths.begin(), paths.end(), p) == paths.end()) return false;
  if (IsKernelPath(p) && kernel_state != "used") return false;
  if (p == IoPath::kKernelFio && fio.path.empty()) return false;
  return p != IoPath::kZtierNbd || (!fio.path.empty() && !nbdcopy.path.empty());
}

bool ZramCompareConfig::MeasuresZtier(std::size_t p) const {
  return std::none_of(pairs.begin(), pairs.begin() + p, [&](const CodecPair& q) {
    return q.ztier == pairs[p].ztier;
  });
}

std::string CaseTitle(const IoCase& c) {
  return bench::JobTitle(c.job) + " x" + std::to_string(c.threads);
}

std::string PairName(const CodecPair& p) { return p.kernel + "/" + p.ztier; }

std::string MmFigure(std::size_t c, std::size_t p, char side,
                     std::string_view field) {
  return std::to_string(c) + "/" + std::to_string(p) + " " + side + " " +
         std::string(field);
}

std::string IoFigure(std::size_t c, IoPath path, std::string_view unit) {
  return std::to_string(c) + " " + std::string(IoPathName(path)) + " " +
         std::string(unit);
}

void AddZramCompareReport(Report& report, const ZramCompareConfig& cfg,
                          const Measurements& m) {
  AddConfig(report, cfg);
  AddMmTable(report, cfg, m);
  if (cfg.cases.empty()) return;
  if (cfg.Measures(IoPath::kKernelUring)) {
    AddIoTable(report, cfg, m, IoPath::kKernelUring, IoPath::kZtierLib,
               "library_io_uring", "(b) library path, corpus data");
  }
  AddIoTable(report, cfg, m, IoPath::kKernelSync, IoPath::kZtierLib,
             "library_psync",
             "(b) library path, corpus data, synchronous calls on both sides");
  AddIoTable(report, cfg, m, IoPath::kKernelFio, IoPath::kZtierNbd, "nbd",
             "(b) NBD path, fio on both sides");
  if (cfg.Measures(IoPath::kKernelUring) && cfg.Measures(IoPath::kKernelFio)) {
    AddDriverCheck(report, cfg, m);
  }
}

}  // namespace ztier::tool::zramcmp
