// File: tools/ztier/bench_zram_compare_report.cc
//
// Tables and JSON for `ztier bench zram-compare`
// (bench_zram_compare_report.h).
#include "bench_zram_compare_report.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "bench_proc.h"
#include "bench_stats.h"
#include "bench_zram_compare_io.h"

namespace ztier::tool::zramcmp {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

std::string Fixed(double v, int decimals) {
  return std::isfinite(v) ? FormatDouble(v, decimals) : "-";
}

std::string MiB(double bytes) { return Fixed(bytes / (1 << 20), 2); }

double Median(const std::vector<double>& v) {
  return v.empty() ? kNaN : Summarize(v).median;
}

// num[r] / den[r] for every run both have.
std::vector<double> PerRunRatios(const std::vector<double>& num,
                                 const std::vector<double>& den) {
  std::vector<double> out;
  for (std::size_t r = 0; r < std::min(num.size(), den.size()); ++r) {
    if (den[r] > 0) out.push_back(num[r] / den[r]);
  }
  return out;
}

// "1.234 (1.1-1.3)", or "-".
std::string RatioText(const std::vector<double>& ratios) {
  if (ratios.empty()) return "-";
  const SampleStats s = Summarize(ratios);
  return FormatDouble(s.median, 3) + " (" + FormatDouble(s.min, 2) + "-" +
         FormatDouble(s.max, 2) + ")";
}

bool ReportsMbS(const IoCase& c) { return c.job.block_size > 4096; }

// The figure a table shows for `c`: MB/s for 128 KiB jobs, else IOPS.
const std::vector<double>* Figure(const IoSeries* s, const IoCase& c) {
  if (s == nullptr) return nullptr;
  return ReportsMbS(c) ? &s->mb_s : &s->iops;
}

// Median, min, max, cv% of `v` as cells ("-" when absent).
void AddSpreadCells(const std::vector<double>* v, int decimals,
                    std::vector<std::string>* row) {
  if (v == nullptr || v->empty()) {
    row->insert(row->end(), {"-", "-", "-", "-"});
    return;
  }
  const SampleStats s = Summarize(*v);
  row->insert(row->end(),
              {FormatDouble(s.median, decimals), FormatDouble(s.min, decimals),
               FormatDouble(s.max, decimals), FormatDouble(s.cv_percent, 1)});
}

std::string CaseTitle(const IoCase& c) {
  return bench::JobTitle(c.job) + " x" + std::to_string(c.threads);
}

// One field of every MmStat, as doubles.
template <typename F>
std::vector<double> Field(const std::vector<MmStat>& v, F f) {
  std::vector<double> out;
  for (const MmStat& m : v) out.push_back(static_cast<double>(f(m)));
  return out;
}

void JsonMmSide(JsonWriter& w, const std::vector<MmStat>& v,
                const std::vector<double>* pool_metadata) {
  if (v.empty()) {
    w.Null();
    return;
  }
  w.BeginObject();
  const auto put = [&](std::string_view key, auto f) {
    const std::vector<double> x = Field(v, f);
    const SampleStats s = Summarize(x);
    w.UintField(key, static_cast<std::uint64_t>(std::llround(s.median)));
    w.UintField(std::string(key) + "_min",
                static_cast<std::uint64_t>(std::llround(s.min)));
    w.UintField(std::string(key) + "_max",
                static_cast<std::uint64_t>(std::llround(s.max)));
  };
  put("orig_data_size", [](const MmStat& m) { return m.orig_data_size; });
  put("compr_data_size", [](const MmStat& m) { return m.compr_data_size; });
  put("mem_used_total", [](const MmStat& m) { return m.mem_used_total; });
  put("same_pages", [](const MmStat& m) { return m.same_pages; });
  put("huge_pages", [](const MmStat& m) { return m.huge_pages; });
  if (pool_metadata != nullptr) {
    w.UintField(
        "pool_metadata_bytes",
        static_cast<std::uint64_t>(std::llround(Median(*pool_metadata))));
  }
  w.UintField("runs", v.size());
  w.EndObject();
}

void JsonCase(JsonWriter& w, const IoCase& c) {
  bench::WriteJobKeysJson(w, c.job);
  w.UintField("threads", c.threads);
}

void JsonRatio(JsonWriter& w, const IoCase& c, const CodecPair& pair,
               IoPath num, IoPath den, const std::vector<double>& ratios,
               std::string_view metric) {
  w.BeginObject();
  JsonCase(w, c);
  w.StringField("kernel_codec", pair.kernel);
  w.StringField("ztier_codec", pair.ztier);
  w.StringField("numerator", IoPathName(num));
  w.StringField("denominator", IoPathName(den));
  w.StringField("metric", metric);
  WriteRatiosJson(w, "ratio", ratios);
  WriteSamplesJson(w, "per_run", ratios, 4);
  w.EndObject();
}

}  // namespace

