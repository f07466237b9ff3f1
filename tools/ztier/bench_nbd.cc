// File: tools/ztier/bench_nbd.cc
//
// `ztier bench nbd` (bench_nbd.h): flags, tools, corpora, a variant per
// server that runs it (bench_proc.h) under fio and nbdcopy, and the Report
// (bench_report.h) of what they measured.
#include "bench_nbd.h"

#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <functional>
#include <sstream>
#include <tuple>

#include "bench_fio.h"
#include "bench_stats.h"
#include "corpus/corpus.h"
#include "ctl/control_server.h"
#include "serve_cmd.h"
#include "tool_common.h"

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

// text(item) of each of `items`, joined with `sep`.
template <typename Range, typename Text = std::identity>
std::string Joined(const Range& items, std::string_view sep, Text text = {}) {
  std::string out;
  for (const auto& item : items) {
    if (!out.empty()) out += sep;
    out += std::invoke(text, item);
  }
  return out;
}

std::string ConfigText(const NbdBenchConfig& cfg) {
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
      Joined(cfg.servers, ", ", &ServerSpec::label) +
      "\ntools: " + tool("ztier", cfg.ztier) + "; " + tool("fio", cfg.fio) +
      "; " + tool("nbdkit", cfg.nbdkit) + "; " + tool("nbdcopy", cfg.nbdcopy);
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
    if (z.kind != ServerKind::kZtier) continue;
    for (const RatioDef& def : kRatios) {
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
  const auto corpus = [](const NbdBenchConfig::Corpus& c) {
    return c.name + " (" + std::to_string(c.bytes) + " bytes)";
  };
  for (const auto& [key, value] :
       {std::pair{"runs", std::to_string(cfg.common.runs)},
        {"seconds", std::to_string(cfg.seconds)},
        {"size_bytes", std::to_string(cfg.size_bytes)},
        {"area_bytes", std::to_string(cfg.area_bytes)},
        {"codecs", Joined(cfg.codecs, ",")},
        {"servers", Joined(cfg.servers, ",", &ServerSpec::label)},
        {"corpora", Joined(cfg.corpora, ", ", corpus)},
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

namespace ztier::tool {
namespace {

using namespace bench;  // NOLINT: this file is the benchmark's driver
using std::chrono::milliseconds;

constexpr const char kCommand[] = "ztier bench nbd";
constexpr std::uint64_t kMaxArea = 256ull << 20;
constexpr milliseconds kStart{15'000}, kStop{10'000}, kFill{600'000},
    kCopy{300'000};  // timeouts
constexpr double kMiB = 1024.0 * 1024.0;

constexpr const char kSynopsis[] =
    "[--runs N] [--seconds S] [--size SIZE] [--codec NAME]... "
    "[--corpus-dir DIR] [--no-nbdkit] [--json FILE] [--plot DIR]";
constexpr const char kAbout[] =
    "`ztier serve` vs. nbdkit's memory plugin (sparse and allocator=zstd) "
    "over NBD:\nfio IOPS and MB/s of six jobs, nbdcopy MB/s and the memory "
    "of each corpus,\nand ratios against targets. Needs fio, nbdcopy and "
    "nbdkit; a missing one skips\nits part.";

struct Bench {
  const NbdBenchConfig* cfg;
  std::string dir;  // also holds each corpus decompressed, as DIR/NAME
  Progress* progress = nullptr;

  void Step(std::size_t run, const ServerSpec& s, const std::string& what) {
    progress->Update(RunLabel(run, cfg->common.runs) + ": " + s.label + ": " +
                     what);
  }
};

// `spec` with an export of `size` bytes, its files DIR/TAG.*, accepting:
// `ztier serve --device zram0:SIZE --comp-algorithm CODEC` or `nbdkit
// memory SIZE` (with allocator=zstd for nbdkit-zstd).
Result<ServerProcess> Start(const Bench& b, const ServerSpec& spec,
                            const std::string& tag, std::uint64_t size) {
  const std::string base = b.dir + "/" + tag, sock = base + ".sock";
  const std::string ctl = spec.kind == ServerKind::kZtier ? base + ".ctl" : "";
  std::vector<std::string> argv =
      ZtierServeArgs(b.cfg->ztier.path, size, spec.codec, sock, ctl);
  if (ctl.empty()) {
    argv = {b.cfg->nbdkit.path, "--foreground",      "--unix", sock,
            "memory",           std::to_string(size)};
  }
  if (spec.kind == ServerKind::kNbdkitZstd) argv.push_back("allocator=zstd");
  return StartServerProcess(argv, spec.label, sock, ctl, base + ".log", b.dir,
                            kStart);
}

std::string Uri(const ServerProcess& s) {
  return s.ctl.empty() ? "nbd+unix:///?socket=" + s.sock
                       : NbdUnixUri("zram0", s.sock);
}

// ztier's mem_used_total: column 3 of mm_stat, over the control socket.
Result<std::uint64_t> ZtierMemUsed(const ServerProcess& s) {
  ZT_ASSIGN_OR_RETURN(std::string text,
                      ctl::Request(s.ctl, "zram0", "mm_stat", nullptr));
  std::istringstream fields(text);
  std::uint64_t v[3] = {0, 0, 0};
  if (fields >> v[0] >> v[1] >> v[2]) return v[2];
  return Err(Status::Corruption("mm_stat of " + s.label + ": '" + text + "'"));
}

// Compares file `path` with file `orig`; an error names the first
// differing page.
Status CompareFile(const std::string& path, const std::string& orig) {
  const std::string want = ReadFileText(orig, 1ull << 40);
  const std::string got = ReadFileText(path, want.size() + 1);
  if (got == want) return Status::Ok();
  const auto at = std::ranges::mismatch(got, want).in1 - got.begin();
  return Status::Corruption("copied-out " + path + " (" +
                            std::to_string(got.size()) + " bytes) differs " +
                            "from the original in page " +
                            std::to_string(at / 4096));
}

// The fio part of one run on `spec`: an untimed fill of the area, then each
// job for cfg.seconds on it, so that writes overwrite and reads read
// written data.
Status FioPart(Bench& b, const ServerSpec& spec, std::size_t run,
               Samples& out) {
  const NbdBenchConfig& cfg = *b.cfg;
  ZT_ASSIGN_OR_RETURN(ServerProcess server,
                      Start(b, spec, "fio", cfg.size_bytes));
  b.Step(run, spec, "fill");
  auto fill = RunFio(FioFillArgs(cfg.fio.path, Uri(server), cfg.area_bytes),
                     b.dir, kFill);
  if (!fill.has_value()) return fill.error();
  for (const NbdJob& job : StandardJobs()) {
    b.Step(run, spec, JobTitle(job));
    ZT_ASSIGN_OR_RETURN(
        FioFigures fig,
        RunFio(FioJobArgs(cfg.fio.path, job, Uri(server), cfg.area_bytes,
                          cfg.seconds),
               b.dir, milliseconds((cfg.seconds + 120) * 1000)));
    const FioDirection& d = job.writes ? fig.write : fig.read;
    out.Add(SampleName(job.name, "iops"), d.iops);
    out.Add(SampleName(job.name, "mb_s"), d.bw_bytes / 1e6);
    if (fig.cpu_percent >= 0)
      out.Add(SampleName(job.name, "cpu"), fig.cpu_percent);
  }
  StopServerProcess(&server, kStop, kCommand);
  return Status::Ok();
}

// `corpus` copied in and out of an export of its size on `spec`, and
// checked (a mismatch is fatal). The memory holding it is ztier's
// mem_used_total and nbdkit's VmRSS growth over the copy-in; MB/s is over
// nbdcopy's wall time.
Status CopyPart(Bench& b, const ServerSpec& spec,
                const NbdBenchConfig::Corpus& corpus, std::size_t run,
                Samples& out) {
  const std::string& name = corpus.name;
  const double bytes = static_cast<double>(corpus.bytes);
  const std::string& nbdcopy = b.cfg->nbdcopy.path;
  const std::string raw = b.dir + "/" + name, copy = b.dir + "/copied-out";
  b.Step(run, spec, "nbdcopy " + name);
  ZT_ASSIGN_OR_RETURN(ServerProcess server,
                      Start(b, spec, "copy", corpus.bytes));
  ZT_ASSIGN_OR_RETURN(std::uint64_t rss0,
                      ProcessRssBytes(server.process.pid()));
  ZT_ASSIGN_OR_RETURN(double in_s,
                      RunNbdcopy(nbdcopy, raw, Uri(server), b.dir, kCopy));
  ZT_ASSIGN_OR_RETURN(std::uint64_t rss1,
                      ProcessRssBytes(server.process.pid()));
  const double growth = rss1 > rss0 ? static_cast<double>(rss1 - rss0) : 0;
  double stored = growth;
  if (spec.kind == ServerKind::kZtier) {
    ZT_ASSIGN_OR_RETURN(std::uint64_t used, ZtierMemUsed(server));
    stored = static_cast<double>(used);
  }
  ::unlink(copy.c_str());
  ZT_ASSIGN_OR_RETURN(double out_s,
                      RunNbdcopy(nbdcopy, Uri(server), copy, b.dir, kCopy));
  StopServerProcess(&server, kStop, kCommand);
  ZT_RETURN_IF_ERROR(CompareFile(copy, raw));
  ::unlink(copy.c_str());
  out.Add(SampleName(name, "in_mb_s"), bytes / 1e6 / in_s);
  out.Add(SampleName(name, "out_mb_s"), bytes / 1e6 / out_s);
  out.Add(SampleName(name, "stored_mib"), stored / kMiB);
  out.Add(SampleName(name, "rss_mib"), growth / kMiB);
  if (stored > 0) out.Add(SampleName(name, "orig_over_stored"), bytes / stored);
  return Status::Ok();
}
// The command line into *cfg; the exit status when it is bad (2) or asked
// for --help (0).
std::optional<int> ParseFlags(std::span<const std::string_view> args,
                              NbdBenchConfig* cfg) {
  std::string size_text = "1G";
  std::vector<std::string> codecs;
  cfg->corpus_dir = kDefaultCorpusDir;
  FlagSet flags(kCommand, kSynopsis);
  flags.AddInt("runs", &cfg->common.runs, "N",
               "runs, each of every job and copy (default 5)", 1, 1000);
  flags.AddInt("seconds", &cfg->seconds, "S",
               "fio runtime of each job (default 3)", 1, 3600);
  flags.AddString("size", &size_text, "SIZE",
                  "export size of the fio part (default 1G); its jobs cover "
                  "the first min(SIZE, 256M)");
  flags.AddList("codec", &codecs, "NAME",
                "a ztier variant's codec (repeatable; default lz4)");
  AddCorpusDirFlag(flags, &cfg->corpus_dir, ", each copied with nbdcopy");
  flags.AddBool("no-nbdkit", &cfg->no_nbdkit,
                "measure ztier alone (no nbdkit peers, no ratios)");
  AddJsonFlag(flags, &cfg->common.json);
  AddPlotFlag(flags, &cfg->common.plot);
  if (auto rc = flags.ParseCommandLine(args, kAbout)) return *rc;
  auto size = ParseSizeFlag(size_text, 1u << 20, "1M");
  if (codecs.empty()) codecs.push_back("lz4");
  Status s = size.has_value() ? AddCodecs(codecs, &cfg->codecs) : size.error();
  if (!s.ok()) return ReportUsageError(kCommand, s.message());
  cfg->size_bytes = *size;
  cfg->area_bytes = std::min(cfg->size_bytes, kMaxArea);
  return std::nullopt;
}

// ztier, fio, nbdcopy and nbdkit, what is skipped without them, and the
// servers to measure.
Status FindTools(const std::string& dir, NbdBenchConfig* cfg) {
  cfg->ztier.path = SelfExecutable();
  if (cfg->ztier.path.empty()) {
    return Status::NotFound("cannot find this binary (/proc/self/exe)");
  }
  cfg->ztier.version = ToolVersion(cfg->ztier.path, dir);
  for (auto [tool, name, skipped] :
       {std::tuple{&cfg->fio, "fio", "the fio jobs are skipped"},
        {&cfg->nbdcopy, "nbdcopy", "the corpus copies are skipped"},
        {&cfg->nbdkit, "nbdkit", "ztier alone, no nbdkit peers, no ratios"}}) {
    if (tool == &cfg->nbdkit && cfg->no_nbdkit) {
      cfg->notes.push_back(std::string("--no-nbdkit: ") + skipped);
      continue;
    }
    *tool = FindTool(name, dir);
    if (!tool->path.empty()) continue;
    cfg->notes.push_back(name + std::string(" not found on PATH: ") + skipped);
    PrintError(kCommand, cfg->notes.back());
  }
  for (const std::string& codec : cfg->codecs) {
    cfg->servers.push_back({ServerKind::kZtier, codec, "ztier-" + codec});
  }
  if (!cfg->nbdkit.path.empty()) {
    cfg->servers.push_back({ServerKind::kNbdkit, "sparse", "nbdkit"});
    cfg->servers.push_back({ServerKind::kNbdkitZstd, "zstd", "nbdkit-zstd"});
  }
  return Status::Ok();
}

// The corpora of --corpus-dir, each decompressed into `dir`.
Status LoadCorpora(const std::string& dir, NbdBenchConfig* cfg) {
  ZT_ASSIGN_OR_RETURN(const std::vector<std::string> found,
                      FindCorpusDir(cfg->corpus_dir, kCorpusDirHint));
  for (const std::string& path : found) {
    ZT_ASSIGN_OR_RETURN(corpus::PageSet set, LoadCorpus(path));
    const std::string raw = dir + "/" + set.name();
    std::ofstream out(raw, std::ios::binary);
    out.write(reinterpret_cast<const char*>(set.bytes().data()),
              static_cast<std::streamsize>(set.bytes().size()));
    out.close();
    if (!out) return Status::IoError("cannot write " + raw);
    cfg->corpora.push_back({set.name(), path, set.bytes().size()});
  }
  return Status::Ok();
}

}  // namespace

int RunBenchNbd(std::span<const std::string_view> args) {
  NbdBenchConfig cfg;
  if (auto rc = ParseFlags(args, &cfg)) return *rc;
  auto dir = TempDir::Create("ztier-bench-nbd");
  if (!dir.has_value()) return ReportFailure(kCommand, dir.error().ToString());
  Progress progress;
  Bench b{.cfg = &cfg, .dir = dir->path(), .progress = &progress};
  Status s = FindTools(b.dir, &cfg);
  if (s.ok() && !cfg.nbdcopy.path.empty()) s = LoadCorpora(b.dir, &cfg);
  if (!s.ok()) return ReportFailure(kCommand, s.message());
  std::vector<Variant> variants;
  for (const ServerSpec& spec : cfg.servers) {
    variants.push_back(
        {spec.label, [&](std::size_t run, Samples& out) -> Status {
           if (!cfg.fio.path.empty()) {
             ZT_RETURN_IF_ERROR(FioPart(b, spec, run, out));
           }
           for (const NbdBenchConfig::Corpus& c : cfg.corpora) {
             ZT_RETURN_IF_ERROR(CopyPart(b, spec, c, run, out));
           }
           return Status::Ok();
         }});
  }
  // The machine as the runs start (its round trip is "at the start").
  const MachineInfo machine = GetMachineInfo();
  auto m = RunVariants(
      {.runs = static_cast<std::size_t>(cfg.common.runs), .warmups = 0},
      variants, progress);
  if (!m.has_value()) {
    return ReportFailure(kCommand, "FATAL: " + m.error().ToString());
  }
  return NbdReport(cfg, *m, machine).Finish(kCommand, cfg.common);
}

}  // namespace ztier::tool
