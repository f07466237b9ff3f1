// File: tools/ztier/bench_writeback.cc
//
// `ztier bench writeback` (see bench_writeback.h): parses flags, loads the
// corpus, finds fio, runs the alternating measurement loop (one measurement
// is writeback_run.h's), and reports (bench_writeback_report.h).
#include "bench_writeback.h"

#include <signal.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "bench_harness.h"
#include "bench_proc.h"
#include "bench_writeback_report.h"
#include "corpus/corpus.h"
#include "flags.h"
#include "machine_info.h"
#include "plot.h"
#include "progress.h"
#include "tool_common.h"
#include "writeback_run.h"

namespace ztier::tool {
namespace {

namespace fs = std::filesystem;

constexpr const char kCommand[] = "ztier bench writeback";
constexpr const char kImageName[] = "ztier-bench-writeback.img";
constexpr const char kFioFileName[] = "ztier-bench-fio.img";
constexpr const char kSynopsis[] =
    "[--corpus FILE] [--size SIZE] [--dir DIR] [--runs N] [--codec NAME] "
    "[--batch-size N] [--compressed] [--json FILE] [--plot DIR]";
constexpr const char kAbout[] =
    "zram-style writeback of a filled store to a\nbacking file, one "
    "page at a time (one synchronous 4 KiB pwrite per page, zram\nbefore "
    "its writeback batching series) against batched io_uring writeback,\n"
    "with fio's sequential-write bandwidth on the same file system as the "
    "limit.\n"
    "--dir should be on the file system under test. Without fio on PATH "
    "the fio\npart is skipped.";

// ---- the files in --dir, removed at the end, on error and on a signal ----

char g_signal_paths[2][4096];

void RemoveFilesAndDie(int sig) {
  for (const char* p : g_signal_paths) {
    if (p[0] != '\0') ::unlink(p);
  }
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

class BenchFiles {
 public:
  BenchFiles(const std::string& image, const std::string& fio)
      : image_(image), fio_(fio) {
    std::snprintf(g_signal_paths[0], sizeof(g_signal_paths[0]), "%s",
                  image.c_str());
    std::snprintf(g_signal_paths[1], sizeof(g_signal_paths[1]), "%s",
                  fio.c_str());
    struct sigaction sa {};
    sa.sa_handler = RemoveFilesAndDie;
    for (int sig : {SIGINT, SIGTERM, SIGHUP}) ::sigaction(sig, &sa, nullptr);
  }
  ~BenchFiles() {
    ::unlink(image_.c_str());
    ::unlink(fio_.c_str());
    if (!scratch_.empty()) {
      std::error_code ec;
      fs::remove_all(scratch_, ec);
    }
  }
  BenchFiles(const BenchFiles&) = delete;
  BenchFiles& operator=(const BenchFiles&) = delete;

  // A private folder in the system's temporary folder for fio's output.
  Status MakeScratch() {
    ZT_ASSIGN_OR_RETURN(scratch_, MakeTempDir("ztier-bench-writeback"));
    return Status::Ok();
  }
  const std::string& scratch() const { return scratch_; }

 private:
  std::string image_;
  std::string fio_;
  std::string scratch_;
};

// ---- flags ----

struct Flags {
  std::string corpus = kDefaultCorpusFile;
  std::string size = "1G";
  std::string dir = "/var/tmp";
  std::int64_t runs = 5;
  std::string codec = "lz4";
  std::int64_t batch_size = 32;
  bool compressed = false;
  std::string json;
  std::string plot;
};

void DeclareFlags(FlagSet& flags, Flags* f) {
  AddCorpusFileFlag(flags, &f->corpus,
                    "pages to fill the store with, repeated as needed");
  flags.AddString("size", &f->size, "SIZE",
                  "store and backing file size (default 1G; K/M/G suffixes; "
                  "at least 1M)");
  flags.AddString("dir", &f->dir, "DIR",
                  "where the backing file and fio's file go; put it on the "
                  "file system under test (default /var/tmp; needs SIZE "
                  "free; the files are removed at the end)");
  flags.AddInt("runs", &f->runs, "N",
               "measured runs, after one warm-up run; variants alternate "
               "within each (default 5)",
               1, 1000);
  flags.AddString("codec", &f->codec, "NAME", "store codec (default lz4)");
  flags.AddInt("batch-size", &f->batch_size, "N",
               "IOs in flight for the batched variant (default 32)", 1, 1024);
  flags.AddBool("compressed", &f->compressed,
                "compressed writeback: write the compressed objects");
  AddJsonFlag(flags, &f->json);
  AddPlotFlag(flags, &f->plot);
}

// Checks the flag values and fills *cfg from them. Returns 0 when all is
// well, else the exit status (the message printed).
int CheckFlags(const Flags& f, WritebackBenchConfig* cfg) {
  auto size = ParseSizeFlag(f.size, 1u << 20, "1M");
  if (!size.has_value()) {
    PrintError(kCommand, size.error().message());
    return 2;
  }
  if (Status s = CheckCodecName(f.codec); !s.ok()) {
    PrintError(kCommand, s.message());
    return 2;
  }
  std::error_code ec;
  if (!fs::is_directory(f.dir, ec)) {
    PrintError(kCommand,
               "--dir " + f.dir + AbsoluteNote(f.dir) +
                   ": no such folder. Pass a folder on the file system under "
                   "test with --dir DIR.");
    return 1;
  }
  cfg->size_bytes = *size;
  cfg->dir = f.dir;
  cfg->image_path = (fs::path(f.dir) / kImageName).string();
  cfg->fio_file_path = (fs::path(f.dir) / kFioFileName).string();
  cfg->runs = static_cast<std::size_t>(f.runs);
  cfg->codec = f.codec;
  cfg->batch_size = static_cast<std::size_t>(f.batch_size);
  cfg->compressed = f.compressed;
  cfg->corpus_path = f.corpus;
  cfg->json_path = f.json;
  return 0;
}

// The backing file and fio's file exist one at a time: SIZE must be free.
Status CheckFreeSpace(const WritebackBenchConfig& cfg) {
  struct statvfs st {};
  if (::statvfs(cfg.dir.c_str(), &st) != 0) {
    return PosixError("statvfs --dir " + cfg.dir, errno);
  }
  const std::uint64_t avail =
      static_cast<std::uint64_t>(st.f_bavail) * st.f_frsize;
  if (avail < cfg.size_bytes) {
    return Status::ResourceExhausted(
        "--dir " + cfg.dir + " has " + std::to_string(avail >> 20) +
        " MiB free; the benchmark needs --size (" +
        std::to_string(cfg.size_bytes >> 20) + " MiB)");
  }
  return Status::Ok();
}

// ---- measuring ----

Status MeasureVariant(const WritebackBenchConfig& cfg,
                      const corpus::PageSet& corpus, WbVariant v,
                      const std::string& scratch, const std::string& label,
                      Progress* progress, WritebackRunFigures* out) {
  const std::string name(WbVariantName(v));
  if (v == WbVariant::kFio) {
    progress->Update(label + "fio sequential write");
    auto f = RunFioSeqWrite({.fio_path = cfg.fio_path,
                             .file_path = cfg.fio_file_path,
                             .size_bytes = cfg.size_bytes,
                             .scratch_dir = scratch});
    if (!f.has_value()) return f.error();
    out->fio = *f;
    return Status::Ok();
  }
  const bool sync = v == WbVariant::kSync;
  WritebackRunConfig rc{.image_path = cfg.image_path,
                        .size_bytes = cfg.size_bytes,
                        .codec = cfg.codec,
                        .in_flight = sync ? 1 : cfg.batch_size,
                        .max_io_pages = sync ? 1 : cfg.max_io_pages,
                        .compressed = cfg.compressed};
  auto s = RunStoreWriteback(rc, corpus, [&](std::string_view phase) {
    progress->Update(label + name + ": " + std::string(phase));
  });
  if (!s.has_value()) {
    return Status(s.error().code(),
                  name + " writeback: " + s.error().message());
  }
  (sync ? out->sync : out->batched) = *s;
  return Status::Ok();
}

// One run (run 0: the warm-up): every variant in this run's order.
Status MeasureRun(const WritebackBenchConfig& cfg,
                  const corpus::PageSet& corpus, std::size_t run,
                  const std::string& scratch, Progress* progress,
                  WritebackRunFigures* out) {
  const bool warm_up = run == 0;
  out->run = run;
  out->order = RunOrder(warm_up ? 0 : run - 1, !cfg.fio_path.empty());
  const std::string label = "[" + RunLabel(run, cfg.runs) + "] ";
  for (WbVariant v : out->order) {
    ZT_RETURN_IF_ERROR(
        MeasureVariant(cfg, corpus, v, scratch, label, progress, out));
  }
  return Status::Ok();
}

}  // namespace

int RunBenchWriteback(std::span<const std::string_view> args) {
  Flags f;
  FlagSet flags(kCommand, kSynopsis);
  DeclareFlags(flags, &f);
  if (auto rc = flags.ParseCommandLine(args, kAbout)) return *rc;
  WritebackBenchConfig cfg;
  if (int rc = CheckFlags(f, &cfg); rc != 0) return rc;
  if (Status s = CheckFreeSpace(cfg); !s.ok()) {
    PrintError(kCommand, s.message());
    return 1;
  }
  auto corpus = LoadCorpus(cfg.corpus_path);
  if (!corpus.has_value()) {
    PrintError(kCommand, corpus.error().message());
    return 1;
  }
  cfg.corpus_name = corpus->name();
  cfg.corpus_pages = corpus->size();

  BenchFiles files(cfg.image_path, cfg.fio_file_path);
  if (Status s = files.MakeScratch(); !s.ok()) {
    PrintError(kCommand, s.ToString());
    return 1;
  }
  cfg.fio_path = bench::FindExecutable("fio");
  if (!cfg.fio_path.empty()) {
    cfg.fio_version = bench::ToolVersion(cfg.fio_path, files.scratch());
    cfg.fio_args = FioSeqWriteArgs({.fio_path = cfg.fio_path,
                                    .file_path = cfg.fio_file_path,
                                    .size_bytes = cfg.size_bytes});
  }

  const MachineInfo machine = GetMachineInfo();
  std::printf("%s\n%s", MachineLine(machine).c_str(),
              WritebackConfigText(cfg).c_str());
  std::fflush(stdout);
  if (cfg.fio_path.empty()) {
    PrintError(kCommand,
               "fio not found on PATH: the fio sequential write is not "
               "measured");
  }

  ChartWriter charts(kCommand, f.plot);
  std::vector<WritebackRunFigures> runs;
  Progress progress;
  for (std::size_t run = 0; run <= cfg.runs; ++run) {
    WritebackRunFigures fig;
    Status s = MeasureRun(cfg, *corpus, run, files.scratch(), &progress, &fig);
    if (!s.ok()) {
      progress.Clear();
      return ReportFailure(
          kCommand, "FATAL: " + RunLabel(run, cfg.runs) + ": " + s.ToString());
    }
    if (run > 0) runs.push_back(std::move(fig));
  }
  progress.Clear();

  std::printf("\n%s", WritebackResultText(cfg, runs).c_str());
  std::fflush(stdout);
  if (int rc = FinishJson(kCommand, cfg.json_path, [&](const std::string& p) {
        return WriteWritebackJson(p, machine, cfg, runs);
      })) {
    return rc;
  }
  const Chart chart = WritebackChart(cfg, runs);
  return charts.Write({&chart, 1}) ? 0 : 1;
}

}  // namespace ztier::tool
