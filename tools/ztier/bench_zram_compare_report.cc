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

std::string Joined(const std::vector<std::string>& v, std::string_view sep) {
  std::string out;
  for (const std::string& s : v) {
    (out += out.empty() ? std::string_view() : sep) += s;
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
    if (c.threads == 1) jobs.push_back(bench::JobTitle(c.job));
    if (c.job.name == cfg.cases.front().job.name) {
      threads.push_back(std::to_string(c.threads));
    }
  }
  const auto version = [](const ZramCompareConfig::Tool& t) {
    return t.path.empty() ? std::string("not found")
                          : t.version + " (" + t.path + ")";
  };
  const std::string tools = "ztier " + version(cfg.ztier) + "; fio " +
                            version(cfg.fio) + "; nbdcopy " +
                            version(cfg.nbdcopy);
  const std::string kernel = cfg.zram_dev + ": " + cfg.kernel_state;
  r.Line("config: runs=" + std::to_string(cfg.bench.runs) +
         " (after 1 warm-up run, not counted), IO job time=" +
         std::to_string(cfg.seconds) + " s, area=" + FormatMiB(cfg.area_bytes) +
         " (each thread on its own equal share), threads: " +
         Joined(threads, " and ") + "\ncodec pairs (kernel/ztier): " +
         Joined(pairs, ", ") + "\nkernel device: " + kernel +
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
    const auto line = [&](const std::string& uri, const std::string& dev) {
      return bench::CommandLine(FioArgs("fio", c.job, c.threads,
                                        cfg.area_bytes, cfg.seconds, uri, dev));
    };
    r.Line("  kernel-fio, e.g.: " + line("", cfg.zram_dev) +
           "\n  ztier-nbd, e.g.: " + line("URI", "") +
           "\n  fio writes its own buffers, not corpus data: fio rows compare "
           "fio's data on both sides");
  }
  r.Line("tools: " + tools);
  for (const ZramCompareConfig::Corpus& c : cfg.corpora) {
    r.Line("corpus: " + c.name + " (" + std::to_string(c.pages) +
           " pages) from " + c.path);
  }
  for (const std::string& n : cfg.notes) r.Line("note: " + n);
  r.Line("");
  const std::pair<const char*, std::string> conditions[] = {
      {"runs", std::to_string(cfg.bench.runs)},
      {"seconds", std::to_string(cfg.seconds)},
      {"area_bytes", std::to_string(cfg.area_bytes)},
      {"codec_pairs", Joined(pairs, ", ")}, {"paths", Joined(paths, ", ")},
      {"kernel_device", kernel}, {"tools", tools}};
  for (const auto& [key, value] : conditions) r.Condition(key, value);
}

void AddMmTable(Report& r, const ZramCompareConfig& cfg,
                const Measurements& m) {
  Table& t = r.AddTable(
      "mm_stat", "(a) mm_stat after writing each corpus to a fresh device "
                 "(medians over " + std::to_string(cfg.bench.runs) +
                 " runs; MiB = 2^20 bytes; k = kernel zram, z = ztier; "
                 "z/k < 1: ztier smaller)");
  for (std::size_t c = 0; c < cfg.corpora.size(); ++c) {
    for (std::size_t p = 0; p < cfg.pairs.size(); ++p) {
      const auto of = [&](char side, std::string_view f, double by = 1) {
        std::vector<double> v = m.Of("mm_stat", MmFigure(c, p, side, f));
        for (double& x : v) x /= by;
        return v;
      };
      const auto zk = [&](std::string_view f) {
        return m.Ratios("mm_stat", MmFigure(c, p, 'z', f), "mm_stat",
                        MmFigure(c, p, 'k', f));
      };
      const auto kz = [&](std::string_view f) {  // "91/91", "-" for none
        std::string out;
        for (char side : {'k', 'z'}) {
          const std::vector<double> v = of(side, f);
          out += (side == 'z' ? "/" : "") +
                 (v.empty() ? "-"
                            : std::to_string(std::llround(Summarize(v).median)));
        }
        return out;
      };
      t.AddRow()
          .Text("corpus", cfg.corpora[c].name)
          .Text("kernel/ztier", PairName(cfg.pairs[p]))
          .Number("orig MiB", cfg.corpora[c].pages * 4096.0 / (1 << 20), 2)
          .Figure("compr k", of('k', "compr", 1 << 20), 2, kMedian)
          .Figure("compr z", of('z', "compr", 1 << 20), 2, kMedian)
          .Figure("compr z/k", zk("compr"), 3, kMedian)
          .Figure("mem_used k", of('k', "used", 1 << 20), 2, kMedian)
          .Figure("mem_used z", of('z', "used", 1 << 20), 2, kMedian)
          .Figure("mem_used z/k", zk("used"), 3, kMedian)
          .Text("huge k/z", kz("huge"))
          .Text("same k/z", kz("same"))
          .Figure("z pool meta KiB", of('z', "meta", 1024), 1, kMedian);
    }
  }
}