std::string_view IoPathName(IoPath p) {
  constexpr std::string_view kNames[] = {"kernel-io_uring", "kernel-psync",
                                         "kernel-fio", "ztier-lib",
                                         "ztier-nbd"};
  return kNames[static_cast<int>(p)];
}

bool IsKernelPath(IoPath p) {
  return p == IoPath::kKernelUring || p == IoPath::kKernelSync ||
         p == IoPath::kKernelFio;
}

bool ZramCompareConfig::Measures(IoPath p) const {
  if (std::find(paths.begin(), paths.end(), p) == paths.end()) return false;
  if (IsKernelPath(p) && !kernel_used()) return false;
  if (p == IoPath::kKernelFio && fio.path.empty()) return false;
  if (p == IoPath::kZtierNbd && (fio.path.empty() || nbdcopy.path.empty())) {
    return false;
  }
  return true;
}

ZramCompareResults ZramCompareResults::For(const ZramCompareConfig& cfg) {
  ZramCompareResults r;
  r.mm.assign(cfg.corpora.size(), std::vector<MmCase>(cfg.pairs.size()));
  return r;
}

IoSeries& ZramCompareResults::Series(std::size_t io_case, IoPath path,
                                     const std::string& codec) {
  for (IoSeries& s : io) {
    if (s.io_case == io_case && s.path == path && s.codec == codec) return s;
  }
  io.push_back({.io_case = io_case, .path = path, .codec = codec});
  return io.back();
}

const IoSeries* ZramCompareResults::Find(std::size_t io_case, IoPath path,
                                         const std::string& codec) const {
  for (const IoSeries& s : io) {
    if (s.io_case == io_case && s.path == path && s.codec == codec) return &s;
  }
  return nullptr;
}

