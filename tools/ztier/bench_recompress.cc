// File: tools/ztier/bench_recompress.cc
//
// `ztier bench recompress` (bench_recompress.h): parses the flags, loads the
// corpora, runs each corpus' variants through RunVariants (bench_harness.h)
// and reports them through one Report (bench_report.h).
#include "bench_recompress.h"

#include <sys/utsname.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <system_error>
#include <vector>

#include "bench_harness.h"
#include "bench_report.h"
#include "bench_stats.h"
#include "plot.h"
#include "tool_common.h"
#include "ztier/batch_codec.h"
#include "ztier/page.h"
#include "ztier/page_store.h"

namespace ztier::tool {
namespace {

constexpr const char kCommand[] = "ztier bench recompress";
constexpr const char kSynopsis[] =
    "[--corpus FILE]... [--corpus-dir DIR] [--codec NAME] [--secondary NAME] "
    "[--size SIZE] [--runs N] [--zram-sys DIR] [--json FILE] [--plot DIR]";
constexpr const char kAbout[] =
    "idle recompression with a secondary codec (zram's\nrecompress "
    "type=idle): mem_used_total of a store before and after the pass "
    "against\nthe same pages stored with the secondary codec directly, and "
    "the pass's\nthroughput with the serial and the parallel batch backend.";
constexpr const char kCorpusHint[] =
    "Pass corpus files with --corpus FILE (.pages.zst, or plain pages), or "
    "a folder of *.pages.zst files with --corpus-dir DIR.";
constexpr double kMemTarget = 1.03;   // after / direct, at most
constexpr double kSpeedTarget = 1.6;  // parallel / serial MB/s, at least
constexpr const char* kPasses[] = {"serial", "parallel"};

struct Config {
  BenchFlags common{.runs = 5};
  std::vector<std::string> paths;  // the --corpus files, then --corpus-dir's
  std::string codec = "lz4";
  std::string secondary = "zstd";
  std::size_t pages = 0;  // from --size
  std::string zram_sys = "/sys/block/zram0";
};

struct Case {
  std::string corpus;
  Measurements m;  // variants "serial", "parallel", "direct"
};

// The command line into *cfg; the exit status when it is bad (2), names no
// corpus (1), or asked for --help (0).
std::optional<int> ParseFlags(std::span<const std::string_view> args,
                              Config* cfg) {
  std::string corpus_dir = kDefaultCorpusDir;
  std::string size = "64M";
  FlagSet flags(kCommand, kSynopsis);
  flags.AddList("corpus", &cfg->paths, "FILE",
                "corpus file (.pages.zst or plain pages); repeatable");
  AddCorpusDirFlag(flags, &corpus_dir, "; used when no --corpus is given");
  flags.AddString("codec", &cfg->codec, "NAME",
                  "primary codec, which fills the store (default lz4)");
  flags.AddString("secondary", &cfg->secondary, "NAME",
                  "secondary codec (priority 1), which recompresses and is "
                  "compared with (default zstd)");
  flags.AddString("size", &size, "SIZE",
                  "store size; the corpus' pages are repeated to fill it "
                  "(default 64M; K/M/G suffixes; at least 64K)");
  AddBenchFlags(flags, &cfg->common);
  flags.AddString("zram-sys", &cfg->zram_sys, "DIR",
                  "the kernel zram device's sysfs folder, probed for "
                  "recomp_algorithm (default /sys/block/zram0)");
  flags.NotEmpty("zram-sys");
  if (auto rc = flags.ParseCommandLine(args, kAbout)) return *rc;
  auto bytes = ParseSizeFlag(size, 64 << 10, "64K");
  if (!bytes.has_value()) {
    return ReportUsageError(kCommand, bytes.error().message());
  }
  cfg->pages = *bytes / kPageSize;
  Status s = CheckCodecName(cfg->codec);
  if (s.ok()) s = CheckCodecName(cfg->secondary, "secondary codec");
  if (!s.ok()) return ReportUsageError(kCommand, s.message());
  // --corpus-dir's corpora join the --corpus files when given, and stand
  // in for them when there are none.
  if (cfg->paths.empty() || flags.WasSet("corpus-dir")) {
    auto found = FindCorpusDir(corpus_dir, kCorpusHint);
    if (!found.has_value()) {
      return ReportFailure(kCommand, found.error().message());
    }
    cfg->paths.insert(cfg->paths.end(), found->begin(), found->end());
  }
  return std::nullopt;
}

// A store with `options`, slot i holding page i % corpus.size(), stored
// through StoreBatch a corpus' worth at a time.
Result<std::unique_ptr<PageStore>> FilledStore(const PageStoreOptions& options,
                                               const corpus::PageSet& corpus) {
  ZT_ASSIGN_OR_RETURN(auto store, PageStore::Create(options));
  const std::size_t n = options.num_pages;
  for (std::size_t first = 0; first < n; first += corpus.size()) {
    const std::size_t count = std::min(corpus.size(), n - first);
    if (Status s =
            store->StoreBatch(first, corpus.bytes().first(count * kPageSize));
        !s.ok()) {
      return Err(Status(s.code(), "fill with " + options.codec + ", slots " +
                                      std::to_string(first) + "+" +
                                      std::to_string(count) + ": " +
                                      s.message()));
    }
  }
  return store;
}

// Loads every slot and compares it with the page it was filled with.
Status CheckPages(PageStore& store, const corpus::PageSet& corpus) {
  std::vector<std::byte> page(kPageSize);
  for (std::size_t i = 0; i < store.num_pages(); ++i) {
    if (Status s = store.Load(i, MutablePage(page.data(), kPageSize));
        !s.ok()) {
      return Status(s.code(),
                    "load of slot " + std::to_string(i) +
                        " after recompression and compaction: " + s.message());
    }
    const ConstPage want = corpus.page(i % corpus.size());
    if (std::memcmp(page.data(), want.data(), kPageSize) != 0) {
      return Status::Corruption("slot " + std::to_string(i) +
                                " read back wrong after recompression and "
                                "compaction");
    }
  }
  return Status::Ok();
}

// One run of "serial" or "parallel": a --codec store with `backend`, every
// slot marked idle and recompressed with --secondary (priority 1), timed
// around the Recompress() call alone; then the pool compacted (as zram's
// `compact` after recompression: the pass leaves holes in the pool's
// pages) and every slot read back and checked.
Status RunPass(const Config& cfg, const corpus::PageSet& set,
               BatchBackend backend, Samples& out) {
  PageStoreOptions options{
      .num_pages = cfg.pages, .codec = cfg.codec, .batch_backend = backend};
  options.recomp[0] = RecompCodec{.codec = cfg.secondary};
  ZT_ASSIGN_OR_RETURN(auto store, FilledStore(options, set));
  store->MarkIdleAll();
  const PageStoreStats before = store->Stats();
  const auto t0 = std::chrono::steady_clock::now();
  auto result = store->Recompress({.filter = kRecompressIdle});
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
          .count();
  if (const Status& s = result ? result->status : result.error(); !s.ok()) {
    return Status(s.code(), "recompress: " + s.message());
  }
  const PageStoreStats after = store->Stats();
  store->Compact();
  const PageStoreStats compacted = store->Stats();
  ZT_RETURN_IF_ERROR(CheckPages(*store, set));
  const double examined = static_cast<double>(result->attempted);
  const double secs = std::max(seconds, 1e-9);  // a clock tick at least
  out.Add("seconds", seconds);
  out.Add("mb_s", examined * kPageSize / 1e6 / secs);
  out.Add("pages_s", examined / secs);
  out.Add("mem_before", before.mem_used_total);
  out.Add("mem_after", after.mem_used_total);
  out.Add("mem_compacted", compacted.mem_used_total);
  out.Add("compr_before", before.compr_data_size);
  out.Add("compr_after", after.compr_data_size);
  out.Add("huge_before", before.huge_pages);
  out.Add("huge_after", after.huge_pages);
  out.Add("candidates", result->candidates);
  out.Add("attempted", result->attempted);
  out.Add("recompressed", result->recompressed);
  out.Add("incompressible", result->incompressible);
  out.Add("at_priority_1", after.priority_pages[1]);
  return Status::Ok();
}

// "yes", "NO", or "?" when there is no figure.
std::string Met(const std::vector<double>& ratios, bool at_most,
                double target) {
  if (ratios.empty()) return "?";
  const double v = Summarize(ratios).median;
  return (at_most ? v <= target : v >= target) ? "yes" : "NO";
}

// The memory table, and its chart: bars per corpus of before, after,
// compacted and direct.
void AddMemory(Report& r, const Config& cfg, const std::vector<Case>& cases) {
  Table& t = r.AddTable(
      "memory", "mem_used_total, MiB: " + cfg.codec +
                    " store before and after idle recompression with " +
                    cfg.secondary + " (serial backend), after Compact(), and " +
                    cfg.secondary + " directly; median (min-max) over runs");
  Chart chart{.name = "recompress-memory",
              .title = "mem_used_total: " + cfg.codec +
                       ", then idle recompression with " + cfg.secondary +
                       ", against " + cfg.secondary + " directly (" +
                       MedianOfRuns(cfg.common.runs) + ")",
              .x_label = "corpus",
              .y_label = "mem_used_total (MiB)",
              .style = PlotStyle::kBars};
  const struct {
    const char* variant;
    const char* figure;
    std::string title;
  } bars[] = {
      {"serial", "mem_before", cfg.codec},
      {"serial", "mem_after", "after recompression with " + cfg.secondary},
      {"serial", "mem_compacted", "and Compact()"},
      {"direct", "mem", cfg.secondary + " directly"}};
  for (const auto& bar : bars) chart.series.push_back({bar.title});
  for (std::size_t j = 0; j < cases.size(); ++j) {
    const Measurements& m = cases[j].m;
    std::vector<double> mib[std::size(bars)];
    for (std::size_t i = 0; i < std::size(bars); ++i) {
      mib[i] = MiB(m.Of(bars[i].variant, bars[i].figure));
      if (!mib[i].empty())
        chart.series[i].points.push_back(SpreadPoint(j, mib[i]));
    }
    chart.x_tics.push_back({static_cast<double>(j), cases[j].corpus});
    const std::vector<double> ratio =
        m.Ratios("serial", "mem_after", "direct", "mem");
    t.AddRow()
        .Text("corpus", cases[j].corpus)
        .Int("slots", static_cast<std::int64_t>(cfg.pages))
        .Figure("before MiB", mib[0], 2)
        .Figure("after MiB", mib[1], 2)
        .Figure("compacted MiB", mib[2], 2)
        .Figure("direct MiB", mib[3], 2)
        .Figure("after/direct", ratio, 3)
        .Number("target <=", kMemTarget, 2)
        .Text("met", Met(ratio, true, kMemTarget));
  }
  r.AddChart(std::move(chart));
}

// Per corpus and backend, the counts of its first measured run (the same in
// every run: the pass is deterministic), and the direct store's.
void AddSlotsTable(Report& r, const std::vector<Case>& cases) {
  Table& t = r.AddTable(
      "slots",
      "slots of the first measured run: picked, tried, recompressed, marked "
      "incompressible, at priority 1 after; huge pages and compr_data_size "
      "before and after");
  for (const Case& c : cases) {
    const auto at = [&](const char* v, const char* f) {
      return static_cast<std::int64_t>(c.m.At(v, f, 1).value_or(-1));
    };
    const auto mib = [&](const char* v, const char* f) {
      return c.m.At(v, f, 1).value_or(NAN) / 1048576.0;
    };
    for (const char* v : kPasses) {
      t.AddRow()
          .Text("corpus", c.corpus)
          .Text("store", v)
          .Int("candidates", at(v, "candidates"))
          .Int("attempted", at(v, "attempted"))
          .Int("recompressed", at(v, "recompressed"))
          .Int("incompressible", at(v, "incompressible"))
          .Int("at priority 1", at(v, "at_priority_1"))
          .Int("huge before", at(v, "huge_before"))
          .Int("huge after", at(v, "huge_after"))
          .Number("compr before MiB", mib(v, "compr_before"), 2)
          .Number("compr after MiB", mib(v, "compr_after"), 2)
          .Number("mem after MiB", mib(v, "mem_after"), 2);
    }
    t.AddRow()
        .Text("corpus", c.corpus)
        .Text("store", "direct")
        .Int("huge after", at("direct", "huge"))
        .Number("compr after MiB", mib("direct", "compr"), 2)
        .Number("mem after MiB", mib("direct", "mem"), 2);
  }
}

void AddThroughputTables(Report& r, const std::vector<Case>& cases) {
  Table& t = r.AddTable(
      "throughput",
      "recompression throughput: MB/s of original pages examined (slots "
      "tried x 4096) and pages/s; median (min-max) over runs");
  for (const Case& c : cases) {
    for (const char* v : kPasses) {
      t.AddRow()
          .Text("corpus", c.corpus)
          .Text("backend", v)
          .Figure("seconds", c.m.Of(v, "seconds"), 4)
          .Figure("MB/s", c.m.Of(v, "mb_s"), 1, kRange | kCv)
          .Figure("pages/s", c.m.Of(v, "pages_s"), 0);
    }
  }
  Table& g = r.AddTable("targets",
                        "targets (per-run ratios, same run; median (min-max))");
  for (const Case& c : cases) {
    const struct {
      const char* ratio;
      std::vector<double> values;
      bool at_most;
      double target;
    } targets[] = {
        {"mem_used_total after / direct",
         c.m.Ratios("serial", "mem_after", "direct", "mem"), true, kMemTarget},
        {"mem_used_total compacted / direct",
         c.m.Ratios("serial", "mem_compacted", "direct", "mem"), true,
         kMemTarget},
        {"parallel / serial MB/s",
         c.m.Ratios("parallel", "mb_s", "serial", "mb_s"), false,
         kSpeedTarget}};
    for (const auto& goal : targets) {
      g.AddRow()
          .Text("corpus", c.corpus)
          .Text("ratio", goal.ratio)
          .Figure("value", goal.values, 3)
          .Text("target", (goal.at_most ? "<= " : ">= ") +
                              FormatDouble(goal.target, goal.at_most ? 2 : 1))
          .Text("met", Met(goal.values, goal.at_most, goal.target));
    }
  }
}

// The conditions and the lines before the tables.
void AddConfig(Report& r, const Config& cfg,
               const std::vector<corpus::PageSet>& corpora,
               const KernelRecompProbe& kernel) {
  const std::string runs = std::to_string(cfg.common.runs);
  r.Condition("runs", runs);
  r.Condition("codec", cfg.codec);
  r.Condition("secondary", cfg.secondary);
  r.Condition("slots", std::to_string(cfg.pages));
  r.Condition("kernel", kernel.line);
  std::string text =
      "config: codec=" + cfg.codec + " secondary=" + cfg.secondary +
      " (priority 1, default parameters) slots=" + std::to_string(cfg.pages) +
      " (" + FormatMiB(cfg.pages * kPageSize) +
      ", each corpus' pages repeated to fill) runs=" + runs +
      " (+1 warm-up, not counted)\n";
  for (std::size_t i = 0; i < corpora.size(); ++i) {
    text += "corpus: " + corpora[i].name() + " (" +
            std::to_string(corpora[i].size()) + " pages) from " + cfg.paths[i] +
            "\n";
  }
  r.Line(text + "  serial, parallel  a " + cfg.codec +
         " store (batch backend serial or parallel: cores - 1 workers and "
         "the caller), MarkIdleAll(), then Recompress({.filter = "
         "kRecompressIdle}), then Compact(); timed: the Recompress() call "
         "alone (the fill, the compaction and the check of every slot read "
         "back are not)\n"
         "  direct            the same pages stored with " +
         cfg.secondary +
         "\n  variants alternate: serial, parallel, direct / direct, "
         "parallel, serial\n"
         "MB/s = 10^6 bytes of original pages examined per second; cv% = "
         "stddev/mean.\n" +
         kernel.line + "\n");
}

}  // namespace

int RunBenchRecompress(std::span<const std::string_view> args) {
  Config cfg;
  if (auto rc = ParseFlags(args, &cfg)) return *rc;
  std::vector<corpus::PageSet> corpora;
  for (const std::string& path : cfg.paths) {
    auto set = LoadCorpus(path);
    if (!set.has_value()) return ReportFailure(kCommand, set.error().message());
    if (set->size() == 0) {
      return ReportFailure(kCommand, "corpus " + path + " holds no pages");
    }
    corpora.push_back(std::move(*set));
  }
  Report report(kCommand, GetMachineInfo());
  AddConfig(report, cfg, corpora, ProbeKernelRecomp(cfg.zram_sys));
  std::vector<Case> cases;
  Progress progress;
  for (const corpus::PageSet& set : corpora) {
    // "serial" and "parallel" (a pass each), then "direct".
    std::vector<Variant> variants;
    for (BatchBackend b : {BatchBackend::kSerial, BatchBackend::kParallel}) {
      variants.push_back({std::string(BatchBackendName(b)),
                          [&cfg, &set, b](std::size_t, Samples& out) {
                            return RunPass(cfg, set, b, out);
                          }});
    }
    variants.push_back(
        {"direct", [&cfg, &set](std::size_t, Samples& out) -> Status {
           ZT_ASSIGN_OR_RETURN(auto store, FilledStore({.num_pages = cfg.pages,
                                                        .codec = cfg.secondary},
                                                       set));
           const PageStoreStats st = store->Stats();
           out.Add("mem", st.mem_used_total);
           out.Add("compr", st.compr_data_size);
           out.Add("huge", st.huge_pages);
           return Status::Ok();
         }});
    auto m = RunVariants({.runs = static_cast<std::size_t>(cfg.common.runs),
                          .label = "[" + set.name() + "]"},
                         variants, progress);
    if (!m.has_value()) {
      return ReportFailure(kCommand, "FATAL: corpus " + set.name() + ": " +
                                         m.error().ToString());
    }
    cases.push_back({set.name(), std::move(*m)});
  }
  AddMemory(report, cfg, cases);
  AddSlotsTable(report, cases);
  AddThroughputTables(report, cases);
  return report.Finish(kCommand, cfg.common);
}

KernelRecompProbe ProbeKernelRecomp(const std::string& sys_dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(sys_dir, ec)) {
    return {.line = "kernel: not compared: " + sys_dir +
                    " does not exist (no zram device here)"};
  }
  const std::string file = sys_dir + "/recomp_algorithm";
  if (!fs::exists(file, ec)) {
    struct utsname u {};
    const std::string release = ::uname(&u) == 0 ? u.release : "unknown";
    return {.line = "kernel: not compared: " + file +
                    " does not exist: the running kernel (" + release +
                    ") was built without CONFIG_ZRAM_MULTI_COMP, so its zram "
                    "cannot recompress"};
  }
  return {.has_multi_comp = true,
          .line = "kernel: " + file +
                  " exists (CONFIG_ZRAM_MULTI_COMP), but this experiment's "
                  "kernel path is not implemented: no kernel figures"};
}

}  // namespace ztier::tool