// The variant that holds `path` of pair `p`: the pair's own, or for the
// ztier paths the first pair with the same ztier codec.
std::string Holder(const ZramCompareConfig& cfg, std::size_t p, IoPath path) {
  while (!IsKernelPath(path) && !cfg.MeasuresZtier(p)) --p;
  return PairName(cfg.pairs[p]);
}

// A table of `ztier` against `kernel`, or with `driver_check` (ztier:
// kernel-io_uring, kernel: kernel-fio) the driver check's one column.
void AddIoTable(Report& r, const ZramCompareConfig& cfg,
                const Measurements& m, IoPath kernel, IoPath ztier,
                std::string name, const std::string& title) {
  const bool check = name == "driver_check";
  Table& t = r.AddTable(
      std::move(name),
      check ? title
            : title + ": " + std::string(IoPathName(ztier)) + " vs " +
                  std::string(IoPathName(kernel)) + " (" +
                  std::to_string(cfg.seconds) + " s per job, " +
                  std::to_string(cfg.bench.runs) +
                  " runs; MB/s = 10^6 bytes/s; ratio within each run, then "
                  "median)");
  for (std::size_t c = 0; c < cfg.cases.size(); ++c) {
    const bool mb_s = cfg.cases[c].job.block_size > 4096;
    const std::string unit = mb_s ? "mb_s" : "iops";
    for (std::size_t p = 0; p < cfg.pairs.size(); ++p) {
      const std::string kv = Holder(cfg, p, kernel), zv = Holder(cfg, p, ztier);
      const std::string kf = IoFigure(c, kernel, unit);
      const std::string zf = IoFigure(c, ztier, unit);
      const std::vector<double> k = m.Of(kv, kf), z = m.Of(zv, zf);
      if (check ? !cfg.pairs[p].kernel_offered : k.empty() && z.empty()) {
        continue;
      }
      Row& row = t.AddRow().Text("job x threads", CaseTitle(cfg.cases[c]));
      if (check) {
        row.Text("kernel codec", cfg.pairs[p].kernel)
            .Figure("io_uring driver / fio", m.Ratios(zv, zf, kv, kf), 3,
                    kRange);
        continue;
      }
      row.Text("kernel/ztier", PairName(cfg.pairs[p]))
          .Text("unit", mb_s ? "MB/s" : "IOPS")
          .Figure("kernel", k, mb_s ? 1 : 0, kRange | kOwnCv)
          .Figure("ztier", z, mb_s ? 1 : 0, kRange | kOwnCv)
          .Figure("ztier/kernel", m.Ratios(zv, zf, kv, kf), 3, kRange);
    }
  }
}

}  // namespace

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
  using enum IoPath;
  AddConfig(report, cfg);
  AddMmTable(report, cfg, m);
  if (cfg.cases.empty()) return;
  const bool uring = cfg.Measures(kKernelUring), fio = cfg.Measures(kKernelFio);
  if (uring) {
    AddIoTable(report, cfg, m, kKernelUring, kZtierLib, "library_io_uring",
               "(b) library path, corpus data");
  }
  if (cfg.Measures(kKernelSync) || cfg.Measures(kZtierLib)) {
    AddIoTable(report, cfg, m, kKernelSync, kZtierLib, "library_psync",
               "(b) library path, corpus data, synchronous calls on both "
               "sides");
  }
  if (fio || cfg.Measures(kZtierNbd)) {
    AddIoTable(report, cfg, m, kKernelFio, kZtierNbd, "nbd",
               "(b) NBD path, fio on both sides");
  }
  if (uring && fio) {
    AddIoTable(report, cfg, m, kKernelFio, kKernelUring, "driver_check",
               "check: this tool's io_uring driver vs fio on the same kernel "
               "device (reads: same data; writes: corpus vs fio's data)");
  }
}

}  // namespace ztier::tool::zramcmp