std::string ConfigText(const ZramCompareConfig& cfg) {
  std::string pairs, paths, threads, jobs;
  for (const CodecPair& p : cfg.pairs) {
    pairs += (pairs.empty() ? "" : ", ") + p.kernel + "/" + p.ztier;
  }
  for (IoPath p : cfg.paths) {
    paths += (paths.empty() ? "" : ", ") + std::string(IoPathName(p)) +
             (cfg.Measures(p) ? "" : " (skipped)");
  }
  for (const IoCase& c : cfg.cases) {
    if (c.threads == cfg.cases.front().threads) {
      jobs += (jobs.empty() ? "" : ", ") + bench::JobTitle(c.job);
    }
    const std::string t = std::to_string(c.threads);
    if (threads.find(t) == std::string::npos) {
      threads += (threads.empty() ? "" : " and ") + t;
    }
  }
  const auto version = [](const bench::ToolInfo& t) {
    return t.path.empty() ? std::string("not found")
                          : t.version + " (" + t.path + ")";
  };
  std::string text =
      "config: runs=" + std::to_string(cfg.runs) +
      " (after 1 warm-up run, not counted), IO job time=" +
      std::to_string(cfg.seconds) + " s, area=" + FormatMiB(cfg.area_bytes) +
      " (each thread on its own equal share), threads: " + threads + "\n" +
      "codec pairs (kernel/ztier): " + pairs + "\n" +
      "kernel device: " + cfg.zram_dev + ": " + cfg.kernel_state +
      (cfg.kernel_message.empty() ? "" : " (" + cfg.kernel_message + ")") +
      "\n";
  if (!cfg.kernel_algorithms.empty()) {
    std::string algs;
    for (const std::string& a : cfg.kernel_algorithms) algs += " " + a;
    text += "  kernel comp_algorithm offers:" + algs + "\n";
  }
  text +=
      "part (a): each corpus on a fresh device of its size, per codec pair: "
      "kernel: reset, comp_algorithm, disksize, written in 128 KiB O_DIRECT "
      "writes, mm_stat, read back and compared, reset; ztier: a PageStore of "
      "as many slots, Store() page by page (what a Device write does), "
      "mm_stat (Stats()), read back and compared\n"
      "part (b): paths, alternating in this order for every job: " +
      paths + "\n  jobs (reads first, so every read reads corpus data): " +
      jobs +
      "\n  devices: fresh per codec and run, disksize = area; kernel: "
      "reset, comp_algorithm, disksize (reset after); ztier-lib: a Device "
      "(streams: one per core); ztier-nbd: ztier serve --device zram0:AREA "
      "--comp-algorithm CODEC --unix S --ctl C\n"
      "  fill (untimed): area page p = data page p % " +
      std::to_string(cfg.data_pages) +
      " (the corpus pages in order); kernel and ztier-lib: one sequential "
      "128 KiB pass over each thread's share by the drivers below, then "
      "every 61st page read back and compared; ztier-nbd: nbdcopy of the "
      "same bytes\n"
      "  kernel-io_uring: per thread one O_DIRECT fd and one io_uring of "
      "QD entries, QD IOs in flight; kernel-psync: per thread one O_DIRECT "
      "fd, one pread/pwrite after another; ztier-lib: per thread "
      "synchronous Device::Write/Read calls, one after another (QD has no "
      "meaning for a synchronous call: psync and lib rows at QD32 repeat "
      "QD1); all three draw the same blocks (splitmix64 seeded per thread) "
      "and write what the fill wrote there (corpus data)\n";
  if (!cfg.cases.empty()) {
    const IoCase& c = cfg.cases.front();
    text += "  kernel-fio, e.g.: " +
            bench::CommandLine(KernelFioArgs("fio", c.job, c.threads,
                                                cfg.area_bytes, cfg.seconds,
                                                cfg.zram_dev)) +
            "\n  ztier-nbd, e.g.: " +
            bench::CommandLine(NbdFioArgs("fio", c.job, c.threads,
                                             cfg.area_bytes, cfg.seconds,
                                             "URI")) +
            "\n  fio writes its own buffers (half compressible, new for "
            "every write), not corpus data: fio rows compare fio's data on "
            "both sides\n";
  }
  text += "tools: ztier " + version(cfg.ztier) + "; fio " + version(cfg.fio) +
          "; nbdcopy " + version(cfg.nbdcopy) + "\n";
  for (const ZramCompareConfig::Corpus& c : cfg.corpora) {
    text += "corpus: " + c.name + " (" + std::to_string(c.pages) +
            " pages) from " + c.path + "\n";
  }
  for (const std::string& n : cfg.notes) text += "note: " + n + "\n";
  return text;
}

