// File: tools/ztier/bench_zram_compare.cc
//
// `ztier bench zram-compare` (see bench_zram_compare.h): parses flags, finds
// the kernel device, the tools and the corpora, runs part (a) and one
// variant per codec pair of part (b) through RunVariants (bench_harness.h),
// and reports (bench_zram_compare_report.h).
#include "bench_zram_compare.h"

#include <algorithm>
#include <csignal>
#include <cstring>
#include <fstream>
#include <optional>

#include "bench_proc.h"
#include "bench_zram_compare_io.h"
#include "bench_zram_compare_kernel.h"
#include "bench_zram_compare_report.h"
#include "flags.h"
#include "progress.h"
#include "serve_cmd.h"
#include "tool_common.h"
#include "ztier/page_store.h"

namespace ztier::tool {
namespace {

using namespace zramcmp;  // NOLINT: this file is the benchmark's driver
using std::chrono::milliseconds;

constexpr const char kCommand[] = "ztier bench zram-compare";
constexpr std::uint64_t kBlock = kMaxBlockPages * kPageSize;
constexpr std::uint64_t kVerifyStride = 61;  // pages between checked pages
constexpr milliseconds kStartTimeout{15'000};
constexpr milliseconds kStopGrace{10'000};
constexpr milliseconds kCopyTimeout{300'000};

constexpr const char kSynopsis[] =
    "[--runs N] [--seconds S] [--size SIZE] [--codec NAME]... "
    "[--jobs NAME]... [--paths NAME]... [--threads N] [--corpus-dir DIR] "
    "[--corpus-pages N] [--zram-dev PATH] [--json FILE]";
constexpr const char kAbout[] =
    "the kernel's zram (/dev/zram0) against ztier on the same corpus data:\n"
    "(a) mm_stat after writing each corpus; (b) fio-style jobs through the\n"
    "library, pread/pwrite, io_uring, fio and `ztier serve` over NBD. A\n"
    "missing or busy kernel device is left alone. Run as root.";

// SIGINT or SIGTERM: the runs stop after the measurement in progress, so
// that the kernel device is still reset and the servers stopped.
volatile std::sig_atomic_t g_interrupted = 0;

// Everything the runs need.
struct Bench {
  ZramCompareConfig cfg;
  std::optional<KernelZram> zram;  // empty: the kernel side is skipped
  std::vector<corpus::PageSet> corpora;
  std::vector<DataPages> corpus_data;  // part (a), one per corpus
  std::optional<DataPages> data;       // part (b): every corpus
  std::string dir;                     // the temporary folder
  std::string area_file;  // part (b)'s fill as a file, for nbdcopy
  Progress progress;
};

// Fills the area of `t` with `data` (untimed), then checks every
// `stride`-th page.
Status Fill(const IoTarget& t, std::uint64_t area, std::size_t threads,
            const DataPages& data, std::uint64_t stride) {
  auto r = RunIo(t, {.random = false, .writes = true,
                     .block_bytes = static_cast<std::uint32_t>(kBlock),
                     .depth = 8, .threads = threads, .area_bytes = area,
                     .seconds = 0},
                 data);
  return r.has_value() ? VerifyArea(t, area, data, stride) : r.error();
}

// The mm_stat figures of one side (MmStat or PageStoreStats) into `s`.
template <typename Stats>
void AddMm(Samples& s, std::size_t c, std::size_t p, char side,
           const Stats& st) {
  const std::pair<const char*, std::uint64_t> f[] = {
      {"compr", st.compr_data_size}, {"used", st.mem_used_total},
      {"huge", st.huge_pages}, {"same", st.same_pages}};
  for (const auto& [name, v] : f) {
    s.Add(MmFigure(c, p, side, name), static_cast<double>(v));
  }
}

// Part (a), kernel: corpus `c` on a fresh device with pair `p`'s codec.
Status KernelMm(Bench& b, std::size_t c, std::size_t p, Samples& s) {
  KernelZram& zram = *b.zram;
  const std::uint64_t bytes = b.cfg.corpora[c].pages * kPageSize;
  ZT_RETURN_IF_ERROR(zram.Init(b.cfg.pairs[p].kernel, bytes));
  ZT_RETURN_IF_ERROR(
      Fill({.path = zram.dev_path()}, bytes, 1, b.corpus_data[c], 1));
  ZT_ASSIGN_OR_RETURN(MmStat mm, zram.ReadMmStat());
  AddMm(s, c, p, 'k', mm);
  return zram.Reset();
}

// Part (a), ztier: corpus `c` in a fresh PageStore with pair `p`'s codec,
// its figures for every pair with that codec.
Status ZtierMm(Bench& b, std::size_t c, std::size_t p, Samples& s) {
  const std::size_t pages = b.cfg.corpora[c].pages;
  ZT_ASSIGN_OR_RETURN(std::unique_ptr<PageStore> store,
                      PageStore::Create({.num_pages = pages,
                                         .codec = b.cfg.pairs[p].ztier}));
  for (std::size_t i = 0; i < pages; ++i) {
    ZT_RETURN_IF_ERROR(store->Store(i, b.corpora[c].page(i)));
  }
  const PageStoreStats st = store->Stats();
  const double meta = static_cast<double>(store->pool().Stats().metadata_bytes);
  alignas(8) std::byte out[kPageSize];
  for (std::size_t i = 0; i < pages; ++i) {
    ZT_RETURN_IF_ERROR(store->Load(i, MutablePage(out, kPageSize)));
    if (std::memcmp(out, b.corpora[c].page(i).data(), kPageSize) != 0) {
      return Status::Corruption("page " + std::to_string(i) +
                                " reads back different");
    }
  }
  for (std::size_t q = p; q < b.cfg.pairs.size(); ++q) {
    if (b.cfg.pairs[q].ztier != b.cfg.pairs[p].ztier) continue;
    AddMm(s, c, q, 'z', st);
    s.Add(MmFigure(c, q, 'z', "meta"), meta);
  }
  return Status::Ok();
}

// Runs `f` unless interrupted, saying `what` on the progress line and
// naming it in an error.
template <typename F>
Status Step(Bench& b, const std::string& what, F f) {
  if (g_interrupted != 0) {
    return Status::FailedPrecondition("interrupted by a signal");
  }
  b.progress.Update(what);
  const Status st = f();
  return st.ok() ? st : Status::IoError(what + ": " + st.ToString());
}

// Part (a) of one run: every corpus, every pair; ztier once per codec.
Status MmRun(Bench& b, std::size_t run, Samples& s) {
  for (std::size_t c = 0; c < b.cfg.corpora.size(); ++c) {
    for (std::size_t p = 0; p < b.cfg.pairs.size(); ++p) {
      const CodecPair& pair = b.cfg.pairs[p];
      const std::string what = RunLabel(run, b.cfg.bench.runs) +
                               ": mm_stat " + b.cfg.corpora[c].name + " ";
      if (b.zram.has_value() && pair.kernel_offered) {
        ZT_RETURN_IF_ERROR(Step(b, what + "kernel " + pair.kernel,
                                [&] { return KernelMm(b, c, p, s); }));
      }
      if (b.cfg.MeasuresZtier(p)) {
        ZT_RETURN_IF_ERROR(Step(b, what + "ztier " + pair.ztier,
                                [&] { return ZtierMm(b, c, p, s); }));
      }
    }
  }
  return Status::Ok();
}

// The devices of one codec pair in part (b); torn down when destroyed.
struct PairDevices {
  KernelZram* zram = nullptr;  // set once initialised
  std::unique_ptr<Device> lib;
  std::optional<bench::ServerProcess> nbd;
  std::string uri;
  ~PairDevices() {
    if (nbd.has_value()) bench::StopServerProcess(&*nbd, kStopGrace, kCommand);
    lib.reset();
    if (zram != nullptr) (void)zram->Reset();
  }
};

Status SetUpPair(Bench& b, const CodecPair& pair, bool kernel,
                 bool ztier, const std::string& prefix, PairDevices* d) {
  const ZramCompareConfig& cfg = b.cfg;
  const std::size_t threads = cfg.cases.back().threads;
  if (kernel) {
    b.progress.Update(prefix + "fill kernel " + pair.kernel);
    d->zram = &*b.zram;
    ZT_RETURN_IF_ERROR(b.zram->Init(pair.kernel, cfg.area_bytes));
    ZT_RETURN_IF_ERROR(Fill({.path = b.zram->dev_path()}, cfg.area_bytes,
                            threads, *b.data, kVerifyStride));
  }
  if (ztier && cfg.Measures(IoPath::kZtierLib)) {
    b.progress.Update(prefix + "fill ztier-lib " + pair.ztier);
    d->lib = std::make_unique<Device>(
        "zram0", DeviceDefaults{.comp_algorithm = pair.ztier});
    ZT_RETURN_IF_ERROR(d->lib->SetDisksize(cfg.area_bytes));
    ZT_RETURN_IF_ERROR(Fill({.device = d->lib.get()}, cfg.area_bytes,
                            threads, *b.data, kVerifyStride));
  }
  if (ztier && cfg.Measures(IoPath::kZtierNbd)) {
    b.progress.Update(prefix + "fill ztier-nbd " + pair.ztier);
    const std::string sock = b.dir + "/serve.sock", ctl = b.dir + "/serve.ctl";
    ZT_ASSIGN_OR_RETURN(
        d->nbd, bench::StartServerProcess(
                    bench::ZtierServeArgs(cfg.ztier.path, cfg.area_bytes,
                                          pair.ztier, sock, ctl),
                    "ztier-nbd " + pair.ztier, sock, ctl, b.dir + "/serve.log",
                    b.dir, kStartTimeout));
    d->uri = NbdUnixUri("zram0", sock);
    auto copied = bench::RunNbdcopy(cfg.nbdcopy.path, b.area_file, d->uri,
                                    b.dir, kCopyTimeout);
    if (!copied.has_value()) return copied.error();
  }
  return Status::Ok();
}

// One measurement of case `c` on `path`: its iops and mb_s into `s`.
Status Measure(Bench& b, const PairDevices& d, IoPath path,
               std::size_t c, Samples& s) {
  const ZramCompareConfig& cfg = b.cfg;
  const IoCase& io = cfg.cases[c];
  const std::string dev = b.zram.has_value() ? b.zram->dev_path() : "";
  double iops, mb_s;
  if (path == IoPath::kKernelFio || path == IoPath::kZtierNbd) {
    ZT_ASSIGN_OR_RETURN(
        bench::FioFigures fig,
        bench::RunFio(FioArgs(cfg.fio.path, io.job, io.threads, cfg.area_bytes,
                              cfg.seconds, d.uri,
                              path == IoPath::kKernelFio ? dev : ""),
                      b.dir, milliseconds((cfg.seconds + 120) * 1000)));
    const bench::FioDirection& f = io.job.writes ? fig.write : fig.read;
    iops = f.iops;
    mb_s = f.bw_bytes / 1e6;
  } else {
    IoPattern p = PatternFor(io.job, io.threads, cfg.area_bytes, cfg.seconds);
    p.sync = path == IoPath::kKernelSync;
    const IoTarget t{.path = dev, .device = path == IoPath::kZtierLib
                                                ? d.lib.get()
                                                : nullptr};
    ZT_ASSIGN_OR_RETURN(IoResult r, RunIo(t, p, *b.data));
    iops = r.iops();
    mb_s = r.mb_s();
  }
  s.Add(IoFigure(c, path, "iops"), iops);
  s.Add(IoFigure(c, path, "mb_s"), mb_s);
  return Status::Ok();
}

// Whether pair `p` measures its kernel (or ztier) side in part (b).
bool PairSide(const Bench& b, std::size_t p, bool kernel) {
  return (kernel ? b.zram.has_value() && b.cfg.pairs[p].kernel_offered
                 : b.cfg.MeasuresZtier(p)) &&
         std::any_of(std::begin(kIoPaths), std::end(kIoPaths), [&](IoPath x) {
           return IsKernelPath(x) == kernel && b.cfg.Measures(x);
         });
}

// Part (b) of one run for pair `p`: fresh devices, then every case on every
// path in turn.
Status PairRun(Bench& b, std::size_t p, std::size_t run, Samples& s) {
  const ZramCompareConfig& cfg = b.cfg;
  const CodecPair& pair = cfg.pairs[p];
  const bool kernel = PairSide(b, p, true), ztier = PairSide(b, p, false);
  const std::string prefix =
      RunLabel(run, cfg.bench.runs) + ": " + PairName(pair) + ": ";
  PairDevices d;
  ZT_RETURN_IF_ERROR(SetUpPair(b, pair, kernel, ztier, prefix, &d));
  for (std::size_t c = 0; c < cfg.cases.size(); ++c) {
    for (IoPath path : kIoPaths) {
      if (!cfg.Measures(path) || !(IsKernelPath(path) ? kernel : ztier)) {
        continue;
      }
      ZT_RETURN_IF_ERROR(
          Step(b,
               prefix + CaseTitle(cfg.cases[c]) + " on " +
                   std::string(IoPathName(path)),
               [&] { return Measure(b, d, path, c, s); }));
    }
  }
  if (d.zram == nullptr) return Status::Ok();
  d.zram = nullptr;
  return b.zram->Reset();
}

// Checks `flags` against `names` ("unknown WHAT 'NAME'"); the indexes of
// the names asked for (all when none), in the order of `names`.
Result<std::vector<std::size_t>> Select(const std::vector<std::string>& names,
                                        const std::vector<std::string>& flags,
                                        std::string_view what) {
  for (const std::string& f : flags) {
    if (std::find(names.begin(), names.end(), f) == names.end()) {
      return Err(Status::InvalidArgument("unknown " + std::string(what) +
                                         " '" + f + "' (see --help)"));
    }
  }
  std::vector<std::size_t> out;
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (flags.empty() ||
        std::find(flags.begin(), flags.end(), names[i]) != flags.end()) {
      out.push_back(i);
    }
  }
  return out;
}

// --codec, --jobs (reads first), --threads, --paths and --size into `cfg`.
Status ParseChoices(const std::vector<std::vector<std::string>>& lists,
                    std::int64_t threads, const std::string& size_text,
                    ZramCompareConfig* cfg) {
  const std::vector<std::string> kernel = {"lz4", "lzo-rle", "lzo"};
  ZT_ASSIGN_OR_RETURN(const std::vector<std::size_t> codecs,
                      Select(kernel, lists[0], "kernel codec"));
  for (std::size_t i : codecs) {
    cfg->pairs.push_back({kernel[i], i == 0 ? "lz4" : "lzo"});
    ZT_RETURN_IF_ERROR(CheckCodecName(cfg->pairs.back().ztier));
  }
  const std::span<const bench::NbdJob> standard = bench::StandardJobs();
  std::vector<std::string> names;
  for (const bench::NbdJob& j : standard) names.emplace_back(j.name);
  ZT_ASSIGN_OR_RETURN(const std::vector<std::size_t> jobs,
                      Select(names, lists[1], "job"));
  for (bool writes : {false, true}) {
    for (std::size_t j : jobs) {
      if (standard[j].writes != writes) continue;
      cfg->cases.push_back({standard[j], 1});
      if (threads > 1) {
        cfg->cases.push_back({standard[j], static_cast<std::size_t>(threads)});
      }
    }
  }
  names.clear();
  for (IoPath p : kIoPaths) names.emplace_back(IoPathName(p));
  ZT_ASSIGN_OR_RETURN(const std::vector<std::size_t> paths,
                      Select(names, lists[2], "path"));
  for (std::size_t p : paths) cfg->paths.push_back(kIoPaths[p]);
  ZT_ASSIGN_OR_RETURN(const std::uint64_t size,
                      ParseSizeFlag(size_text, 1u << 20, "1M"));
  const std::uint64_t unit = kBlock * static_cast<std::uint64_t>(threads);
  cfg->area_bytes = size / unit * unit;
  if (cfg->area_bytes == 0) {
    return Status::InvalidArgument("--size " + size_text +
                                   " is less than 128 KiB per thread");
  }
  return Status::Ok();
}

// The command line into *cfg; the exit status when it is bad (2) or asked
// for --help (0).
std::optional<int> ParseFlags(std::span<const std::string_view> args,
                              unsigned cores, ZramCompareConfig* cfg) {
  std::vector<std::string> codec_flags, job_flags, path_flags;
  std::string size_text = "256M";
  std::int64_t seconds = 1, threads = cores, corpus_pages = 0;
  cfg->corpus_dir = kDefaultCorpusDir;
  cfg->zram_dev = "/dev/zram0";
  FlagSet flags(kCommand, kSynopsis);
  flags.AddInt("runs", &cfg->bench.runs, "N",
               "measured runs, after one warm-up run (default 5)", 1, 1000);
  flags.AddInt("seconds", &seconds, "S",
               "time of each IO job on each path (default 1)", 1, 3600);
  flags.AddString("size", &size_text, "SIZE",
                  "the area (disksize) of part (b) (default 256M; K/M/G)");
  flags.AddList("codec", &codec_flags, "NAME",
                "kernel codecs: lz4, lzo-rle, lzo (default all)");
  flags.AddList("jobs", &job_flags, "NAME",
                "part (b) jobs: randwrite-4k-qd1, randwrite-4k-qd32, "
                "randread-4k-qd1, randread-4k-qd32, write-128k-qd8, "
                "read-128k-qd8 (default all)");
  flags.AddList("paths", &path_flags, "NAME",
                "part (b) paths: kernel-io_uring, ztier-lib, kernel-psync, "
                "kernel-fio, ztier-nbd (default all)");
  flags.AddInt("threads", &threads, "N",
               "the second thread count (default: online cores; 1: none)", 1,
               1024);
  AddCorpusDirFlag(flags, &cfg->corpus_dir);
  flags.AddInt("corpus-pages", &corpus_pages, "N",
               "the first N pages of each corpus (default 0: all)", 0,
               INT64_MAX);
  flags.AddString("zram-dev", &cfg->zram_dev, "PATH",
                  "the kernel device (default /dev/zram0)");
  AddJsonFlag(flags, &cfg->bench.json);
  if (auto rc = flags.ParseCommandLine(args, kAbout)) return *rc;
  cfg->seconds = seconds;
  cfg->corpus_pages = static_cast<std::size_t>(corpus_pages);
  const Status s = ParseChoices({codec_flags, job_flags, path_flags}, threads,
                                size_text, cfg);
  if (!s.ok()) return ReportUsageError(kCommand, s.message());
  return std::nullopt;
}

void Note(ZramCompareConfig& cfg, std::string text) {
  PrintError(kCommand, text);
  cfg.notes.push_back(std::move(text));
}

// The versions of ztier, fio and nbdcopy; a note for each one missing.
void FindTools(Bench& b) {
  b.cfg.ztier.path = bench::SelfExecutable();
  b.cfg.ztier.version = bench::ToolVersion(b.cfg.ztier.path, b.dir);
  for (auto [name, tool] : {std::pair{"fio", &b.cfg.fio},
                            std::pair{"nbdcopy", &b.cfg.nbdcopy}}) {
    tool->path = bench::FindExecutable(name);
    if (!tool->path.empty()) {
      tool->version = bench::ToolVersion(tool->path, b.dir);
    } else {
      Note(b.cfg, std::string(name) + " not found on PATH: the paths that "
                                      "need it are skipped");
    }
  }
}

// The corpora of --corpus-dir and their data: one per corpus for part (a),
// all of them for part (b).
Status LoadCorpora(Bench& b) {
  ZT_ASSIGN_OR_RETURN(const std::vector<std::string> paths,
                      FindCorpusDir(b.cfg.corpus_dir, kCorpusDirHint));
  std::vector<const corpus::PageSet*> all;
  for (const std::string& path : paths) {
    ZT_ASSIGN_OR_RETURN(corpus::PageSet set, LoadCorpus(path));
    const corpus::PageSet* one[] = {&set};
    auto data = DataPages::From(one, b.cfg.corpus_pages);
    if (!data.has_value()) {
      return Status::InvalidArgument("corpus " + path + ": " +
                                     data.error().message());
    }
    b.cfg.corpora.push_back({set.name(), path, data->count()});
    b.corpus_data.push_back(std::move(*data));
    b.corpora.push_back(std::move(set));
  }
  for (const corpus::PageSet& s : b.corpora) all.push_back(&s);
  ZT_ASSIGN_OR_RETURN(DataPages data, DataPages::From(all, b.cfg.corpus_pages));
  b.cfg.data_pages = data.count();
  b.data.emplace(std::move(data));
  if (!b.cfg.Measures(IoPath::kZtierNbd)) return Status::Ok();
  b.area_file = b.dir + "/area.pages";  // part (b)'s fill, for nbdcopy
  std::ofstream out(b.area_file, std::ios::binary);
  for (std::uint64_t p = 0; p < b.cfg.area_bytes / kPageSize; ++p) {
    out.write(reinterpret_cast<const char*>(b.data->ForAreaPage(p)),
              kPageSize);
  }
  out.close();
  return out ? Status::Ok() : Status::IoError("cannot write " + b.area_file);
}

// The kernel device when it can be used; else its state and a note.
void OpenKernel(Bench& b) {
  ZramCompareConfig& cfg = b.cfg;
  auto z = KernelZram::Open(cfg.zram_dev);
  if (!z.has_value()) {
    const StatusCode code = z.error().code();
    cfg.kernel_state = code == StatusCode::kNotFound ? "missing"
                       : code == StatusCode::kBusy   ? "busy"
                                                     : "unusable";
    cfg.kernel_message = z.error().message();
    Note(cfg, cfg.zram_dev + " " + cfg.kernel_state + ": " +
                  cfg.kernel_message +
                  "; the kernel side is skipped, ztier is measured alone");
    return;
  }
  cfg.kernel_state = "used";
  cfg.kernel_algorithms = z->algorithms();
  for (CodecPair& p : cfg.pairs) {
    p.kernel_offered =
        std::find(cfg.kernel_algorithms.begin(), cfg.kernel_algorithms.end(),
                  p.kernel) != cfg.kernel_algorithms.end();
    if (!p.kernel_offered) {
      Note(cfg, "the kernel's zram does not offer " + p.kernel + ": ztier " +
                    p.ztier + " is measured alone");
    }
  }
  b.zram.emplace(std::move(*z));
}

// The variants of one run: part (a), then part (b) per codec pair.
std::vector<Variant> Variants(Bench& b) {
  std::vector<Variant> v = {
      {"mm_stat", [&b](std::size_t run, Samples& s) { return MmRun(b, run, s); }}};
  for (std::size_t p = 0; !b.cfg.cases.empty() && p < b.cfg.pairs.size();
       ++p) {
    if (!PairSide(b, p, true) && !PairSide(b, p, false)) continue;
    v.push_back({PairName(b.cfg.pairs[p]), [&b, p](std::size_t run,
                                                   Samples& s) {
                   return PairRun(b, p, run, s);
                 }});
  }
  return v;
}

}  // namespace

int RunBenchZramCompare(std::span<const std::string_view> args) {
  const MachineInfo machine = GetMachineInfo();
  Bench b;
  if (auto rc = ParseFlags(args, machine.cores, &b.cfg)) return *rc;
  auto temp = TempDir::Create("ztier-bench-zram-compare");
  if (!temp.has_value()) return ReportFailure(kCommand, temp.error().ToString());
  b.dir = temp->path();
  FindTools(b);
  if (Status s = LoadCorpora(b); !s.ok()) {
    return ReportFailure(kCommand, s.message());
  }
  OpenKernel(b);
  const std::vector<Variant> variants = Variants(b);
  auto* const old_int = std::signal(SIGINT, [](int) { g_interrupted = 1; });
  auto* const old_term = std::signal(SIGTERM, [](int) { g_interrupted = 1; });
  auto m = RunVariants(
      {.runs = static_cast<std::size_t>(b.cfg.bench.runs), .label = "zram"},
      variants, b.progress);
  std::signal(SIGINT, old_int);
  std::signal(SIGTERM, old_term);
  if (b.zram.has_value()) {
    if (Status s = b.zram->Reset(); !s.ok()) PrintError(kCommand, s.ToString());
  }
  if (!m.has_value()) {
    return ReportFailure(kCommand, "FATAL: " + m.error().ToString());
  }
  Report report(kCommand, machine);
  AddZramCompareReport(report, b.cfg, *m);
  return report.Finish(kCommand, b.cfg.bench);
}

}  // namespace ztier::tool
