// File: tools/ztier/usemem.cc
//
// `ztier usemem` (see usemem.h): parses flags, loads the corpus, runs the
// variants (bench_harness.h's RunVariants; one run is RunOnce's) and
// reports (bench_report.h).
#include "usemem.h"

#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <latch>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "bench_harness.h"
#include "bench_report.h"
#include "bench_stats.h"
#include "corpus/corpus.h"
#include "tool_common.h"
#include "ztier/device.h"
#include "ztier/page.h"
#include "ztier/region.h"

namespace ztier::tool {
namespace {

using Clock = std::chrono::steady_clock;
constexpr const char kCommand[] = "ztier usemem";
constexpr const char kSynopsis[] =
    "[--workers N] [--size BYTES] [--budget PERCENT|BYTES] [--corpus FILE] "
    "[--codec NAME] [--compare-batching] [--runs N] [--json FILE] "
    "[--page-cluster N] [--sleep SECONDS] [--max-pool-percent N] "
    "[--plot DIR]";
constexpr const char kAbout[] =
    "the vm-scalability usemem workload of the zswap store batching\n"
    "series, on a ztier region.\n"
    "N worker threads share one region of N x --size bytes with a "
    "budget of\n--budget; each fills its slice from the corpus, adds a "
    "constant to every\n8-byte word, sleeps, reads it all back and "
    "checks every page. Reports the\nseries' Average/Total Throughput "
    "(KB/s) and Time to Free (usecs, the region's\ndestruction), and "
    "zswap's counters. --compare-batching alternates batched\nstores "
    "(parallel backend, batch 8, 64 KiB units) with one page at a time "
    "and\nends with the line `batched / one-at-a-time: X.XXx`.\n"
    "Needs userfaultfd (root, or vm.unprivileged_userfaultfd=1).";

struct Flags {
  BenchFlags common{.runs = 1};
  std::int64_t workers = 4;
  std::string size = "256M", budget = "60%", corpus = kDefaultCorpusFile;
  std::string codec = "lz4", sleep = "1";
  bool compare = false;
  std::int64_t page_cluster = 3;       // vm.page-cluster's default
  std::int64_t max_pool_percent = 50;  // not zswap's 20: see usemem.h
  // From the flags, by CheckFlags.
  std::size_t worker_bytes = 0, budget_bytes = 0;  // multiples of 4096
  double sleep_seconds = 1;
};

void DeclareFlags(FlagSet& flags, Flags* f) {
  flags.AddInt("workers", &f->workers, "N",
               "worker threads sharing the region (default 4)", 1, 256);
  flags.AddString("size", &f->size, "BYTES",
                  "memory per worker (default 256M; K/M/G suffixes)");
  flags.AddString("budget", &f->budget, "PERCENT|BYTES",
                  "resident memory before the reclaimer runs: a percent of "
                  "the region (\"60%\", the default) or bytes (\"600M\")");
  AddCorpusFileFlag(flags, &f->corpus, "pages the workers copy in, cyclically");
  flags.AddString("codec", &f->codec, "NAME", "region codec (default lz4)");
  flags.AddBool("compare-batching", &f->compare,
                "run one-at-a-time and batched stores alternately and "
                "report the ratio");
  flags.AddInt("runs", &f->common.runs, "N",
               "runs per variant (default 3 with --compare-batching, else 1)",
               1, 1000);
  AddJsonFlag(flags, &f->common.json);
  flags.AddInt("page-cluster", &f->page_cluster, "N",
               "readahead window 2^N pages on fault-in (default 3, as "
               "vm.page-cluster)",
               0, 5);
  flags.AddString("sleep", &f->sleep, "SECONDS",
                  "pause between the write and the read pass (default 1; the "
                  "zswap store batching series' usemem sleeps 10)");
  flags.AddInt("max-pool-percent", &f->max_pool_percent, "N",
               "pool limit, percent of the budget (default 50; zswap's 20 "
               "would bind here, unlike in the zswap store batching series, "
               "and leave pages resident over the budget)",
               1, 100);
  AddPlotFlag(flags, &f->common.plot);
}

// `text` as a number in [0, max] followed by `suffix`; NaN when it is not.
double ParseNumber(const std::string& text, std::string_view suffix,
                   double max) {
  if (!text.ends_with(suffix) || text.size() == suffix.size()) return NAN;
  const std::string number = text.substr(0, text.size() - suffix.size());
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(number.c_str(), &end);
  const bool ok =
      end == number.c_str() + number.size() && errno == 0 && v >= 0 && v <= max;
  return ok ? v : NAN;
}

// Fills f's derived fields; an error (bad usage) names the flag.
Status CheckFlags(Flags& f) {
  ZT_RETURN_IF_ERROR(CheckCodecName(f.codec));
  ZT_ASSIGN_OR_RETURN(f.worker_bytes, ParseSizeFlag(f.size, kPageSize, "4K"));
  const double region = static_cast<double>(f.workers * f.worker_bytes);
  const auto bad_budget = [&](const std::string& why) {
    return Status::InvalidArgument("--budget " + f.budget + ": " + why);
  };
  if (f.budget.ends_with('%')) {
    const double pct = ParseNumber(f.budget, "%", 100);
    if (!(pct > 0)) return bad_budget("a percent must be in (0, 100]");
    f.budget_bytes = static_cast<std::size_t>(region * pct / 100);
  } else {
    auto size = ParseSize(f.budget);
    if (!size) return bad_budget(size.error().message());
    f.budget_bytes = *size;
  }
  f.budget_bytes = f.budget_bytes / kPageSize * kPageSize;
  if (f.budget_bytes < (256 << 10)) {  // RegionOptions::budget's least
    return bad_budget("must be at least 256K (64 pages)");
  }
  f.sleep_seconds = ParseNumber(f.sleep, "", 3600);
  if (std::isnan(f.sleep_seconds)) {
    return Status::InvalidArgument(
        "--sleep " + f.sleep + ": must be a number of seconds in [0, 3600]");
  }
  return Status::Ok();
}

constexpr const char* kVariants[] = {"one-at-a-time", "batched"};
constexpr std::size_t kWordsPerPage = kPageSize / sizeof(std::uint64_t);
constexpr std::size_t kMaxMismatchesShown = 8;  // per worker

// One worker's passes: seconds, its KB/s (its bytes / 1024 / (fill + write
// + read)) and the pages that read back wrong (the first few with their
// first differing word, printed on stderr).
struct Worker {
  double fill_seconds = 0, write_seconds = 0, read_seconds = 0, kb_s = 0;
  std::string mismatches;        // the first kMaxMismatchesShown, lines
  std::uint64_t mismatched = 0;  // all of them
};

struct Usemem {
  const Flags& f;
  const corpus::PageSet& corpus;
  RegionStats last[2];  // each variant's last run, before the destruction
  std::uint64_t verified = 0, limit_runs = 0, runs = 0;
  Table workers{"workers", "", {}, false};  // every worker of every run
};

double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// Word j of a corpus page, read without assuming its alignment.
std::uint64_t CorpusWord(ConstPage page, std::size_t j) {
  std::uint64_t v;
  std::memcpy(&v, page.data() + j * sizeof(v), sizeof(v));
  return v;
}

// Worker `index` of run `run` of `variant`, on its slice at `base`
// (`pages` pages): copies corpus page i % corpus.size() to its page i
// (fill) and adds a key of its own to every 8-byte word (write), timed;
// sleeps; reads every page back and compares it with corpus page + key
// (read, timed; a page that differs is a mismatch, counted, not an error).
// The region's memory has no declared type; the workers only ever access
// it as uint64_t (after the fill's memcpy).
void RunWorker(std::size_t index, std::byte* base, std::size_t pages,
               const Usemem& u, std::size_t run, const char* variant,
               std::latch& start, Worker& out) {
  const corpus::PageSet& corpus = u.corpus;
  // Odd and different in every byte, so that a page of one worker read in
  // another's place, or a word left unwritten, cannot match.
  const std::uint64_t key = 0x9E3779B97F4A7C15ull * (2 * index + 1);
  start.arrive_and_wait();
  const Clock::time_point t0 = Clock::now();
  for (std::size_t i = 0; i < pages; ++i) {
    std::memcpy(base + i * kPageSize, corpus.page(i % corpus.size()).data(),
                kPageSize);
  }
  const Clock::time_point t1 = Clock::now();
  std::uint64_t* w = reinterpret_cast<std::uint64_t*>(base);
  for (std::size_t i = 0; i < pages * kWordsPerPage; ++i) w[i] += key;
  const Clock::time_point t2 = Clock::now();
  std::this_thread::sleep_for(std::chrono::duration<double>(u.f.sleep_seconds));
  // Counted in locals: the workers' results sit side by side in memory.
  std::uint64_t mismatched = 0;
  const Clock::time_point t3 = Clock::now();
  for (std::size_t i = 0; i < pages; ++i) {
    const std::uint64_t* pw = w + i * kWordsPerPage;
    const ConstPage src = corpus.page(i % corpus.size());
    std::uint64_t diff = 0;
    for (std::size_t j = 0; j < kWordsPerPage; ++j) {
      diff |= pw[j] ^ (CorpusWord(src, j) + key);
    }
    if (diff == 0 || ++mismatched > kMaxMismatchesShown) continue;
    std::size_t j = 0;
    while (pw[j] == CorpusWord(src, j) + key) ++j;
    char line[160];
    std::snprintf(
        line, sizeof(line),
        "  run %zu %s: worker %zu page %zu word %zu: got 0x%016" PRIx64
        " want 0x%016" PRIx64 "\n",
        run, variant, index, i, j, pw[j], CorpusWord(src, j) + key);
    out.mismatches += line;
  }
  const Clock::time_point t4 = Clock::now();
  out.mismatched = mismatched;
  out.fill_seconds = Seconds(t0, t1);
  out.write_seconds = Seconds(t1, t2);
  out.read_seconds = Seconds(t3, t4);
  const double busy = out.fill_seconds + out.write_seconds + out.read_seconds;
  out.kb_s =
      busy > 0 ? static_cast<double>(pages * kPageSize) / 1024 / busy : 0;
}

// Run `run` of a variant: a Region of workers * --size (batched:
// batch_stores, parallel backend, batch 8; else the serial backend, one
// page at a time), the workers started together, then the region's
// counters and its destruction timed (the time to free). Adds the workers'
// rows to u.workers and "avg_kb_s" (the mean of their KB/s), "total_kb_s"
// (the sum) and "free_usecs" to `out`. Errors: Region::Create's
// (kUnsupported without userfaultfd), kCorruption when a page read back
// wrong.
Status RunOnce(Usemem& u, bool batched, std::size_t run, Samples& out) {
  const Flags& f = u.f;
  const auto workers = static_cast<std::size_t>(f.workers);
  const std::size_t pages = f.worker_bytes / kPageSize;
  ZT_ASSIGN_OR_RETURN(
      std::unique_ptr<Region> region,
      Region::Create(
          {.size = workers * f.worker_bytes,
           .budget = f.budget_bytes,
           .codec = f.codec,
           .max_pool_percent = static_cast<unsigned>(f.max_pool_percent),
           .page_cluster = static_cast<unsigned>(f.page_cluster),
           .batch_backend =
               batched ? BatchBackend::kParallel : BatchBackend::kSerial,
           .batch_size = kMaxBatchSize,
           .batch_stores = batched}));
  std::vector<Worker> w(workers);
  std::latch start(static_cast<std::ptrdiff_t>(workers));
  {
    std::vector<std::jthread> threads;
    for (std::size_t i = 0; i < workers; ++i) {
      threads.emplace_back(RunWorker, i, region->data() + i * f.worker_bytes,
                           pages, std::cref(u), run, kVariants[batched],
                           std::ref(start), std::ref(w[i]));
    }
  }  // joined
  const RegionStats stats = region->Stats();
  const Clock::time_point free_start = Clock::now();
  region.reset();
  const double free_usecs = Seconds(free_start, Clock::now()) * 1e6;
  double total_kb_s = 0;
  std::uint64_t mismatches = 0;
  for (const Worker& x : w) {
    total_kb_s += x.kb_s;
    mismatches += x.mismatched;
  }
  u.verified += workers * pages;
  u.limit_runs += stats.pool_limit_hit > 0;
  ++u.runs;
  if (mismatches > 0) {
    for (const Worker& x : w) std::fputs(x.mismatches.c_str(), stderr);
    return Status::Corruption(std::to_string(mismatches) + " of " +
                              std::to_string(workers * pages) +
                              " pages read back wrong");
  }
  for (std::size_t i = 0; i < workers; ++i) {
    u.workers.AddRow()
        .Text("variant", kVariants[batched])
        .Int("run", static_cast<std::int64_t>(run))
        .Int("worker", static_cast<std::int64_t>(i))
        .Number("fill seconds", w[i].fill_seconds, 6)
        .Number("write seconds", w[i].write_seconds, 6)
        .Number("read seconds", w[i].read_seconds, 6)
        .Number("KB/s", w[i].kb_s, 1);
  }
  out.Add("avg_kb_s", total_kb_s / static_cast<double>(workers));
  out.Add("total_kb_s", total_kb_s);
  out.Add("free_usecs", free_usecs);
  u.last[batched] = stats;
  return Status::Ok();
}

std::string Change(double base, double now) {
  if (base == 0) return now == 0 ? "0.00%" : "-";
  const double pct = 100.0 * (now - base) / base;
  return (pct >= 0 ? "+" : "") + FormatDouble(pct, 2) + "%";
}

// The configuration: conditions and the "config:" lines.
void Describe(Report& r, const Flags& c, const corpus::PageSet& corpus) {
  const std::size_t region = c.workers * c.worker_bytes;
  r.Condition("workers", std::to_string(c.workers));
  r.Condition("region_bytes", std::to_string(region));
  r.Condition("budget_bytes", std::to_string(c.budget_bytes));
  r.Condition("codec", c.codec);
  r.Condition("corpus", c.corpus);
  r.Condition("runs", std::to_string(c.common.runs));
  r.Condition("compare_batching", c.compare ? "yes" : "no");
  r.Line("config: workers=" + std::to_string(c.workers) +
         " size=" + FormatMiB(c.worker_bytes) + " each (region " +
         FormatMiB(region) + ", " + std::to_string(region / kPageSize) +
         " pages) budget=" + c.budget + " (" + FormatMiB(c.budget_bytes) +
         ", " + FormatDouble(100.0 * c.budget_bytes / region, 1) +
         "% of the region) codec=" + c.codec +
         " page_cluster=" + std::to_string(c.page_cluster) +
         " max_pool_percent=" + std::to_string(c.max_pool_percent) + " sleep=" +
         FormatDouble(c.sleep_seconds, 1) + "s\n  corpus=" + c.corpus + " (" +
         corpus.name() + ", " + std::to_string(corpus.size()) +
         " pages, copied cyclically into each worker's slice)\n  runs=" +
         std::to_string(c.common.runs) +
         (c.compare ? " per variant, alternating" : "") +
         " (fresh region each run)" +
         (c.compare ? "\n  one-at-a-time  batch_stores=false, serial "
                      "backend: every page stored by itself (the zswap "
                      "store batching series' baseline)"
                    : "") +
         "\n  batched        batch_stores=true, parallel backend, batch " +
         std::to_string(kMaxBatchSize) +
         ": runs of 16 victims in 64 KiB units (the zswap store batching "
         "series)\n  timed per worker: fill from the corpus + write every "
         "8-byte word + read back and check every page (the sleep is not); "
         "time to free: the region's destruction\n");
}

constexpr std::pair<const char*, std::uint64_t RegionStats::*> kCounters[] = {
    {"zswpout", &RegionStats::zswpout},
    {"zswpin", &RegionStats::zswpin},
    {"pool_limit_hit", &RegionStats::pool_limit_hit},
    {"reject_compress_poor", &RegionStats::reject_compress_poor},
    {"resident pages", &RegionStats::resident_pages},
    {"faults", &RegionStats::faults},
    {"wp_faults", &RegionStats::wp_faults},
};

// "usemem: 4 workers x 256 MiB, budget 60%, lz4", the table's and the
// chart's title.
std::string Heading(const Flags& f) {
  return "usemem: " + std::to_string(f.workers) + " workers x " +
         FormatMiB(f.worker_bytes) + ", budget " + f.budget + ", " + f.codec;
}

// The series' table, the counters, the verified line and the ratio.
void Results(Report& r, const Usemem& u, const Measurements& m) {
  const Flags& f = u.f;
  const bool compare = f.compare;
  const std::size_t n = m.Of("batched", "total_kb_s").size();
  const unsigned show = n > 1 ? kRange : kMedian;
  r.Line(
      Heading(f) +
      (n > 1 ? "; median (min-max) over " + std::to_string(n) + " runs" : ""));
  Table& t = r.AddTable("usemem", "");
  const std::pair<const char*, const char*> kFigures[] = {
      {"Average Throughput (KB/s)", "avg_kb_s"},
      {"Total Throughput (KB/s)", "total_kb_s"},
      {"Time to Free (usecs)", "free_usecs"}};
  for (const auto& [name, figure] : kFigures) {
    Row& row = t.AddRow().Text("figure", name);
    // The spread of total throughput: its cv% beside each variant.
    const bool cv = n > 1 && std::string_view(figure) == "total_kb_s";
    for (bool b : {false, true}) {
      if (b || compare) {
        row.Figure(kVariants[b], m.Of(kVariants[b], figure), 0,
                   show | (cv ? kOwnCv : 0u));
      }
    }
    if (compare) {
      row.Text("change", Change(Summarize(m.Of(kVariants[0], figure)).median,
                                Summarize(m.Of(kVariants[1], figure)).median));
    }
  }
  r.Line("counters at the end of the last run of each variant:");
  Table& k = r.AddTable("counters", "");
  for (const auto& [name, field] : kCounters) {
    const bool resident = field == &RegionStats::resident_pages;
    Row& row = k.AddRow().Text(
        "counter",
        name + (resident ? " (budget " +
                               std::to_string(f.budget_bytes / kPageSize) + ")"
                         : std::string()));
    const auto v = [&](bool b) {
      return static_cast<std::int64_t>(u.last[b].*field);
    };
    if (compare) row.Int(kVariants[0], v(false));
    row.Int(kVariants[1], v(true));
    if (compare) row.Text("change", Change(v(false), v(true)));
  }
  if (u.limit_runs > 0) {
    r.Line("NOTE: the pool limit was hit in " + std::to_string(u.limit_runs) +
           " of " + std::to_string(u.runs) +
           " runs: refused pages stayed resident over the budget, so those "
           "runs stored less than the budget asks; raise "
           "--max-pool-percent.");
  }
  r.Line("verified: " + std::to_string(u.verified) + " pages read back and " +
         "checked (every page of every run: " +
         std::to_string(f.workers * f.worker_bytes / kPageSize) + " x " +
         std::to_string(u.runs) + " runs), 0 mismatches");  // else failed
  Table& v = r.AddTable("verified", "");
  v.text = false;
  v.AddRow()
      .Int("pages_verified", static_cast<std::int64_t>(u.verified))
      .Int("mismatches", 0)
      .Int("pool_limit_runs", static_cast<std::int64_t>(u.limit_runs));
  if (compare) {
    r.Ratio("batched / one-at-a-time",
            m.Ratios("batched", "total_kb_s", "one-at-a-time", "total_kb_s"),
            "no runs", "total throughput; median of per-run ratios");
  }
}

// usemem.png: bars of the average and total throughput of each variant in
// MiB/s (the table's KB/s / 1024), median with min-max error bars.
Chart UsememChart(const Usemem& u, const Measurements& m) {
  Chart chart{
      .name = "usemem",
      .title = Heading(u.f) + " (" + MedianOfRuns(u.f.common.runs) + ")",
      .x_label = "throughput measured",
      .y_label = "throughput (MiB/s = usemem's KB/s / 1024)",
      .style = PlotStyle::kBars,
      .x_tics = {{0, "average per worker"}, {1, "total (all workers)"}}};
  for (const char* v : kVariants) {
    PlotSeries bars{.title = v};
    for (int x = 0; x < 2; ++x) {
      std::vector<double> kb_s = m.Of(v, x == 0 ? "avg_kb_s" : "total_kb_s");
      for (double& s : kb_s) s /= 1024;
      if (!kb_s.empty()) bars.points.push_back(SpreadPoint(x, kb_s));
    }
    chart.series.push_back(std::move(bars));
  }
  return chart;
}

}  // namespace

int RunUsemem(std::span<const std::string_view> args) {
  Flags f;
  FlagSet flags(kCommand, kSynopsis);
  DeclareFlags(flags, &f);
  if (auto rc = flags.ParseCommandLine(args, kAbout)) return *rc;
  if (!flags.WasSet("runs")) f.common.runs = f.compare ? 3 : 1;
  if (Status s = CheckFlags(f); !s.ok()) {
    return ReportUsageError(kCommand, s.message());
  }
  auto corpus = LoadCorpus(f.corpus);
  if (!corpus) return ReportFailure(kCommand, corpus.error().message());
  Usemem u{.f = f, .corpus = *corpus};
  std::vector<Variant> variants;
  for (bool batched : {false, true}) {
    if (!batched && !f.compare) continue;
    variants.push_back(
        {kVariants[batched], [&u, batched](std::size_t run, Samples& out) {
           return RunOnce(u, batched, run, out);
         }});
  }
  Progress progress;
  // The machine as the runs start (its round trip is "at the start").
  Report report(kCommand, GetMachineInfo());
  auto m = RunVariants(
      {.runs = static_cast<std::size_t>(f.common.runs), .warmups = 0}, variants,
      progress);
  if (!m) return ReportFailure(kCommand, "FATAL: " + m.error().ToString());
  Describe(report, f, *corpus);
  Results(report, u, *m);
  report.AddTable("workers", "") = std::move(u.workers);
  report.AddChart(UsememChart(u, *m));
  return report.Finish(kCommand, f.common);
}

}  // namespace ztier::tool