std::string MmTable(const ZramCompareConfig& cfg,
                    const ZramCompareResults& results) {
  TextTable t({"corpus", "kernel/ztier", "orig MiB", "compr k", "compr z",
               "z/k", "mem_used k", "mem_used z", "z/k", "huge k/z",
               "same k/z", "z pool meta KiB"},
              {Align::kLeft, Align::kLeft, Align::kRight, Align::kRight,
               Align::kRight, Align::kRight, Align::kRight, Align::kRight,
               Align::kRight, Align::kRight, Align::kRight, Align::kRight});
  const auto med = [](const std::vector<MmStat>& v, auto f) {
    return Median(Field(v, f));
  };
  const auto count = [](double v) {
    return std::isfinite(v) ? std::to_string(std::llround(v))
                            : std::string("-");
  };
  for (std::size_t c = 0; c < cfg.corpora.size(); ++c) {
    for (std::size_t p = 0; p < cfg.pairs.size(); ++p) {
      const MmCase& m = results.mm[c][p];
      if (m.kernel.empty() && m.ztier.empty()) continue;
      const auto compr = [](const MmStat& s) { return s.compr_data_size; };
      const auto used = [](const MmStat& s) { return s.mem_used_total; };
      const double kc = med(m.kernel, compr), zc = med(m.ztier, compr);
      const double ku = med(m.kernel, used), zu = med(m.ztier, used);
      t.AddRow(
          {p == 0 ? cfg.corpora[c].name : "",
           cfg.pairs[p].kernel + "/" + cfg.pairs[p].ztier,
           MiB(static_cast<double>(cfg.corpora[c].pages) * 4096), MiB(kc),
           MiB(zc), Fixed(zc / kc, 3), MiB(ku), MiB(zu), Fixed(zu / ku, 3),
           count(med(m.kernel, [](const MmStat& s) { return s.huge_pages; })) +
               "/" +
               count(med(m.ztier, [](const MmStat& s) { return s.huge_pages; })),
           count(med(m.kernel, [](const MmStat& s) { return s.same_pages; })) +
               "/" +
               count(med(m.ztier, [](const MmStat& s) { return s.same_pages; })),
           Fixed(Median(m.ztier_pool_metadata) / 1024, 1)});
    }
  }
  return "== (a) mm_stat after writing each corpus to a fresh device "
         "(medians over " +
         std::to_string(cfg.runs) +
         " runs; MiB = 2^20 bytes; k = kernel zram, z = ztier; z/k < 1: "
         "ztier smaller) ==\n" +
         t.Render();
}

std::string IoTable(const ZramCompareConfig& cfg,
                    const ZramCompareResults& results, IoPath kernel,
                    IoPath ztier, std::string_view title) {
  TextTable t({"job x threads", "kernel/ztier", "unit", "kernel median", "min",
               "max", "cv%", "ztier median", "min", "max", "cv%",
               "ztier/kernel (min-max)"},
              {Align::kLeft, Align::kLeft, Align::kLeft, Align::kRight,
               Align::kRight, Align::kRight, Align::kRight, Align::kRight,
               Align::kRight, Align::kRight, Align::kRight, Align::kRight});
  for (std::size_t c = 0; c < cfg.cases.size(); ++c) {
    bool first = true;
    for (const CodecPair& p : cfg.pairs) {
      const auto* k = Figure(results.Find(c, kernel, p.kernel), cfg.cases[c]);
      const auto* z = Figure(results.Find(c, ztier, p.ztier), cfg.cases[c]);
      if (k == nullptr && z == nullptr) continue;
      std::vector<std::string> row = {first ? CaseTitle(cfg.cases[c]) : "",
                                      p.kernel + "/" + p.ztier,
                                      ReportsMbS(cfg.cases[c]) ? "MB/s"
                                                               : "IOPS"};
      const int decimals = ReportsMbS(cfg.cases[c]) ? 1 : 0;
      AddSpreadCells(k, decimals, &row);
      AddSpreadCells(z, decimals, &row);
      row.push_back(k != nullptr && z != nullptr
                        ? RatioText(PerRunRatios(*z, *k))
                        : "-");
      t.AddRow(std::move(row));
      first = false;
    }
  }
  return "== " + std::string(title) + ": " + std::string(IoPathName(ztier)) +
         " vs " + std::string(IoPathName(kernel)) + " (" +
         std::to_string(cfg.seconds) + " s per job, " +
         std::to_string(cfg.runs) +
         " runs; MB/s = 10^6 bytes/s; ratio within each run, then median) "
         "==\n" +
         t.Render();
}

