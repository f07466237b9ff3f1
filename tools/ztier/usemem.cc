// File: tools/ztier/usemem.cc
//
// `ztier usemem` (see usemem.h): parses flags, loads the corpus, runs the
// variants (bench_harness.h's RunVariants; one run is usemem_run.h's) and
// reports (bench_report.h).
#include "usemem.h"

#include <cerrno>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "bench_harness.h"
#include "bench_report.h"
#include "bench_stats.h"
#include "tool_common.h"
#include "usemem_run.h"
#include "ztier/device.h"
#include "ztier/page.h"

namespace ztier::tool {
namespace {

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
  std::string size = "256M";
  std::string budget = "60%";
  std::string corpus = kDefaultCorpusFile;
  std::string codec = "lz4";
  bool compare = false;
  std::int64_t page_cluster = 3;  // vm.page-cluster's default
  std::string sleep = "1";
  std::int64_t max_pool_percent = 50;  // not zswap's 20: see the help
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

// Fills *r from the flags; an error (bad usage) names the flag.
Status CheckFlags(const Flags& f, UsememRunConfig* r) {
  ZT_RETURN_IF_ERROR(CheckCodecName(f.codec));
  ZT_ASSIGN_OR_RETURN(r->worker_bytes, ParseSizeFlag(f.size, kPageSize, "4K"));
  r->workers = static_cast<std::size_t>(f.workers);
  const double region = static_cast<double>(r->workers * r->worker_bytes);
  if (f.budget.ends_with('%')) {
    const double pct = ParseNumber(f.budget, "%", 100);
    if (!(pct > 0)) {
      return Status::InvalidArgument("--budget " + f.budget +
                                     ": a percent must be in (0, 100]");
    }
    r->budget_bytes = static_cast<std::size_t>(region * pct / 100);
  } else {
    auto size = ParseSize(f.budget);
    if (!size)
      return Status::InvalidArgument("--budget " + f.budget + ": " +
                                     size.error().message());
    r->budget_bytes = *size;
  }
  r->budget_bytes = r->budget_bytes / kPageSize * kPageSize;
  if (r->budget_bytes < (256 << 10)) {  // RegionOptions::budget's least
    return Status::InvalidArgument("--budget " + f.budget +
                                   ": must be at least 256K (64 pages)");
  }
  r->sleep_seconds = ParseNumber(f.sleep, "", 3600);
  if (std::isnan(r->sleep_seconds)) {
    return Status::InvalidArgument(
        "--sleep " + f.sleep + ": must be a number of seconds in [0, 3600]");
  }
  r->codec = f.codec;
  r->page_cluster = static_cast<unsigned>(f.page_cluster);
  r->max_pool_percent = static_cast<unsigned>(f.max_pool_percent);
  return Status::Ok();
}

constexpr const char* kVariants[] = {"one-at-a-time", "batched"};

struct Usemem {
  const Flags& f;
  UsememRunConfig run;
  std::string corpus_name;
  UsememRunResult last[2];  // each variant's last run
  std::uint64_t verified = 0, limit_runs = 0, runs = 0;
  Table workers{"workers", "", {}, false};  // every worker of every run
};

// The first mismatches of each worker, one line each, on stderr.
void PrintMismatches(const UsememRunResult& r, std::size_t run) {
  for (const UsememWorkerResult& w : r.workers) {
    for (const UsememMismatch& m : w.mismatches) {
      std::fprintf(
          stderr,
          "  run %zu %s: worker %zu page %zu word %zu: got 0x%016" PRIx64
          " want 0x%016" PRIx64 "\n",
          run, kVariants[r.batched], m.worker, m.page, m.word, m.got, m.want);
    }
  }
}

Variant UsememVariant(Usemem& u, const corpus::PageSet& corpus, bool batched) {
  return {kVariants[batched],
          [&u, &corpus, batched](std::size_t run, Samples& out) -> Status {
            UsememRunConfig rc = u.run;
            rc.batched = batched;
            ZT_ASSIGN_OR_RETURN(UsememRunResult r, RunUsememOnce(rc, corpus));
            u.verified += r.pages_verified;
            u.limit_runs += r.stats.pool_limit_hit > 0;
            ++u.runs;
            if (r.mismatches > 0) {
              PrintMismatches(r, run);
              return Status::Corruption(std::to_string(r.mismatches) + " of " +
                                        std::to_string(r.pages_verified) +
                                        " pages read back wrong");
            }
            for (std::size_t w = 0; w < r.workers.size(); ++w) {
              const UsememWorkerResult& x = r.workers[w];
              u.workers.AddRow()
                  .Text("variant", kVariants[batched])
                  .Int("run", static_cast<std::int64_t>(run))
                  .Int("worker", static_cast<std::int64_t>(w))
                  .Number("fill seconds", x.fill_seconds, 6)
                  .Number("write seconds", x.write_seconds, 6)
                  .Number("read seconds", x.read_seconds, 6)
                  .Number("KB/s", x.kb_s, 1);
            }
            out.Add("avg_kb_s", r.avg_kb_s);
            out.Add("total_kb_s", r.total_kb_s);
            out.Add("free_usecs", r.free_usecs);
            u.last[batched] = std::move(r);
            return Status::Ok();
          }};
}

std::string Change(double base, double now) {
  if (base == 0) return now == 0 ? "0.00%" : "-";
  const double pct = 100.0 * (now - base) / base;
  return (pct >= 0 ? "+" : "") + FormatDouble(pct, 2) + "%";
}

// The configuration: conditions and the "config:" lines.
void Describe(Report& r, const Usemem& u, std::size_t corpus_pages) {
  const UsememRunConfig& c = u.run;
  const std::size_t region = c.workers * c.worker_bytes;
  r.Condition("workers", std::to_string(c.workers));
  r.Condition("region_bytes", std::to_string(region));
  r.Condition("budget_bytes", std::to_string(c.budget_bytes));
  r.Condition("codec", c.codec);
  r.Condition("corpus", u.f.corpus);
  r.Condition("runs", std::to_string(u.f.common.runs));
  r.Condition("compare_batching", u.f.compare ? "yes" : "no");
  r.Line("config: workers=" + std::to_string(c.workers) +
         " size=" + FormatMiB(c.worker_bytes) + " each (region " +
         FormatMiB(region) + ", " + std::to_string(region / kPageSize) +
         " pages) budget=" + u.f.budget + " (" + FormatMiB(c.budget_bytes) +
         ", " + FormatDouble(100.0 * c.budget_bytes / region, 1) +
         "% of the region) codec=" + c.codec +
         " page_cluster=" + std::to_string(c.page_cluster) +
         " max_pool_percent=" + std::to_string(c.max_pool_percent) + " sleep=" +
         FormatDouble(c.sleep_seconds, 1) + "s\n  corpus=" + u.f.corpus + " (" +
         u.corpus_name + ", " + std::to_string(corpus_pages) +
         " pages, copied cyclically into each worker's slice)\n  runs=" +
         std::to_string(u.f.common.runs) +
         (u.f.compare ? " per variant, alternating" : "") +
         " (fresh region each run)" +
         (u.f.compare ? "\n  one-at-a-time  batch_stores=false, serial "
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

struct Counter {
  const char* name;
  std::uint64_t RegionStats::*field;
};

constexpr Counter kCounters[] = {
    {"zswpout", &RegionStats::zswpout},
    {"zswpin", &RegionStats::zswpin},
    {"pool_limit_hit", &RegionStats::pool_limit_hit},
    {"reject_compress_poor", &RegionStats::reject_compress_poor},
    {"resident pages", &RegionStats::resident_pages},
    {"faults", &RegionStats::faults},
    {"wp_faults", &RegionStats::wp_faults},
};

// The series' table, the counters, the verified line and the ratio.
void Results(Report& r, Usemem& u, const Measurements& m) {
  const bool compare = u.f.compare;
  const std::size_t n = m.Of("batched", "total_kb_s").size();
  const unsigned show = n > 1 ? kRange : kMedian;
  const UsememRunConfig& c = u.run;
  r.Line(
      "usemem: " + std::to_string(c.workers) + " workers x " +
      FormatMiB(c.worker_bytes) + ", budget " + u.f.budget + ", " + c.codec +
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
  for (const Counter& x : kCounters) {
    const bool resident = x.field == &RegionStats::resident_pages;
    Row& row = k.AddRow().Text(
        "counter",
        x.name + (resident
                      ? " (budget " +
                            std::to_string(c.budget_bytes / kPageSize) + ")"
                      : std::string()));
    const auto v = [&](bool b) {
      return static_cast<std::int64_t>(u.last[b].stats.*x.field);
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
         std::to_string(c.workers * c.worker_bytes / kPageSize) + " x " +
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
  const UsememRunConfig& c = u.run;
  Chart chart{
      .name = "usemem",
      .title = "usemem: " + std::to_string(c.workers) + " workers x " +
               FormatMiB(c.worker_bytes) + ", budget " + u.f.budget + ", " +
               c.codec + " (" + MedianOfRuns(u.f.common.runs) + ")",
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
  UsememRunConfig run;
  if (Status s = CheckFlags(f, &run); !s.ok()) {
    PrintError(kCommand, s.message());
    return 2;
  }
  auto corpus = LoadCorpus(f.corpus);
  if (!corpus) return ReportFailure(kCommand, corpus.error().message());
  Usemem u{.f = f, .run = run, .corpus_name = corpus->name()};
  std::vector<Variant> variants = {UsememVariant(u, *corpus, true)};
  if (f.compare)
    variants.insert(variants.begin(), UsememVariant(u, *corpus, false));
  Progress progress;
  // The machine as the runs start (its round trip is "at the start").
  Report report(kCommand, GetMachineInfo());
  auto m = RunVariants(
      {.runs = static_cast<std::size_t>(f.common.runs), .warmups = 0}, variants,
      progress);
  if (!m) return ReportFailure(kCommand, "FATAL: " + m.error().ToString());
  Describe(report, u, corpus->size());
  Results(report, u, *m);
  report.AddTable("workers", "") = std::move(u.workers);
  report.AddChart(UsememChart(u, *m));
  return report.Finish(kCommand, f.common);
}

}  // namespace ztier::tool
