// File: tools/ztier/bench_writeback.cc
//
// `ztier bench writeback` (see bench_writeback.h): the store and fio
// measurements, run as variants (bench_harness.h) into one report.
#include "bench_writeback.h"

#include <signal.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "bench_fio.h"
#include "bench_harness.h"
#include "bench_proc.h"
#include "bench_report.h"
#include "bench_stats.h"
#include "nbd/nbd_backing_file.h"
#include "tool_common.h"
#include "ztier/backing_store.h"
#include "ztier/page.h"
#include "ztier/page_store.h"

namespace ztier::tool {
namespace {

constexpr const char kCommand[] = "ztier bench writeback";
constexpr const char kAbout[] =
    "zram-style writeback of a filled store to a\nbacking file, one "
    "page at a time (one synchronous 4 KiB pwrite per page, zram\nbefore "
    "its writeback batching series) against batched io_uring writeback,\n"
    "with fio's sequential-write bandwidth on the same file system as the "
    "limit.\n--dir should be on the file system under test. Without fio on "
    "PATH the fio\npart is skipped. --backing URI also writes back to a "
    "remote NBD export, one\ncommand at a time and batched, in the same "
    "run.";

// The variants, in the order of the tables and the chart's bars; all but
// fio are a store's writeback, one page at a time (sync) or batched, to
// the file or (remote) the --backing export.
struct VariantSpec {
  const char* name;
  const char* tic;  // the chart's label
  bool sync, remote;
};
constexpr VariantSpec kVariants[] = {
    {"sync", "sync (a 4 KiB pwrite per page)", true, false},
    {"batched", "batched (io_uring)", false, false},
    {"fio", "fio (the disk's limit)", false, false},
    {"remote-sync", "remote-sync (one NBD write at a time)", true, true},
    {"remote-batched", "remote-batched (NBD)", false, true}};
constexpr int kFio = 2;
constexpr std::size_t kMaxIoPages = 32;    // batched: pages per IO
constexpr std::size_t kVerifyStride = 64;  // every 64th slot is checked

struct Flags {
  BenchFlags common{.runs = 5};
  std::string corpus = kDefaultCorpusFile;
  std::string size = "1G";
  std::string dir = "/var/tmp";
  std::string codec = "lz4";
  std::int64_t batch_size = 32;
  bool compressed = false;
  std::string backing;  // an NBD URI: the remote variants
  std::int64_t backing_connections = 4;
};

// The two files in --dir, removed on SIGINT/SIGTERM/SIGHUP too.
char g_files[2][4096];

void RemoveFilesAndDie(int sig) {
  for (const char* p : g_files) ::unlink(p);
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

void RemoveFilesOnSignal(const std::string& image, const std::string& fio) {
  std::snprintf(g_files[0], sizeof(g_files[0]), "%s", image.c_str());
  std::snprintf(g_files[1], sizeof(g_files[1]), "%s", fio.c_str());
  struct sigaction sa {};
  sa.sa_handler = RemoveFilesAndDie;
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) ::sigaction(sig, &sa, nullptr);
}

// --dir must exist and hold SIZE free (the two files exist one at a time).
Status CheckDir(const std::string& dir, std::uint64_t size) {
  struct statvfs st {};
  if (!std::filesystem::is_directory(dir) || ::statvfs(dir.c_str(), &st)) {
    return Status::NotFound("--dir " + dir + AbsoluteNote(dir) +
                            ": no such folder. Pass a folder on the file "
                            "system under test with --dir DIR.");
  }
  const std::uint64_t avail = std::uint64_t{st.f_bavail} * st.f_frsize;
  if (avail >= size) return Status::Ok();
  return Status::ResourceExhausted("--dir " + dir + " has " +
                                   std::to_string(avail >> 20) +
                                   " MiB free; the benchmark needs --size (" +
                                   std::to_string(size >> 20) + " MiB)");
}

struct WritebackSample {
  std::uint64_t written = 0;             // pages
  double seconds = 0;                    // the Writeback() call alone
  PageStoreStats before, after;          // around the Writeback() call
  std::uint64_t verified = 0;            // slots read back and compared
  std::uint64_t verified_from_disk = 0;  // of them, written-back slots
  bool direct = false;                   // the file was opened O_DIRECT
};

struct Bench {
  const Flags& f;
  const corpus::PageSet& corpus;
  std::uint64_t size_bytes;  // a multiple of 4096
  std::string image_path;    // DIR/ztier-bench-writeback.img
  std::string fio;           // fio's path; empty: not on PATH
  std::string fio_file;      // DIR/ztier-bench-fio.img
  std::string scratch;       // fio's output
  WritebackSample last[5];   // each store variant's last run (kVariants)
  bool direct = true;        // every run's backing file was O_DIRECT
};

// Deletes the file when it goes out of scope (also on error).
struct Unlinker {
  const std::string& path;
  ~Unlinker() { ::unlink(path.c_str()); }
};

// Slot i holds corpus page i % corpus.size(), stored in runs of up to 256
// consecutive corpus pages.
Status Fill(PageStore& store, const corpus::PageSet& corpus) {
  const std::uint64_t n = store.num_pages();
  for (std::uint64_t slot = 0; slot < n;) {
    const std::size_t first = slot % corpus.size();
    const std::size_t count = static_cast<std::size_t>(
        std::min<std::uint64_t>({n - slot, corpus.size() - first, 256}));
    ZT_RETURN_IF_ERROR(store.StoreBatch(
        slot, corpus.bytes().subspan(first * kPageSize, count * kPageSize)));
    slot += count;
  }
  return Status::Ok();
}

// Reads back every kVerifyStride-th slot and compares it with its corpus page.
Status Verify(PageStore& store, const corpus::PageSet& corpus,
              WritebackSample* out) {
  alignas(kPageSize) std::byte page[kPageSize];
  for (std::uint64_t slot = 0; slot < store.num_pages();
       slot += kVerifyStride) {
    const bool wb = store.Inspect(slot).wb;
    ZT_RETURN_IF_ERROR(store.Load(slot, MutablePage(page, kPageSize)));
    const std::size_t want = slot % corpus.size();
    if (std::memcmp(page, corpus.page(want).data(), kPageSize) != 0) {
      return Status::Corruption(
          "slot " + std::to_string(slot) + (wb ? " (written back)" : "") +
          " reads back different from corpus page " + std::to_string(want));
    }
    ++out->verified;
    out->verified_from_disk += wb;
  }
  return Status::Ok();
}

// One store measurement (bench_writeback.h) of variant `v`; an error unless
// the timed Writeback() writes every idle slot.
Result<WritebackSample> RunStoreWriteback(const Bench& b,
                                          const VariantSpec& v) {
  const corpus::PageSet& corpus = b.corpus;
  if (corpus.size() == 0) return Err(Status::InvalidArgument("empty corpus"));
  ::unlink(b.image_path.c_str());
  Unlinker remove{b.image_path};
  BackingOptions bo{.path = b.image_path, .size_bytes = b.size_bytes};
  if (v.remote) {
    ZT_ASSIGN_OR_RETURN(
        bo.file, nbd::OpenNbdBackingFile(
                     b.f.backing, {.connections = static_cast<std::size_t>(
                                       b.f.backing_connections)}));
    if (bo.file->size() < b.size_bytes) {
      return Err(Status::InvalidArgument(
          b.f.backing + " holds " + std::to_string(bo.file->size()) +
          " bytes after its 4096-byte label; " + std::to_string(b.size_bytes) +
          " are needed"));
    }
  }
  ZT_ASSIGN_OR_RETURN(std::unique_ptr<BackingStore> backing,
                      BackingStore::Open(bo));
  WritebackSample out{.direct = backing->direct()};
  PageStoreOptions options;
  options.num_pages = b.size_bytes / kPageSize;
  options.codec = b.f.codec;
  options.backing = std::move(backing);
  ZT_ASSIGN_OR_RETURN(std::unique_ptr<PageStore> store,
                      PageStore::Create(options));
  ZT_RETURN_IF_ERROR(Fill(*store, corpus));
  store->MarkIdleAll();
  out.before = store->Stats();
  // The request (it allocates) is built before the clock starts.
  const WritebackRequest request{
      .scans = {{kWritebackIdle, 0, store->num_pages()}},
      .in_flight = v.sync ? 1 : static_cast<std::size_t>(b.f.batch_size),
      .max_io_pages = v.sync ? 1 : kMaxIoPages,
      .compressed = b.f.compressed};
  const auto t0 = std::chrono::steady_clock::now();
  ZT_ASSIGN_OR_RETURN(WritebackResult r, store->Writeback(request));
  out.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
          .count();
  out.written = r.written;
  if (r.candidates == 0) {
    return Err(Status::InvalidArgument(
        "writeback found no page to write: every corpus page is "
        "same-filled (kept as one word, never written back)"));
  }
  if (!r.status.ok() || r.written != r.candidates) {
    return Err(Status::IoError(
        "writeback wrote " + std::to_string(r.written) + " of " +
        std::to_string(r.candidates) + " candidate pages (changed " +
        std::to_string(r.changed) + ", failed " + std::to_string(r.failed) +
        "): " + r.status.ToString()));
  }
  out.after = store->Stats();
  ZT_RETURN_IF_ERROR(Verify(*store, corpus, &out));
  return out;
}

// A store variant: its writeback's figures in `out`.
Variant StoreVariant(Bench& b, int index) {
  return {kVariants[index].name,
          [&b, index](std::size_t, Samples& out) -> Status {
            const VariantSpec& v = kVariants[index];
            WritebackSample& s = b.last[index];
            ZT_ASSIGN_OR_RETURN(s, RunStoreWriteback(b, v));
            if (!v.remote) b.direct = b.direct && s.direct;
            out.Add("pages", static_cast<double>(s.written));
            out.Add("seconds", s.seconds);
            out.Add("mb_s", static_cast<double>(s.written) * kPageSize /
                                std::max(s.seconds, 1e-9) / 1e6);
            return Status::Ok();
          }};
}

// fio's sequential write of --size bytes to DIR/ztier-bench-fio.img.
std::vector<std::string> FioArgs(const Bench& b) {
  std::vector<std::string> a = {b.fio, "--name=seqwrite",
                                "--filename=" + b.fio_file,
                                "--size=" + std::to_string(b.size_bytes)};
  a.insert(a.end(), {"--rw=write", "--bs=128k", "--ioengine=io_uring",
                     "--direct=1", "--iodepth=32", "--output-format=json"});
  return a;
}

Variant FioVariant(const Bench& b) {
  return {"fio", [&b](std::size_t, Samples& out) -> Status {
            ::unlink(b.fio_file.c_str());
            // At least 1 MB/s, plus two minutes for fio's start and layout.
            auto fig = bench::RunFio(
                FioArgs(b), b.scratch,
                std::chrono::milliseconds(120'000 + b.size_bytes / 1000));
            ::unlink(b.fio_file.c_str());
            if (!fig) return fig.error();
            const double bw = fig->write.bw_bytes;
            const double bytes = static_cast<double>(
                fig->write.io_bytes ? fig->write.io_bytes : b.size_bytes);
            if (bw <= 0) return Status::IoError("fio wrote nothing");
            out.Add("pages", bytes / kPageSize);
            out.Add("seconds", bytes / bw);
            out.Add("mb_s", bw / 1e6);
            return Status::Ok();
          }};
}

// The configuration: conditions and the "config:" lines.
void Describe(Report& r, const Bench& b) {
  const Flags& f = b.f;
  const std::string qd = std::to_string(f.batch_size);
  const std::string io_kib = std::to_string(kMaxIoPages * kPageSize / 1024);
  const std::string fio = b.fio.empty()
                              ? "not measured: fio not found on PATH"
                              : bench::ToolVersion(b.fio, b.scratch) + ": " +
                                    bench::CommandLine(FioArgs(b));
  const char* compressed = f.compressed ? "yes" : "no";
  r.Condition("corpus", f.corpus);
  r.Condition("size_bytes", std::to_string(b.size_bytes));
  r.Condition("dir", f.dir);
  r.Condition("runs", std::to_string(f.common.runs));
  r.Condition("codec", f.codec);
  r.Condition("batch_size", qd);
  r.Condition("compressed", compressed);
  r.Condition("fio", fio);
  r.Condition("backing", f.backing.empty() ? "none" : f.backing);
  r.Line(
      "config: corpus=" + f.corpus + " (" + b.corpus.name() + ", " +
      std::to_string(b.corpus.size()) +
      " pages, repeated to fill) size=" + std::to_string(b.size_bytes) + " (" +
      std::to_string(b.size_bytes / kPageSize) + " slots) codec=" + f.codec +
      " compressed=" + compressed + " runs=" + std::to_string(f.common.runs) +
      " (+1 warm-up, not counted)\n  files: " + b.image_path + " (backing), " +
      b.fio_file +
      " (fio)\n  sync     PageStore::Writeback in_flight=1 max_io_pages=1: "
      "one synchronous 4 KiB pwrite per page (zram before its writeback "
      "batching series)\n  batched  PageStore::Writeback in_flight=" +
      qd + " max_io_pages=" + std::to_string(kMaxIoPages) +
      ": io_uring, up to " + qd + " IOs of up to " + io_kib + " KiB\n" +
      "  fio      " + fio + "\n" +
      (f.backing.empty()
           ? std::string()
           : "  remote-sync     the same as sync to " + f.backing +
                 " (libnbd): one 4 KiB NBD write in flight at a time\n"
                 "  remote-batched  the same as batched to " +
                 f.backing + ": up to " + qd + " NBD writes of up to " +
                 io_kib + " KiB in flight, over " +
                 std::to_string(f.backing_connections) +
                 " connections when the server offers multi-conn\n") +
      "  timed: the Writeback() call alone (fill, idle marking and the check "
      "of every " +
      std::to_string(kVerifyStride) +
      "th slot are not); variants alternate: sync, batched, fio / fio, "
      "batched, sync\n");
}

// The variants table, the last run's lines, the ratios and the chart.
void Results(Report& r, const Bench& b, const Measurements& m) {
  Chart c{.name = "writeback",
          .title = "Writeback of " + FormatMiB(b.size_bytes) + " (" +
                   b.f.codec + ", " + b.corpus.name() +
                   "): one page at a time vs batched vs fio (" +
                   MedianOfRuns(b.f.common.runs) + ")",
          .x_label = "variant",
          .y_label = "throughput (MB/s of pages written back, log scale)",
          .style = PlotStyle::kBars,
          .log_y = true};
  PlotSeries bars{.title = "MB/s"};
  Table& t = r.AddTable("variants", "");
  for (int i = 0; i < 5; ++i) {
    const char* v = kVariants[i].name;
    if (i <= kFio || !b.f.backing.empty()) {
      c.x_tics.emplace_back(i, kVariants[i].tic);
    }
    const std::vector<double> mb_s = m.Of(v, "mb_s");
    if (mb_s.empty()) continue;  // not run
    Row& row = t.AddRow().Text("variant", v);
    if (auto pages = m.At(v, "pages", 1)) row.Int("pages", *pages);
    row.Figure("seconds", m.Of(v, "seconds"), 3)
        .Figure("MB/s", mb_s, 1, kRange | kCv);
    // A log axis has no 0: a variant that wrote nothing is left out.
    if (Summarize(mb_s).min > 0) bars.points.push_back(SpreadPoint(i, mb_s));
  }
  c.series.push_back(std::move(bars));
  Table& l = r.AddTable("last_run",
                        "last run: mem_used_total before and after writeback, "
                        "bd_stat after, slots read back");
  for (int i = 0; i < 5; ++i) {
    if (i == kFio || m.Of(kVariants[i].name, "mb_s").empty()) continue;
    const WritebackSample& w = b.last[i];
    l.AddRow()
        .Text("variant", kVariants[i].name)
        .Number("MiB before", w.before.mem_used_total / 1048576.0, 1)
        .Number("MiB after", w.after.mem_used_total / 1048576.0, 1)
        .Int("bd_count", w.after.bd_count)
        .Int("bd_reads", w.after.bd_reads)
        .Int("bd_writes", w.after.bd_writes)
        .Int("checked", w.verified)
        .Int("from the file", w.verified_from_disk);
  }
  if (b.f.compressed) {
    r.Line(
        "NOTE: MB/s counts the pages written back (4096 bytes each); "
        "with --compressed the file gets their compressed objects, fewer "
        "bytes, so the ratio to fio (which counts the bytes it writes) "
        "overstates what the disk did.\n");
  }
  if (!b.direct) {
    r.Line("NOTE: the file system refused O_DIRECT for " + b.image_path +
           ": writeback went through the page cache, while fio uses "
           "--direct=1.\n");
  }
  r.Ratio("batched / one-at-a-time",
          m.Ratios("batched", "mb_s", "sync", "mb_s"), "no runs");
  r.Ratio("batched / fio sequential write",
          m.Ratios("batched", "mb_s", "fio", "mb_s"), "fio not found on PATH");
  if (!b.f.backing.empty()) {
    r.Ratio("remote batched / remote one-at-a-time",
            m.Ratios("remote-batched", "mb_s", "remote-sync", "mb_s"),
            "no runs");
    r.Ratio("remote batched / local batched",
            m.Ratios("remote-batched", "mb_s", "batched", "mb_s"), "no runs");
  }
  r.AddChart(std::move(c));
}

}  // namespace

int RunBenchWriteback(std::span<const std::string_view> args) {
  Flags f;
  FlagSet flags(kCommand,
                "[--corpus FILE] [--size SIZE] [--dir DIR] [--runs N] "
                "[--codec NAME] [--batch-size N] [--compressed] "
                "[--backing URI] [--backing-connections N] [--json FILE] "
                "[--plot DIR]");
  AddCorpusFileFlag(flags, &f.corpus,
                    "pages to fill the store with, repeated as needed");
  flags.AddString("size", &f.size, "SIZE",
                  "store and backing file size (default 1G; K/M/G suffixes; "
                  "at least 1M)");
  flags.AddString("dir", &f.dir, "DIR",
                  "where the backing file and fio's file go; put it on the "
                  "file system under test (default /var/tmp; needs SIZE "
                  "free; the files are removed at the end)");
  flags.NotEmpty("dir");
  AddBenchFlags(flags, &f.common);
  flags.AddString("codec", &f.codec, "NAME", "store codec (default lz4)");
  flags.AddInt("batch-size", &f.batch_size, "N",
               "IOs in flight for the batched variant (default 32)", 1, 1024);
  flags.AddBool("compressed", &f.compressed,
                "compressed writeback: write the compressed objects");
  flags.AddString("backing", &f.backing, "URI",
                  "also write back to this NBD export (nbd://HOST[:PORT]/"
                  "EXPORT, nbds://, nbd+unix://): the variants remote-sync "
                  "and remote-batched; it must hold SIZE + 4096 bytes, and "
                  "its first SIZE + 4096 bytes are overwritten");
  flags.AddInt("backing-connections", &f.backing_connections, "N",
               "connections to the --backing export (default 4; used at "
               "once when it offers multi-conn)",
               1, 64);
  if (auto rc = flags.ParseCommandLine(args, kAbout)) return *rc;
  auto size = ParseSizeFlag(f.size, 1u << 20, "1M");
  Status codec = CheckCodecName(f.codec);
  if (!size.has_value() || !codec.ok()) {
    return ReportUsageError(kCommand,
                            size ? codec.message() : size.error().message());
  }
  if (!f.backing.empty() && !nbd::IsNbdUri(f.backing)) {
    return ReportUsageError(kCommand,
                            "--backing: not an NBD URI: " + f.backing);
  }
  if (Status s = CheckDir(f.dir, *size); !s.ok()) {
    return ReportFailure(kCommand, s.message());
  }
  auto corpus = LoadCorpus(f.corpus);
  auto scratch = TempDir::Create("ztier-bench-writeback");
  if (!corpus || !scratch) {
    return ReportFailure(
        kCommand, (corpus ? scratch.error() : corpus.error()).ToString());
  }
  Bench b{.f = f,
          .corpus = *corpus,
          .size_bytes = *size,
          .image_path = f.dir + "/ztier-bench-writeback.img",
          .fio = bench::FindExecutable("fio"),
          .fio_file = f.dir + "/ztier-bench-fio.img",
          .scratch = scratch->path()};
  RemoveFilesOnSignal(b.image_path, b.fio_file);
  Report report(kCommand, GetMachineInfo());
  Describe(report, b);
  std::vector<Variant> variants = {StoreVariant(b, 0), StoreVariant(b, 1)};
  if (b.fio.empty()) {
    PrintError(kCommand,
               "fio not found on PATH: the fio sequential write is not "
               "measured");
  } else {
    variants.push_back(FioVariant(b));
  }
  if (!f.backing.empty()) {
    variants.push_back(StoreVariant(b, 3));
    variants.push_back(StoreVariant(b, 4));
  }
  Progress progress;
  auto m = RunVariants({.runs = static_cast<std::size_t>(f.common.runs)},
                       variants, progress);
  if (!m) return ReportFailure(kCommand, "FATAL: " + m.error().ToString());
  Results(report, b, *m);
  return report.Finish(kCommand, f.common);
}

}  // namespace ztier::tool