std::string DriverCheckTable(const ZramCompareConfig& cfg,
                             const ZramCompareResults& results) {
  TextTable t({"job x threads", "kernel codec", "io_uring driver / fio"},
              {Align::kLeft, Align::kLeft, Align::kRight});
  for (std::size_t c = 0; c < cfg.cases.size(); ++c) {
    for (const CodecPair& p : cfg.pairs) {
      const auto* u =
          Figure(results.Find(c, IoPath::kKernelUring, p.kernel), cfg.cases[c]);
      const auto* f =
          Figure(results.Find(c, IoPath::kKernelFio, p.kernel), cfg.cases[c]);
      if (u == nullptr || f == nullptr) continue;
      t.AddRow({CaseTitle(cfg.cases[c]), p.kernel,
                RatioText(PerRunRatios(*u, *f))});
    }
  }
  return "== check: this tool's io_uring driver vs fio on the same kernel "
         "device (reads: same data; writes: corpus vs fio's data) ==\n" +
         t.Render();
}

Status WriteZramCompareJson(const std::string& path,
                            const MachineInfo& machine,
                            const ZramCompareConfig& cfg,
                            const ZramCompareResults& results) {
  JsonWriter w;
  BeginResultJson(w, "ztier bench zram-compare", machine);

  w.Key("config");
  w.BeginObject();
  w.UintField("runs", cfg.runs);
  w.UintField("warmup_runs", 1);
  w.IntField("seconds", cfg.seconds);
  w.UintField("area_bytes", cfg.area_bytes);
  w.Key("codec_pairs");
  w.BeginArray();
  for (const CodecPair& p : cfg.pairs) {
    w.BeginObject();
    w.StringField("kernel", p.kernel);
    w.StringField("ztier", p.ztier);
    w.EndObject();
  }
  w.EndArray();
  w.Key("paths");
  w.BeginArray();
  for (IoPath p : cfg.paths) {
    w.BeginObject();
    w.StringField("path", IoPathName(p));
    w.BoolField("measured", cfg.Measures(p));
    w.EndObject();
  }
  w.EndArray();
  w.Key("cases");
  w.BeginArray();
  for (const IoCase& c : cfg.cases) {
    w.BeginObject();
    JsonCase(w, c);
    w.Key("kernel_fio_args");
    w.BeginArray();
    for (const std::string& a : KernelFioArgs("fio", c.job, c.threads,
                                              cfg.area_bytes, cfg.seconds,
                                              cfg.zram_dev)) {
      w.String(a);
    }
    w.EndArray();
    w.EndObject();
  }
  w.EndArray();
  w.StringField("corpus_dir", cfg.corpus_dir);
  w.UintField("corpus_pages", cfg.corpus_pages);
  w.Key("corpora");
  w.BeginArray();
  for (const ZramCompareConfig::Corpus& c : cfg.corpora) {
    WriteCorpusJson(w, c.name, c.path, "pages", c.pages);
  }
  w.EndArray();
  w.UintField("data_pages", cfg.data_pages);
  w.Key("tools");
  w.BeginObject();
  for (const auto& [key, tool] :
       {std::pair{"ztier", &cfg.ztier}, std::pair{"fio", &cfg.fio},
        std::pair{"nbdcopy", &cfg.nbdcopy}}) {
    w.Key(key);
    if (tool->path.empty()) {
      w.Null();
    } else {
      w.String(tool->version + " (" + tool->path + ")");
    }
  }
  w.EndObject();
  w.Key("units");
  w.String("iops: I/Os per second; mb_s: 10^6 bytes per second; mm_stat "
           "fields: bytes, or pages for same_pages and huge_pages");
  w.EndObject();

  w.Key("kernel");
  w.BeginObject();
  w.StringField("device", cfg.zram_dev);
  w.StringField("state", cfg.kernel_state);
  w.StringField("message", cfg.kernel_message);
  w.Key("algorithms");
  w.BeginArray();
  for (const std::string& a : cfg.kernel_algorithms) w.String(a);
  w.EndArray();
  w.EndObject();

  w.Key("notes");
  w.BeginArray();
  for (const std::string& n : cfg.notes) w.String(n);
  w.EndArray();

  w.Key("mm_stat");
  w.BeginArray();
  for (std::size_t c = 0; c < cfg.corpora.size(); ++c) {
    for (std::size_t p = 0; p < cfg.pairs.size(); ++p) {
      const MmCase& m = results.mm[c][p];
      if (m.kernel.empty() && m.ztier.empty()) continue;
      w.BeginObject();
      w.StringField("corpus", cfg.corpora[c].name);
      w.StringField("kernel_codec", cfg.pairs[p].kernel);
      w.StringField("ztier_codec", cfg.pairs[p].ztier);
      w.UintField("orig_bytes", cfg.corpora[c].pages * 4096);
      w.Key("kernel");
      JsonMmSide(w, m.kernel, nullptr);
      w.Key("ztier");
      JsonMmSide(w, m.ztier, &m.ztier_pool_metadata);
      const auto ratio = [&](auto f) {
        return Median(Field(m.ztier, f)) / Median(Field(m.kernel, f));
      };
      w.DoubleField("compr_data_size_ztier_over_kernel",
                    ratio([](const MmStat& s) { return s.compr_data_size; }),
                    4);
      w.DoubleField("mem_used_total_ztier_over_kernel",
                    ratio([](const MmStat& s) { return s.mem_used_total; }), 4);
      w.EndObject();
    }
  }
  w.EndArray();

  w.Key("io");
  w.BeginArray();
  for (const IoSeries& s : results.io) {
    w.BeginObject();
    JsonCase(w, cfg.cases[s.io_case]);
    w.StringField("path", IoPathName(s.path));
    w.StringField("side", IsKernelPath(s.path) ? "kernel" : "ztier");
    w.StringField("codec", s.codec);
    w.UintField("runs", s.iops.size());
    WriteStatsJson(w, "iops", Summarize(s.iops), 1);
    WriteStatsJson(w, "mb_s", Summarize(s.mb_s), 2);
    WriteSamplesJson(w, "iops_samples", s.iops, 1);
    WriteSamplesJson(w, "mb_s_samples", s.mb_s, 2);
    w.EndObject();
  }
  w.EndArray();

  w.Key("ratios");
  w.BeginArray();
  constexpr std::pair<IoPath, IoPath> kRatioPaths[] = {
      {IoPath::kZtierLib, IoPath::kKernelUring},
      {IoPath::kZtierLib, IoPath::kKernelSync},
      {IoPath::kZtierNbd, IoPath::kKernelFio},
      {IoPath::kKernelUring, IoPath::kKernelFio}};
  for (std::size_t c = 0; c < cfg.cases.size(); ++c) {
    for (const CodecPair& p : cfg.pairs) {
      for (const auto& [num, den] : kRatioPaths) {
        const IoSeries* n =
            results.Find(c, num, IsKernelPath(num) ? p.kernel : p.ztier);
        const IoSeries* d = results.Find(c, den, p.kernel);
        if (n == nullptr || d == nullptr) continue;
        JsonRatio(w, cfg.cases[c], p, num, den, PerRunRatios(n->iops, d->iops),
                  "iops");
      }
    }
  }
  w.EndArray();
  w.EndObject();
  return WriteJsonFile(path, w);
}

}  // namespace ztier::tool::zramcmp
