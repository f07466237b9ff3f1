// File: tools/ztier/bench_nbd.cc
//
// `ztier bench nbd` (see bench_nbd.h): parses flags, finds the tools and
// corpora, runs the servers and clients as subprocesses in a private
// temporary folder (bench_proc.h), and reports (bench_nbd_report.h).
#include "bench_nbd.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "bench_harness.h"
#include "bench_fio.h"
#include "bench_proc.h"
#include "bench_nbd_report.h"
#include "corpus/corpus.h"
#include "ctl/control_server.h"
#include "flags.h"
#include "machine_info.h"
#include "progress.h"
#include "serve_cmd.h"
#include "tool_common.h"

namespace ztier::tool {
namespace {

using namespace bench;  // NOLINT: this file is the benchmark's driver
using std::chrono::milliseconds;

constexpr const char kCommand[] = "ztier bench nbd";
constexpr std::uint64_t kMaxArea = 256ull << 20;
constexpr milliseconds kStartTimeout{15'000};
constexpr milliseconds kStopGrace{10'000};
constexpr milliseconds kFillTimeout{600'000};
constexpr milliseconds kCopyTimeout{300'000};

constexpr const char kSynopsis[] =
    "[--runs N] [--seconds S] [--size SIZE] [--codec NAME]... "
    "[--corpus-dir DIR] [--no-nbdkit] [--json FILE] [--plot DIR]";
constexpr const char kAbout[] =
    "`ztier serve` vs. nbdkit's memory plugin (sparse and "
    "allocator=zstd)\nover NBD on Unix sockets: fio IOPS and MB/s of six "
    "jobs (4k randwrite and\nrandread at QD1 and QD32, 128k sequential "
    "write and read at QD8), nbdcopy\nMB/s of each corpus and the memory "
    "it takes, and ratios against targets.\nNeeds fio, nbdcopy and "
    "nbdkit on PATH; a missing one skips its part.";

struct RunningServer {
  const ServerSpec* spec = nullptr;
  std::string uri;
  ServerProcess server;
};

// Starts `spec` with an export of `size` bytes, sockets named after `tag`
// in `dir`, and waits until it accepts.
Result<RunningServer> StartServer(const NbdBenchConfig& cfg,
                                  const ServerSpec& spec,
                                  const std::string& dir,
                                  const std::string& tag, std::uint64_t size) {
  const std::string sock = dir + "/" + tag + ".sock";
  const std::string ctl = dir + "/" + tag + ".ctl";
  std::vector<std::string> argv;
  std::string uri;
  if (spec.kind == ServerKind::kZtier) {
    argv = ZtierServeArgs(cfg.ztier.path, size, spec.codec, sock, ctl);
    uri = NbdUnixUri("zram0", sock);
  } else {
    argv = {cfg.nbdkit.path, "--foreground", "--unix", sock, "memory",
            std::to_string(size)};
    if (spec.kind == ServerKind::kNbdkitZstd) argv.push_back("allocator=zstd");
    uri = "nbd+unix:///?socket=" + sock;
  }
  ZT_ASSIGN_OR_RETURN(
      ServerProcess server,
      StartServerProcess(argv, spec.label, sock,
                         spec.kind == ServerKind::kZtier ? ctl : "",
                         dir + "/" + tag + ".log", dir, kStartTimeout));
  return RunningServer{.spec = &spec, .uri = uri, .server = std::move(server)};
}

void StopServer(RunningServer* server) {
  StopServerProcess(&server->server, kStopGrace, kCommand);
}

// Runs nbdcopy SRC DST; returns its wall time in seconds.
Result<double> RunNbdcopy(const NbdBenchConfig& cfg, const std::string& src,
                          const std::string& dst, const std::string& dir) {
  return bench::RunNbdcopy(cfg.nbdcopy.path, src, dst, dir, kCopyTimeout);
}

// ztier's mem_used_total: column 3 of mm_stat.
Result<std::uint64_t> ZtierMemUsed(const RunningServer& server) {
  auto text = ctl::Request(server.server.ctl, "zram0", "mm_stat", nullptr);
  if (!text.has_value()) {
    return Err(Status::IoError("mm_stat of " + server.spec->label + ": " +
                               text.error().message()));
  }
  std::istringstream fields(*text);
  std::uint64_t v[3] = {0, 0, 0};
  if (!(fields >> v[0] >> v[1] >> v[2])) {
    return Err(Status::Corruption("mm_stat of " + server.spec->label +
                                  ": unexpected text '" + *text + "'"));
  }
  return v[2];
}

// Compares `path` with `want`; an error names the first differing byte.
Status CompareFile(const std::string& path, std::span<const std::byte> want) {
  const std::string got = ReadFileText(path, want.size() + 1);
  if (got.size() != want.size()) {
    return Status::Corruption("copied-out " + path + " has " +
                              std::to_string(got.size()) + " bytes, not " +
                              std::to_string(want.size()));
  }
  if (std::memcmp(got.data(), want.data(), want.size()) == 0) {
    return Status::Ok();
  }
  std::size_t i = 0;
  while (got[i] == static_cast<char>(want[i])) ++i;
  return Status::Corruption("copied-out " + path +
                            " differs from the original at byte " +
                            std::to_string(i) + " (page " +
                            std::to_string(i / 4096) + ")");
}

// Part 1 of one run: start every server, fill, then each job on every
// server in turn.
Status FioRun(const NbdBenchConfig& cfg, const std::string& dir,
              std::size_t run, Progress* progress, NbdResults* results) {
  const std::string prefix = "[run " + std::to_string(run + 1) + "/" +
                             std::to_string(cfg.runs) + "] ";
  std::vector<RunningServer> servers;
  for (std::size_t s = 0; s < cfg.servers.size(); ++s) {
    progress->Update(prefix + "starting " + cfg.servers[s].label);
    ZT_ASSIGN_OR_RETURN(RunningServer server,
                        StartServer(cfg, cfg.servers[s], dir,
                                    "f" + std::to_string(s), cfg.size_bytes));
    servers.push_back(std::move(server));
  }
  for (RunningServer& server : servers) {
    progress->Update(prefix + "fill on " + server.spec->label);
    auto fill = RunFio(FioFillArgs(cfg.fio.path, server.uri, cfg.area_bytes),
                       dir, kFillTimeout);
    if (!fill.has_value()) {
      return Status::IoError("fill of " + server.spec->label + ": " +
                             fill.error().message());
    }
  }
  const auto jobs = StandardJobs();
  const milliseconds job_timeout{(cfg.seconds + 120) * 1000};
  for (std::size_t j = 0; j < jobs.size(); ++j) {
    for (std::size_t s = 0; s < servers.size(); ++s) {
      progress->Update(prefix + JobTitle(jobs[j]) + " on " +
                       servers[s].spec->label);
      auto fig = RunFio(FioJobArgs(cfg.fio.path, jobs[j], servers[s].uri,
                                   cfg.area_bytes, cfg.seconds),
                        dir, job_timeout);
      if (!fig.has_value()) {
        return Status::IoError(std::string(jobs[j].name) + " on " +
                               servers[s].spec->label + ": " +
                               fig.error().message());
      }
      const FioDirection& d = jobs[j].writes ? fig->write : fig->read;
      results->iops[j][s].push_back(d.iops);
      results->mb_s[j][s].push_back(d.bw_bytes / 1e6);
      if (fig->cpu_percent >= 0) {
        results->fio_cpu[j][s].push_back(fig->cpu_percent);
      }
    }
  }
  for (RunningServer& server : servers) StopServer(&server);
  return Status::Ok();
}

// Part 2 of one run: every corpus on every server in turn.
Status CopyRun(const NbdBenchConfig& cfg, const std::string& dir,
               const std::vector<corpus::PageSet>& corpora,
               const std::vector<std::string>& raw_paths, std::size_t run,
               Progress* progress, NbdResults* results) {
  const std::string prefix = "[run " + std::to_string(run + 1) + "/" +
                             std::to_string(cfg.runs) + "] ";
  const std::string out_path = dir + "/copied-out.pages";
  for (std::size_t c = 0; c < corpora.size(); ++c) {
    const std::uint64_t bytes = corpora[c].bytes().size();
    for (std::size_t s = 0; s < cfg.servers.size(); ++s) {
      const ServerSpec& spec = cfg.servers[s];
      const std::string what = corpora[c].name() + " on " + spec.label;
      progress->Update(prefix + "nbdcopy " + what);
      ZT_ASSIGN_OR_RETURN(RunningServer server,
                          StartServer(cfg, spec, dir, "c" + std::to_string(s),
                                      bytes));
      ZT_ASSIGN_OR_RETURN(std::uint64_t rss_before,
                          ProcessRssBytes(server.server.process.pid()));
      ZT_ASSIGN_OR_RETURN(double in_s,
                          RunNbdcopy(cfg, raw_paths[c], server.uri, dir));
      ZT_ASSIGN_OR_RETURN(std::uint64_t rss_after,
                          ProcessRssBytes(server.server.process.pid()));
      const double growth =
          rss_after > rss_before ? static_cast<double>(rss_after - rss_before)
                                 : 0.0;
      double stored = growth;
      if (spec.kind == ServerKind::kZtier) {
        ZT_ASSIGN_OR_RETURN(std::uint64_t used, ZtierMemUsed(server));
        stored = static_cast<double>(used);
      }
      ::unlink(out_path.c_str());
      ZT_ASSIGN_OR_RETURN(double out_s,
                          RunNbdcopy(cfg, server.uri, out_path, dir));
      StopServer(&server);
      if (Status st = CompareFile(out_path, corpora[c].bytes()); !st.ok()) {
        return Status::Corruption(what + ": " + st.message());
      }
      ::unlink(out_path.c_str());
      CopySamples& cs = results->copies[c][s];
      cs.in_mb_s.push_back(static_cast<double>(bytes) / 1e6 / in_s);
      cs.out_mb_s.push_back(static_cast<double>(bytes) / 1e6 / out_s);
      cs.stored_bytes.push_back(stored);
      cs.rss_growth_bytes.push_back(growth);
    }
  }
  return Status::Ok();
}

// The command line into *cfg; the exit status when it is bad (2) or asked
// for --help (0).
std::optional<int> ParseFlags(std::span<const std::string_view> args,
                              NbdBenchConfig* cfg, std::string* plot_dir) {
  std::vector<std::string> codec_flags;
  std::string size_text = "1G";
  std::int64_t runs = 5;
  std::int64_t seconds = 3;
  cfg->corpus_dir = kDefaultCorpusDir;
  FlagSet flags(kCommand, kSynopsis);
  flags.AddInt("runs", &runs, "N",
               "runs; in each, every job and copy on every server (default 5)",
               1, 1000);
  flags.AddInt("seconds", &seconds, "S",
               "fio runtime of each job (default 3; the defaults take ~5-6 "
               "min: 5 runs x 6 jobs x 3 servers x 3 s of fio, plus fills, "
               "copies and server starts)",
               1, 3600);
  flags.AddString("size", &size_text, "SIZE",
                  "device/export size for the fio part (default 1G; K/M/G "
                  "suffixes); jobs and the fill cover the first min(SIZE, "
                  "256M)");
  flags.AddList("codec", &codec_flags, "NAME",
                "ztier codec; each one is a ztier variant (repeatable, or a "
                "comma list; default lz4)");
  AddCorpusDirFlag(flags, &cfg->corpus_dir, ", each copied with nbdcopy");
  flags.AddBool("no-nbdkit", &cfg->no_nbdkit,
                "measure ztier alone (no nbdkit peers, no ratios)");
  AddJsonFlag(flags, &cfg->json_path);
  AddPlotFlag(flags, plot_dir);
  if (auto rc = flags.ParseCommandLine(args, kAbout)) return *rc;
  auto size = ParseSizeFlag(size_text, 1u << 20, "1M");
  if (!size.has_value())
    return ReportUsageError(kCommand, size.error().message());
  cfg->runs = static_cast<std::size_t>(runs);
  cfg->seconds = seconds;
  cfg->size_bytes = *size;
  cfg->area_bytes = std::min(cfg->size_bytes, kMaxArea);
  if (codec_flags.empty()) codec_flags.push_back("lz4");
  if (Status s = AddCodecs(codec_flags, &cfg->codecs); !s.ok()) {
    return ReportUsageError(kCommand, s.message());
  }
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
  const auto find_tool = [&](const char* name, ToolInfo* t) {
    t->path = FindExecutable(name);
    if (!t->path.empty()) t->version = ToolVersion(t->path, dir);
  };
  find_tool("fio", &cfg->fio);
  find_tool("nbdcopy", &cfg->nbdcopy);
  if (!cfg->no_nbdkit) find_tool("nbdkit", &cfg->nbdkit);
  if (cfg->fio.path.empty()) {
    cfg->fio_part = false;
    cfg->notes.push_back("fio not found on PATH: the fio jobs are skipped");
  }
  if (cfg->nbdcopy.path.empty()) {
    cfg->copy_part = false;
    cfg->notes.push_back(
        "nbdcopy not found on PATH: the corpus copies are skipped");
  }
  if (cfg->no_nbdkit) {
    cfg->notes.push_back(
        "--no-nbdkit: ztier alone, no nbdkit peers, no ratios");
  } else if (cfg->nbdkit.path.empty()) {
    cfg->notes.push_back(
        "nbdkit not found on PATH: ztier alone, no nbdkit peers, no ratios");
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

// The corpora of --corpus-dir, each also decompressed into `dir` (its path
// in *raw_paths) for nbdcopy.
Status LoadCorpora(const std::string& dir, NbdBenchConfig* cfg,
                   std::vector<corpus::PageSet>* corpora,
                   std::vector<std::string>* raw_paths) {
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
    raw_paths->push_back(raw);
    corpora->push_back(std::move(set));
  }
  return Status::Ok();
}

}  // namespace

int RunBenchNbd(std::span<const std::string_view> args) {
  NbdBenchConfig cfg;
  std::string plot_dir;
  if (auto rc = ParseFlags(args, &cfg, &plot_dir)) return *rc;
  auto dir = TempDir::Create("ztier-bench-nbd");
  if (!dir.has_value()) return ReportFailure(kCommand, dir.error().ToString());
  if (Status s = FindTools(dir->path(), &cfg); !s.ok()) {
    return ReportFailure(kCommand, s.message());
  }
  std::vector<corpus::PageSet> corpora;
  std::vector<std::string> raw_paths;
  if (cfg.copy_part) {
    Status s = LoadCorpora(dir->path(), &cfg, &corpora, &raw_paths);
    if (!s.ok()) return ReportFailure(kCommand, s.message());
  }

  const MachineInfo machine = GetMachineInfo();
  std::printf("%s\n%s", MachineLine(machine).c_str(), ConfigText(cfg).c_str());
  std::fflush(stdout);
  for (const std::string& n : cfg.notes) {
    if (n.find("not found") != std::string::npos) PrintError(kCommand, n);
  }

  NbdResults results = NbdResults::For(cfg);
  ChartWriter chart_writer(kCommand, plot_dir);
  Progress progress;
  for (std::size_t run = 0; run < cfg.runs; ++run) {
    Status s = Status::Ok();
    if (cfg.fio_part) s = FioRun(cfg, dir->path(), run, &progress, &results);
    if (s.ok() && cfg.copy_part) {
      s = CopyRun(cfg, dir->path(), corpora, raw_paths, run, &progress,
                  &results);
    }
    if (!s.ok()) {
      progress.Clear();
      return ReportFailure(kCommand, "FATAL: run " + std::to_string(run + 1) +
                                         ": " + s.ToString());
    }
  }
  progress.Clear();

  const std::vector<DerivedRatio> ratios = DeriveRatios(cfg, results);
  if (cfg.fio_part) std::printf("\n%s", FioTable(cfg, results).c_str());
  if (cfg.copy_part) std::printf("\n%s", CopyTable(cfg, results).c_str());
  if (cfg.fio_part && !ratios.empty()) std::printf("\n%s", DerivedTable(ratios).c_str());
  std::fflush(stdout);
  if (int rc = FinishJson(kCommand, cfg.json_path, [&](const std::string& p) {
        return WriteNbdJson(p, machine, cfg, results, ratios);
      })) {
    return rc;
  }
  if (!cfg.fio_part) return 0;
  const std::vector<Chart> charts = NbdCharts(cfg, results);
  return chart_writer.Write(charts) ? 0 : 1;
}

}  // namespace ztier::tool
