// File: tools/ztier/bench_zram_compare.cc
//
// `ztier bench zram-compare` (see bench_zram_compare.h): parses flags, finds
// the kernel device, the tools and the corpora, runs part (a) and one
// variant per codec pair of part (b) through RunVariants (bench_harness.h),
// and reports (bench_report.h) the configuration lines, the mm_stat table,
// the IO tables and the io_uring driver against fio. Samples: variant
// "mm_stat" holds part (a) under MmFigure names, one variant per codec pair
// (PairName) part (b) under IoFigure names; ratios are taken per run.
#include "bench_zram_compare.h"

#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstring>
#include <fstream>
#include <optional>

#include "bench_fio.h"
#include "bench_harness.h"
#include "bench_proc.h"
#include "bench_report.h"
#include "bench_stats.h"
#include "bench_zram_compare_io.h"
#include "bench_zram_compare_kernel.h"
#include "flags.h"
#include "progress.h"
#include "serve_cmd.h"
#include "tool_common.h"
#include "ztier/page_store.h"

namespace ztier::tool {
namespace {

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

// A kernel codec and the ztier codec compared with it.
struct CodecPair {
  std::string kernel;
  std::string ztier;
  bool kernel_offered = true;  // the kernel's comp_algorithm lists it
};

// How an IO reaches a device, in the order the paths alternate (kIoPaths):
// kernel-io_uring, ztier-lib, kernel-psync, kernel-fio, ztier-nbd.
enum class IoPath { kUring, kLib, kSync, kFio, kNbd };
using enum IoPath;
constexpr IoPath kIoPaths[] = {kUring, kLib, kSync, kFio, kNbd};

std::string IoPathName(IoPath p) {  // the --paths name
  constexpr const char* kNames[] = {"kernel-io_uring", "ztier-lib",
                                    "kernel-psync", "kernel-fio", "ztier-nbd"};
  return kNames[static_cast<int>(p)];
}
bool IsKernelPath(IoPath p) { return p != kLib && p != kNbd; }

// One fio-style job at one thread count.
struct IoCase {
  bench::NbdJob job;
  std::size_t threads = 1;
};

// Everything the runs need, and what the report says about them.
struct Bench {
  struct Corpus {
    std::string name;  // "anon-python.pages"
    std::string path;
    std::size_t pages = 0;  // used (after --corpus-pages)
  };
  BenchFlags bench{.runs = 5};  // measured runs, after one warm-up run
  std::int64_t seconds = 1;
  std::uint64_t area_bytes = 0;
  std::vector<CodecPair> pairs;
  std::vector<IoCase> cases;  // in the order they run
  std::vector<IoPath> paths;  // those asked for (--paths)
  std::string corpus_dir = kDefaultCorpusDir;
  std::size_t corpus_pages = 0;  // per corpus; 0: all
  std::vector<Corpus> corpora;
  std::size_t data_pages = 0;  // the part (b) data: every corpus, in order
  std::string zram_dev = "/dev/zram0";
  std::string kernel_state;    // "used", "missing", "busy" or "unusable"
  std::string kernel_message;  // why not used
  std::vector<std::string> kernel_algorithms;
  bench::ToolInfo ztier, fio, nbdcopy;  // path empty: not found
  std::vector<std::string> notes;       // what was skipped, and why
  std::optional<KernelZram> zram;       // empty: the kernel side is skipped
  std::vector<corpus::PageSet> sets;    // the corpora's pages
  std::vector<DataPages> corpus_data;   // part (a), one per corpus
  std::optional<DataPages> data;        // part (b): every corpus
  std::string dir;                      // the temporary folder
  std::string area_file;  // part (b)'s fill as a file, for nbdcopy
  Progress progress;

