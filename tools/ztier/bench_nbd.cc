// File: tools/ztier/bench_nbd.cc
//
// `ztier bench nbd` (bench_nbd.h): flags, tools, corpora, and a variant per
// server (bench_harness.h) that runs it (bench_proc.h) under fio and nbdcopy
// and gives the samples bench_nbd_report.h reports.
#include "bench_nbd.h"

#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "bench_nbd_report.h"
#include "corpus/corpus.h"
#include "ctl/control_server.h"
#include "serve_cmd.h"
#include "tool_common.h"

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

// `spec` with an export of `size` bytes, its files DIR/TAG.*, accepting.
Result<ServerProcess> Start(const Bench& b, const ServerSpec& spec,
                            const std::string& tag, std::uint64_t size) {
  const std::string base = b.dir + "/" + tag;
  const bool ztier = spec.kind == ServerKind::kZtier;
  return StartServerProcess(
      ztier ? ZtierServeArgs(b.cfg->ztier.path, size, spec.codec,
                             base + ".sock", base + ".ctl")
            : NbdkitMemoryArgs(b.cfg->nbdkit.path, size, base + ".sock",
                               spec.kind == ServerKind::kNbdkitZstd),
      spec.label, base + ".sock", ztier ? base + ".ctl" : "", base + ".log",
      b.dir, kStart);
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
  std::size_t at = 0;
  while (at < got.size() && at < want.size() && got[at] == want[at]) ++at;
  return Status::Corruption("copied-out " + path + " (" +
                            std::to_string(got.size()) + " bytes) differs " +
                            "from the original in page " +
                            std::to_string(at / 4096));
}

// The fio part of one run on `spec`: fill, then each job.
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

// Corpus `c` copied in and out of `spec`, checked, and its memory.
Status CopyPart(Bench& b, const ServerSpec& spec, std::size_t c,
                std::size_t run, Samples& out) {
  const std::string& name = b.cfg->corpora[c].name;
  const double bytes = static_cast<double>(b.cfg->corpora[c].bytes);
  const std::string& nbdcopy = b.cfg->nbdcopy.path;
  const std::string raw = b.dir + "/" + name, copy = b.dir + "/copied-out";
  b.Step(run, spec, "nbdcopy " + name);
  ZT_ASSIGN_OR_RETURN(ServerProcess server,
                      Start(b, spec, "copy", b.cfg->corpora[c].bytes));
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
  // No warm-up run: every run starts each server afresh.
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
  cfg->fio = FindTool("fio", dir);
  cfg->nbdcopy = FindTool("nbdcopy", dir);
  if (!cfg->no_nbdkit) cfg->nbdkit = FindTool("nbdkit", dir);
  const auto skip = [&](bool missing, const std::string& note) {
    if (!missing) return;
    cfg->notes.push_back(note);
    if (note.find("not found") != std::string::npos) PrintError(kCommand, note);
  };
  skip(cfg->fio.path.empty(),
       "fio not found on PATH: the fio jobs are skipped");
  skip(cfg->nbdcopy.path.empty(),
       "nbdcopy not found on PATH: the corpus copies are skipped");
  skip(
      cfg->nbdkit.path.empty(),
      std::string(cfg->no_nbdkit ? "--no-nbdkit" : "nbdkit not found on PATH") +
          ": ztier alone, no nbdkit peers, no ratios");
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
           for (std::size_t c = 0; c < cfg.corpora.size(); ++c) {
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