  // In `paths`, and possible here.
  bool Measures(IoPath p) const {
    return std::ranges::find(paths, p) != paths.end() &&
           (!IsKernelPath(p) || kernel_state == "used") &&
           ((p != kFio && p != kNbd) || !fio.path.empty()) &&
           (p != kNbd || !nbdcopy.path.empty());
  }
  // The first pair with its ztier codec measures ztier (lzo once).
  bool MeasuresZtier(std::size_t p) const {
    return std::none_of(
        pairs.begin(), pairs.begin() + p,
        [&](const CodecPair& q) { return q.ztier == pairs[p].ztier; });
  }
};

std::string CaseTitle(const IoCase& c) {  // "randread 4k QD32 x2"
  return bench::JobTitle(c.job) + " x" + std::to_string(c.threads);
}
// "lz4/lz4": the variant of a codec pair.
std::string PairName(const CodecPair& p) { return p.kernel + "/" + p.ztier; }
// The samples of corpus `c`, pair `p`, side 'k' or 'z', field `field`
// (compr, used, huge, same, meta) in variant "mm_stat".
std::string MmFigure(std::size_t c, std::size_t p, char side,
                     std::string_view field) {
  return std::to_string(c) + "/" + std::to_string(p) + " " + side + " " +
         std::string(field);
}
// The samples of case `c` on `path` ("iops" or "mb_s") in a pair's variant.
std::string IoFigure(std::size_t c, IoPath path, std::string_view unit) {
  return std::to_string(c) + " " + IoPathName(path) + " " + std::string(unit);
}

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
  const std::uint64_t bytes = b.corpora[c].pages * kPageSize;
  ZT_RETURN_IF_ERROR(zram.Init(b.pairs[p].kernel, bytes));
  ZT_RETURN_IF_ERROR(
      Fill({.path = zram.dev_path()}, bytes, 1, b.corpus_data[c], 1));
  ZT_ASSIGN_OR_RETURN(MmStat mm, zram.ReadMmStat());
  AddMm(s, c, p, 'k', mm);
  return zram.Reset();
}

// Part (a), ztier: corpus `c` in a fresh PageStore with pair `p`'s codec,
// its figures for every pair with that codec.
Status ZtierMm(Bench& b, std::size_t c, std::size_t p, Samples& s) {
  const std::size_t pages = b.corpora[c].pages;
  ZT_ASSIGN_OR_RETURN(
      std::unique_ptr<PageStore> store,
      PageStore::Create({.num_pages = pages, .codec = b.pairs[p].ztier}));
  for (std::size_t i = 0; i < pages; ++i) {
    ZT_RETURN_IF_ERROR(store->Store(i, b.sets[c].page(i)));
  }
  const PageStoreStats st = store->Stats();
  const double meta = static_cast<double>(store->pool().Stats().metadata_bytes);
  alignas(8) std::byte out[kPageSize];
  for (std::size_t i = 0; i < pages; ++i) {
    ZT_RETURN_IF_ERROR(store->Load(i, MutablePage(out, kPageSize)));
    if (std::memcmp(out, b.sets[c].page(i).data(), kPageSize) != 0) {
      return Status::Corruption("page " + std::to_string(i) +
                                " reads back different");
    }
  }
  for (std::size_t q = p; q < b.pairs.size(); ++q) {
    if (b.pairs[q].ztier != b.pairs[p].ztier) continue;
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
  for (std::size_t c = 0; c < b.corpora.size(); ++c) {
    for (std::size_t p = 0; p < b.pairs.size(); ++p) {
      const CodecPair& pair = b.pairs[p];
      const std::string what =
          RunLabel(run, b.bench.runs) + ": mm_stat " + b.corpora[c].name + " ";
      if (b.zram.has_value() && pair.kernel_offered) {
        ZT_RETURN_IF_ERROR(Step(b, what + "kernel " + pair.kernel,
                                [&] { return KernelMm(b, c, p, s); }));
      }
      if (b.MeasuresZtier(p)) {
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
  const std::size_t threads = b.cases.back().threads;
  if (kernel) {
    b.progress.Update(prefix + "fill kernel " + pair.kernel);
    d->zram = &*b.zram;
    ZT_RETURN_IF_ERROR(b.zram->Init(pair.kernel, b.area_bytes));
    ZT_RETURN_IF_ERROR(Fill({.path = b.zram->dev_path()}, b.area_bytes, threads,
                            *b.data, kVerifyStride));
  }
  if (ztier && b.Measures(kLib)) {
    b.progress.Update(prefix + "fill ztier-lib " + pair.ztier);
    d->lib = std::make_unique<Device>(
        "zram0", DeviceDefaults{.comp_algorithm = pair.ztier});
    ZT_RETURN_IF_ERROR(d->lib->SetDisksize(b.area_bytes));
    ZT_RETURN_IF_ERROR(Fill({.device = d->lib.get()}, b.area_bytes, threads,
                            *b.data, kVerifyStride));
  }
  if (ztier && b.Measures(kNbd)) {
    b.progress.Update(prefix + "fill ztier-nbd " + pair.ztier);
    const std::string sock = b.dir + "/serve.sock", ctl = b.dir + "/serve.ctl";
    ZT_ASSIGN_OR_RETURN(
        d->nbd, bench::StartServerProcess(
                    bench::ZtierServeArgs(b.ztier.path, b.area_bytes,
                                          pair.ztier, sock, ctl),
                    "ztier-nbd " + pair.ztier, sock, ctl, b.dir + "/serve.log",
                    b.dir, kStartTimeout));
    d->uri = NbdUnixUri("zram0", sock);
    auto copied = bench::RunNbdcopy(b.nbdcopy.path, b.area_file, d->uri, b.dir,
                                    kCopyTimeout);
    if (!copied.has_value()) return copied.error();
  }
  return Status::Ok();
}

// One measurement of case `c` on `path`: its iops and mb_s into `s`.
Status Measure(Bench& b, const PairDevices& d, IoPath path,
               std::size_t c, Samples& s) {
  const IoCase& io = b.cases[c];
  const std::string dev = b.zram.has_value() ? b.zram->dev_path() : "";
  double iops, mb_s;
  if (path == kFio || path == kNbd) {
    ZT_ASSIGN_OR_RETURN(
        bench::FioFigures fig,
        bench::RunFio(FioArgs(b.fio.path, io.job, io.threads, b.area_bytes,
                              b.seconds, d.uri, path == kFio ? dev : ""),
                      b.dir, milliseconds((b.seconds + 120) * 1000)));
    const bench::FioDirection& f = io.job.writes ? fig.write : fig.read;
    iops = f.iops;
    mb_s = f.bw_bytes / 1e6;
  } else {
    IoPattern p = PatternFor(io.job, io.threads, b.area_bytes, b.seconds);
    p.sync = path == kSync;
    const IoTarget t{.path = dev,
                     .device = path == kLib ? d.lib.get() : nullptr};
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
  return (kernel ? b.zram.has_value() && b.pairs[p].kernel_offered
                 : b.MeasuresZtier(p)) &&
         std::ranges::any_of(kIoPaths, [&](IoPath x) {
           return IsKernelPath(x) == kernel && b.Measures(x);
         });
}

// Part (b) of one run for pair `p`: fresh devices, then every case on every
// path in turn.
Status PairRun(Bench& b, std::size_t p, std::size_t run, Samples& s) {
  const CodecPair& pair = b.pairs[p];
  const bool kernel = PairSide(b, p, true), ztier = PairSide(b, p, false);
  const std::string prefix =
      RunLabel(run, b.bench.runs) + ": " + PairName(pair) + ": ";
  PairDevices d;
  ZT_RETURN_IF_ERROR(SetUpPair(b, pair, kernel, ztier, prefix, &d));
  for (std::size_t c = 0; c < b.cases.size(); ++c) {
    for (IoPath path : kIoPaths) {
      if (!b.Measures(path) || !(IsKernelPath(path) ? kernel : ztier)) {
        continue;
      }
      ZT_RETURN_IF_ERROR(
          Step(b, prefix + CaseTitle(b.cases[c]) + " on " + IoPathName(path),
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
    if (std::ranges::find(names, f) == names.end()) {
      return Err(Status::InvalidArgument("unknown " + std::string(what) +
                                         " '" + f + "' (see --help)"));
    }
  }
  std::vector<std::size_t> out;
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (flags.empty() || std::ranges::find(flags, names[i]) != flags.end()) {
      out.push_back(i);
    }
  }
  return out;
}

// --codec, --jobs (reads first), --threads, --paths and --size into `b`.
Status ParseChoices(const std::vector<std::string>& codec_flags,
                    const std::vector<std::string>& job_flags,
                    const std::vector<std::string>& path_flags,
                    std::int64_t threads, const std::string& size_text,
                    Bench* b) {
  const std::vector<std::string> kernel = {"lz4", "lzo-rle", "lzo"};
  ZT_ASSIGN_OR_RETURN(const std::vector<std::size_t> codecs,
                      Select(kernel, codec_flags, "kernel codec"));
  for (std::size_t i : codecs) {
    b->pairs.push_back({kernel[i], i == 0 ? "lz4" : "lzo"});
    ZT_RETURN_IF_ERROR(CheckCodecName(b->pairs.back().ztier));
  }
  const std::span<const bench::NbdJob> standard = bench::StandardJobs();
  std::vector<std::string> names;
  for (const bench::NbdJob& j : standard) names.emplace_back(j.name);
  ZT_ASSIGN_OR_RETURN(std::vector<std::size_t> jobs,
                      Select(names, job_flags, "job"));
  std::ranges::stable_partition(
      jobs, [&](std::size_t j) { return !standard[j].writes; });
  for (std::size_t j : jobs) {
    b->cases.push_back({standard[j], 1});
    if (threads > 1) {
      b->cases.push_back({standard[j], static_cast<std::size_t>(threads)});
    }
  }
  names.clear();
  for (IoPath p : kIoPaths) names.push_back(IoPathName(p));
  ZT_ASSIGN_OR_RETURN(const std::vector<std::size_t> paths,
                      Select(names, path_flags, "path"));
  for (std::size_t p : paths) b->paths.push_back(kIoPaths[p]);
  ZT_ASSIGN_OR_RETURN(const std::uint64_t size,
                      ParseSizeFlag(size_text, 1u << 20, "1M"));
  const std::uint64_t unit = kBlock * static_cast<std::uint64_t>(threads);
  b->area_bytes = size / unit * unit;
  if (b->area_bytes == 0) {
    return Status::InvalidArgument("--size " + size_text +
                                   " is less than 128 KiB per thread");
  }
  return Status::Ok();
}

// The command line into *b; the exit status when it is bad (2) or asked
// for --help (0).
std::optional<int> ParseFlags(std::span<const std::string_view> args,
                              unsigned cores, Bench* b) {
  std::vector<std::string> codec_flags, job_flags, path_flags;
  std::string size_text = "256M";
  std::int64_t threads = cores, corpus_pages = 0;
  FlagSet flags(kCommand, kSynopsis);
  flags.AddInt("runs", &b->bench.runs, "N",
               "measured runs, after one warm-up run (default 5)", 1, 1000);
  flags.AddInt("seconds", &b->seconds, "S",
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
  AddCorpusDirFlag(flags, &b->corpus_dir);
  flags.AddInt("corpus-pages", &corpus_pages, "N",
               "the first N pages of each corpus (default 0: all)", 0,
               INT64_MAX);
  flags.AddString("zram-dev", &b->zram_dev, "PATH",
                  "the kernel device (default /dev/zram0)");
  flags.NotEmpty("zram-dev");
  AddJsonFlag(flags, &b->bench.json);
  if (auto rc = flags.ParseCommandLine(args, kAbout)) return *rc;
  b->corpus_pages = static_cast<std::size_t>(corpus_pages);
  const Status s =
      ParseChoices(codec_flags, job_flags, path_flags, threads, size_text, b);
  if (!s.ok()) return ReportUsageError(kCommand, s.message());
  return std::nullopt;
}

void Note(Bench& b, std::string text) {
  PrintError(kCommand, text);
  b.notes.push_back(std::move(text));
}

// The versions of ztier, fio and nbdcopy; a note for each one missing.
void FindTools(Bench& b) {
  b.ztier.path = bench::SelfExecutable();
  b.ztier.version = bench::ToolVersion(b.ztier.path, b.dir);
  for (auto [name, tool] :
       {std::pair{"fio", &b.fio}, std::pair{"nbdcopy", &b.nbdcopy}}) {
    *tool = bench::FindTool(name, b.dir);
    if (tool->path.empty()) {
      Note(b, std::string(name) +
                  " not found on PATH: the paths that "
                  "need it are skipped");
    }
  }
}

// The corpora of --corpus-dir and their data: one per corpus for part (a),
// all of them for part (b).
Status LoadCorpora(Bench& b) {
  ZT_ASSIGN_OR_RETURN(const std::vector<std::string> paths,
                      FindCorpusDir(b.corpus_dir, kCorpusDirHint));
  for (const std::string& path : paths) {
    ZT_ASSIGN_OR_RETURN(corpus::PageSet set, LoadCorpus(path));
    const corpus::PageSet* one[] = {&set};
    auto data = DataPages::From(one, b.corpus_pages);
    if (!data.has_value()) {
      return Status::InvalidArgument("corpus " + path + ": " +
                                     data.error().message());
    }
    b.corpora.push_back({set.name(), path, data->count()});
    b.corpus_data.push_back(std::move(*data));
    b.sets.push_back(std::move(set));
  }
  std::vector<const corpus::PageSet*> all;
  for (const corpus::PageSet& s : b.sets) all.push_back(&s);
  ZT_ASSIGN_OR_RETURN(DataPages data, DataPages::From(all, b.corpus_pages));
  b.data_pages = data.count();
  b.data.emplace(std::move(data));
  if (!b.Measures(kNbd)) return Status::Ok();
  b.area_file = b.dir + "/area.pages";  // part (b)'s fill, for nbdcopy
  std::ofstream out(b.area_file, std::ios::binary);
  for (std::uint64_t p = 0; p < b.area_bytes / kPageSize; ++p) {
    out.write(reinterpret_cast<const char*>(b.data->ForAreaPage(p)),
              kPageSize);
  }
  out.close();
  return out ? Status::Ok() : Status::IoError("cannot write " + b.area_file);
}

// The kernel device when it can be used; else its state and a note.
void OpenKernel(Bench& b) {
  auto z = KernelZram::Open(b.zram_dev);
  if (!z.has_value()) {
    const StatusCode code = z.error().code();
    b.kernel_state = code == StatusCode::kNotFound ? "missing"
                     : code == StatusCode::kBusy   ? "busy"
                                                   : "unusable";
    b.kernel_message = z.error().message();
    Note(b, b.zram_dev + " " + b.kernel_state + ": " + b.kernel_message +
                "; the kernel side is skipped, ztier is measured alone");
    return;
  }
  b.kernel_state = "used";
  b.kernel_algorithms = z->algorithms();
  for (CodecPair& p : b.pairs) {
    p.kernel_offered = std::ranges::find(b.kernel_algorithms, p.kernel) !=
                       b.kernel_algorithms.end();
    if (!p.kernel_offered) {
      Note(b, "the kernel's zram does not offer " + p.kernel + ": ztier " +
                  p.ztier + " is measured alone");
    }
  }
  b.zram.emplace(std::move(*z));
}

// The variants of one run: part (a), then part (b) per codec pair.
std::vector<Variant> Variants(Bench& b) {
  std::vector<Variant> v = {
      {"mm_stat", [&b](std::size_t run, Samples& s) { return MmRun(b, run, s); }}};
  for (std::size_t p = 0; !b.cases.empty() && p < b.pairs.size(); ++p) {
    if (!PairSide(b, p, true) && !PairSide(b, p, false)) continue;
    v.push_back({PairName(b.pairs[p]), [&b, p](std::size_t run, Samples& s) {
                   return PairRun(b, p, run, s);
                 }});
  }
  return v;
}

std::string Joined(const std::vector<std::string>& v, std::string_view sep) {
  std::string out;
  for (const std::string& s : v) {
    (out += out.empty() ? std::string_view() : sep) += s;
  }
  return out;
}

void AddConfig(Report& r, const Bench& b) {
  std::vector<std::string> pairs, paths, jobs, threads;
  for (const CodecPair& p : b.pairs) pairs.push_back(PairName(p));
  for (IoPath p : b.paths) {
    paths.push_back(IoPathName(p) + (b.Measures(p) ? "" : " (skipped)"));
  }
  for (const IoCase& c : b.cases) {
    if (c.threads == 1) jobs.push_back(bench::JobTitle(c.job));
    if (c.job.name == b.cases.front().job.name) {
      threads.push_back(std::to_string(c.threads));
    }
  }
  const auto version = [](const bench::ToolInfo& t) {
    return t.path.empty() ? std::string("not found")
                          : t.version + " (" + t.path + ")";
  };
  const std::string tools = "ztier " + version(b.ztier) + "; fio " +
                            version(b.fio) + "; nbdcopy " + version(b.nbdcopy);
  const std::string kernel = b.zram_dev + ": " + b.kernel_state;
  r.Line("config: runs=" + std::to_string(b.bench.runs) +
         " (after 1 warm-up run, not counted), IO job time=" +
         std::to_string(b.seconds) + " s, area=" + FormatMiB(b.area_bytes) +
         " (each thread on its own equal share), threads: " +
         Joined(threads, " and ") + "\ncodec pairs (kernel/ztier): " +
         Joined(pairs, ", ") + "\nkernel device: " + kernel +
         (b.kernel_message.empty() ? "" : " (" + b.kernel_message + ")"));
  if (!b.kernel_algorithms.empty()) {
    r.Line("  kernel comp_algorithm offers: " +
           Joined(b.kernel_algorithms, " "));
  }
  r.Line("part (b): paths, alternating in this order for every job: " +
         Joined(paths, ", ") + "\n  jobs (reads first): " + Joined(jobs, ", ") +
         "\n  fill (untimed): area page p = data page p % " +
         std::to_string(b.data_pages) +
         ", every 61st page read back and compared; psync and lib rows at "
         "QD32 repeat QD1 (a synchronous call has no queue)");
  if (!b.cases.empty()) {
    const IoCase& c = b.cases.front();
    const auto line = [&](const std::string& uri, const std::string& dev) {
      return bench::CommandLine(
          FioArgs("fio", c.job, c.threads, b.area_bytes, b.seconds, uri, dev));
    };
    r.Line("  kernel-fio, e.g.: " + line("", b.zram_dev) +
           "\n  ztier-nbd, e.g.: " + line("URI", "") +
           "\n  fio writes its own buffers, not corpus data: fio rows compare "
           "fio's data on both sides");
  }
  r.Line("tools: " + tools);
  for (const Bench::Corpus& c : b.corpora) {
    r.Line("corpus: " + c.name + " (" + std::to_string(c.pages) +
           " pages) from " + c.path);
  }
  for (const std::string& n : b.notes) r.Line("note: " + n);
  r.Line("");
  const std::pair<const char*, std::string> conditions[] = {
      {"runs", std::to_string(b.bench.runs)},
      {"seconds", std::to_string(b.seconds)},
      {"area_bytes", std::to_string(b.area_bytes)},
      {"codec_pairs", Joined(pairs, ", ")},
      {"paths", Joined(paths, ", ")},
      {"kernel_device", kernel},
      {"tools", tools}};
  for (const auto& [key, value] : conditions) r.Condition(key, value);
}

void AddMmTable(Report& r, const Bench& b, const Measurements& m) {
  Table& t = r.AddTable(
      "mm_stat",
      "(a) mm_stat after writing each corpus to a fresh device (medians over " +
          std::to_string(b.bench.runs) +
          " runs; MiB = 2^20 bytes; k = kernel zram, z = ztier; z/k < 1: ztier "
          "smaller)");
  for (std::size_t c = 0; c < b.corpora.size(); ++c) {
    for (std::size_t p = 0; p < b.pairs.size(); ++p) {
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
          out +=
              (side == 'z' ? "/" : "") +
              (v.empty() ? "-"
                         : std::to_string(std::llround(Summarize(v).median)));
        }
        return out;
      };
      t.AddRow()
          .Text("corpus", b.corpora[c].name)
          .Text("kernel/ztier", PairName(b.pairs[p]))
          .Number("orig MiB", b.corpora[c].pages * 4096.0 / (1 << 20), 2)
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
std::string Holder(const Bench& b, std::size_t p, IoPath path) {
  while (!IsKernelPath(path) && !b.MeasuresZtier(p)) --p;
  return PairName(b.pairs[p]);
}

// A table of `ztier` against `kernel`, or with `driver_check` (ztier:
// kernel-io_uring, kernel: kernel-fio) the driver check's one column.
void AddIoTable(Report& r, const Bench& b, const Measurements& m, IoPath kernel,
                IoPath ztier, std::string name, const std::string& title) {
  const bool check = name == "driver_check";
  Table& t = r.AddTable(
      std::move(name),
      check ? title
            : title + ": " + IoPathName(ztier) + " vs " + IoPathName(kernel) +
                  " (" + std::to_string(b.seconds) + " s per job, " +
                  std::to_string(b.bench.runs) +
                  " runs; MB/s = 10^6 bytes/s; ratio within each run, then "
                  "median)");
  for (std::size_t c = 0; c < b.cases.size(); ++c) {
    const bool mb_s = b.cases[c].job.block_size > 4096;
    const std::string unit = mb_s ? "mb_s" : "iops";
    for (std::size_t p = 0; p < b.pairs.size(); ++p) {
      const std::string kv = Holder(b, p, kernel), zv = Holder(b, p, ztier);
      const std::string kf = IoFigure(c, kernel, unit);
      const std::string zf = IoFigure(c, ztier, unit);
      const std::vector<double> k = m.Of(kv, kf), z = m.Of(zv, zf);
      if (check ? !b.pairs[p].kernel_offered : k.empty() && z.empty()) {
        continue;
      }
      Row& row = t.AddRow().Text("job x threads", CaseTitle(b.cases[c]));
      if (check) {
        row.Text("kernel codec", b.pairs[p].kernel)
            .Figure("io_uring driver / fio", m.Ratios(zv, zf, kv, kf), 3,
                    kRange);
        continue;
      }
      row.Text("kernel/ztier", PairName(b.pairs[p]))
          .Text("unit", mb_s ? "MB/s" : "IOPS")
          .Figure("kernel", k, mb_s ? 1 : 0, kRange | kOwnCv)
          .Figure("ztier", z, mb_s ? 1 : 0, kRange | kOwnCv)
          .Figure("ztier/kernel", m.Ratios(zv, zf, kv, kf), 3, kRange);
    }
  }
}

// The whole report: configuration lines, the tables.
void AddReport(Report& report, const Bench& b, const Measurements& m) {
  AddConfig(report, b);
  AddMmTable(report, b, m);
  if (b.cases.empty()) return;
  const bool uring = b.Measures(kUring), fio = b.Measures(kFio);
  if (uring) {
    AddIoTable(report, b, m, kUring, kLib, "library_io_uring",
               "(b) library path, corpus data");
  }
  if (b.Measures(kSync) || b.Measures(kLib)) {
    AddIoTable(report, b, m, kSync, kLib, "library_psync",
               "(b) library path, corpus data, synchronous calls on both "
               "sides");
  }
  if (fio || b.Measures(kNbd)) {
    AddIoTable(report, b, m, kFio, kNbd, "nbd",
               "(b) NBD path, fio on both sides");
  }
  if (uring && fio) {
    AddIoTable(report, b, m, kFio, kUring, "driver_check",
               "check: this tool's io_uring driver vs fio on the same kernel "
               "device (reads: same data; writes: corpus vs fio's data)");
  }
}

}  // namespace

int RunBenchZramCompare(std::span<const std::string_view> args) {
  const MachineInfo machine = GetMachineInfo();
  Bench b;
  if (auto rc = ParseFlags(args, machine.cores, &b)) return *rc;
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
      {.runs = static_cast<std::size_t>(b.bench.runs), .label = "zram"},
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
  AddReport(report, b, *m);
  return report.Finish(kCommand, b.bench);
}

}  // namespace ztier::tool
