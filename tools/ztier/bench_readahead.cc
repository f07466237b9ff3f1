// File: tools/ztier/bench_readahead.cc
//
// `ztier bench readahead` (see bench_readahead.h): flags, the readahead
// variants, the fault-latency pass, and their report.
#include "bench_readahead.h"

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "bench_harness.h"
#include "bench_readahead_run.h"
#include "bench_report.h"
#include "bench_stats.h"
#include "tool_common.h"
#include "ztier/page.h"

namespace ztier::tool {
namespace {

constexpr char kCommand[] = "ztier bench readahead";
// Measured on the 2-vCPU development machine: a 64 MiB region touched in
// order, one byte per page, by one thread, while another answered each
// MISSING read fault with one 4 KiB UFFDIO_COPY.
constexpr char kBareFaultLine[] =
    "bare UFFDIO_COPY 4K fault measured on the 2-vCPU development machine: "
    "p50 14.0 \xC2\xB5s, p99 27.6 \xC2\xB5s (default scheduler); 7.55 "
    "\xC2\xB5s p50 when handler and faulter share a vCPU";
constexpr std::uint32_t kSeed = 301;
// The fault-in latency's columns and chart points.
constexpr std::pair<double, const char*> kLevels[] = {
    {0.5, "median"}, {0.9, "p90"}, {0.99, "p99"}, {1.0, "max"}};

struct Flags {
  std::string corpus = kDefaultCorpusFile, size = "256M", codec = "lz4";
  std::int64_t page_cluster = 3, fault_pages = 16384;
  BenchFlags common{.runs = 5};
  std::size_t size_bytes = 0;
};

std::optional<int> ParseFlags(std::span<const std::string_view> args,
                              Flags* f) {
  FlagSet flags(kCommand,
                "[--corpus FILE] [--size SIZE] [--codec NAME] [--runs N] "
                "[--page-cluster N] [--fault-pages N] [--json FILE] "
                "[--plot DIR]");
  AddCorpusFileFlag(flags, &f->corpus,
                    "pages to fill the regions with, repeated as needed");
  flags.AddString("size", &f->size, "SIZE",
                  "region of the readahead section (default 256M)");
  flags.AddString("codec", &f->codec, "NAME", "region codec (default lz4)");
  flags.AddInt("runs", &f->common.runs, "N",
               "readahead runs, page_cluster 0 and --page-cluster alternating "
               "(default 5; 0 skips the section)",
               0, 1000);
  flags.AddInt("page-cluster", &f->page_cluster, "N",
               "the page_cluster compared with 0 (default 3)", 1, 5);
  flags.AddInt("fault-pages", &f->fault_pages, "N",
               "pages touched in the fault-in latency section (default "
               "16384; 0 skips it)",
               0, 1 << 22);
  AddJsonFlag(flags, &f->common.json);
  AddPlotFlag(flags, &f->common.plot);
  if (auto rc = flags.ParseCommandLine(
          args,
          "fault-in on a ztier region: readahead (page_cluster 0 "
          "against --page-cluster), then the latency of one fault-in. "
          "Needs userfaultfd (root, or vm.unprivileged_userfaultfd=1).")) {
    return *rc;
  }
  auto size = ParseSizeFlag(f->size, kPageSize, "4K");
  if (!size) return ReportUsageError(kCommand, size.error().message());
  f->size_bytes = *size;
  if (Status s = CheckCodecName(f->codec); !s.ok()) {
    return ReportUsageError(kCommand, s.message());
  }
  return std::nullopt;
}

std::string Pc(std::int64_t pc) { return "page_cluster " + std::to_string(pc); }

// Section 1: the variants, their table and their chart.
Status Readahead(const Flags& f, const corpus::PageSet& corpus,
                 Report& report) {
  std::vector<Variant> variants;
  for (std::int64_t pc : {std::int64_t{0}, f.page_cluster}) {
    variants.push_back({Pc(pc), [&, pc](std::size_t, Samples& s) {
                          return RunSequentialRead(f.size_bytes, f.codec,
                                                   static_cast<unsigned>(pc),
                                                   corpus, s);
                        }});
  }
  Progress progress;
  const auto runs = static_cast<std::size_t>(f.common.runs);
  auto m = RunVariants({.runs = runs, .warmups = 0, .label = "readahead"},
                       variants, progress);
  progress.Clear();
  if (!m) return m.error();
  const std::vector<double> ratio =
      m->Ratios(Pc(f.page_cluster), "pages_s", Pc(0), "pages_s");
  Table& t = report.AddTable(
      "readahead",
      "readahead: sequential read of a paged-out region (as in the zswap "
      "decompress batching series)");
  Chart c{.name = "readahead",
          .title = "Sequential read of a paged-out " + FormatMiB(f.size_bytes) +
                   " region (" + f.codec + "): without and with readahead (" +
                   MedianOfRuns(runs) + ")",
          .x_label = "readahead window",
          .y_label = "read throughput (MB/s)",
          .style = PlotStyle::kBars};
  PlotSeries& bars = c.series.emplace_back(PlotSeries{.title = "MB/s"});
  for (std::int64_t pc : {std::int64_t{0}, f.page_cluster}) {
    const std::string v = Pc(pc);
    Row& row = t.AddRow()
                   .Text("variant", v)
                   .Figure("pages/s", m->Of(v, "pages_s"), 0)
                   .Figure("MB/s", m->Of(v, "mb_s"), 1, kRange | kCv);
    for (const char* k : {"stored", "faults", "swap_ra", "swap_ra_hit"}) {
      row.Int(k, static_cast<std::int64_t>(m->At(v, k, runs).value_or(0)));
    }
    if (pc > 0) row.Figure("ratio pages/s", ratio, 2);
    c.x_tics.push_back(
        {double(c.x_tics.size()), v + " (" + std::to_string(1 << pc) +
                                      (pc == 0 ? " page)" : " pages)")});
    bars.points.push_back(SpreadPoint(c.x_tics.back().first, m->Of(v, "mb_s")));
  }
  report.Line(
      "  (stored: pages in the pool after Pageout; faults, swap_ra, "
      "swap_ra_hit: during the read, last run of each variant; the region "
      "counts a read-ahead hit on the page's first write, and this pass "
      "only reads)");
  const SampleStats r = Summarize(ratio);
  report.Line(Pc(f.page_cluster) +
              " / page_cluster 0: " + FormatDouble(r.median, 2) +
              "x (pages/s; median of per-run ratios, " +
              FormatDouble(r.min, 2) + "-" + FormatDouble(r.max, 2) + ")\n");
  report.AddChart(std::move(c));
  return Status::Ok();
}

// A row of the fault-in latency table: the percentiles of `ns` in us.
Row& LatencyRow(Table& t, const char* name, std::vector<std::uint32_t> ns) {
  Row& row = t.AddRow().Text("touches", name).Int("n", std::ssize(ns));
  if (ns.empty()) return row;
  for (auto [q, column] : kLevels) {
    row.Number(column, Percentile(ns, q) / 1000.0, q < 1 ? 2 : 1);
  }
  return row;
}

double P50Us(std::vector<std::uint32_t> ns) {
  return ns.empty() ? 0 : Percentile(ns, 0.5) / 1000.0;
}

// Section 2: the fault-in latency table and chart.
Status FaultLatency(const Flags& f, const corpus::PageSet& corpus,
                    Report& report) {
  Progress progress;
  progress.Update("fault-in latency");
  auto s = RunFaultLatency(static_cast<std::size_t>(f.fault_pages), f.codec,
                           kSeed, corpus);
  progress.Clear();
  if (!s) return s.error();
  const TouchSeries &st = s->stored, &ft = s->first_touch;
  Table& t = report.AddTable(
      "fault_latency", "fault-in latency: " + std::to_string(f.fault_pages) +
                           " pages, " + f.codec +
                           ", page_cluster 0, random order (microseconds)");
  const double bare_p50 = P50Us(s->bare.fault_ns);
  Row& stored = LatencyRow(t, "stored, faulted", st.fault_ns)
                    .Int("faults", st.after.faults - st.before.faults)
                    .Int("zswpin", st.after.zswpin - st.before.zswpin);
  if (bare_p50 > 0)
    stored.Number("p50 / bare", P50Us(st.fault_ns) / bare_p50, 2);
  if (!st.hit_ns.empty()) {
    LatencyRow(t, "stored, mapped (refused by Pageout)", st.hit_ns);
  }
  const auto ft_faults = ft.after.faults - ft.before.faults;
  LatencyRow(t, "first touch, faulted", ft.fault_ns)
      .Int("faults", ft_faults)
      .Number("pages per fault",
              ft_faults ? double(f.fault_pages) / double(ft_faults) : 0, 1);
  std::vector<std::uint32_t> all = ft.fault_ns;
  all.insert(all.end(), ft.hit_ns.begin(), ft.hit_ns.end());
  LatencyRow(t, "first touch, all", all);
  LatencyRow(t, "bare UFFDIO_COPY, faulted (measured now)", s->bare.fault_ns);
  report.Line(
      "  bare: the same touches on plain anonymous memory whose handler "
      "thread only answers each fault with one 4 KiB UFFDIO_COPY; p50 / "
      "bare: the stored fault-in's p50 over the bare fault's");
  report.Line(std::string(kBareFaultLine) + "\n");
  report.Condition("reference", kBareFaultLine);
  Chart c{.name = "fault-latency",
          .title = "Fault-in latency of one 4 KiB page (" + f.codec + ", " +
                   std::to_string(f.fault_pages) +
                   " pages in random order, one run)",
          .x_label = "percentile of the faulting touches",
          .y_label = "latency (microseconds, log scale)",
          .log_y = true,
          .x_tics = {{0, "p50"}, {1, "p90"}, {2, "p99"}, {3, "max"}}};
  for (auto [title, ns] :
       {std::pair{"stored page (decompressed)", st.fault_ns},
        {"first touch (zeroed run)", ft.fault_ns},
        {"bare UFFDIO_COPY (plain memory)", s->bare.fault_ns}}) {
    PlotSeries& line = c.series.emplace_back(PlotSeries{.title = title});
    for (std::size_t x = 0; x < 4 && !ns.empty(); ++x) {
      // A log axis has no 0; no fault is that short.
      const double us = Percentile(ns, kLevels[x].first) / 1000.0;
      line.points.push_back({double(x), std::max(us, 0.001)});
    }
  }
  report.AddChart(std::move(c));
  return Status::Ok();
}

}  // namespace

int RunBenchReadahead(std::span<const std::string_view> args) {
  Flags f;
  if (auto rc = ParseFlags(args, &f)) return *rc;
  auto corpus = LoadCorpus(f.corpus);
  if (!corpus) return ReportFailure(kCommand, corpus.error().message());
  Report report(kCommand, GetMachineInfo());
  const std::string config = "corpus=" + f.corpus + " (" + corpus->name() +
                             ", " + std::to_string(corpus->size()) +
                             " pages, repeated to fill) codec=" + f.codec +
                             " size=" + std::to_string(f.size_bytes) +
                             " page_cluster=" + std::to_string(f.page_cluster) +
                             " runs=" + std::to_string(f.common.runs) +
                             " fault_pages=" + std::to_string(f.fault_pages) +
                             " seed=" + std::to_string(kSeed);
  report.Condition("config", config);
  report.Line("config: " + config +
              "\n  readahead: no budget; fill, Pageout all (untimed), then "
              "timed: read in order, one 8-byte load + memcmp per page\n"
              "  fault-in latency: page_cluster 0, one read per page in "
              "random order (mt19937), each touch timed with steady_clock; "
              "stored (after Pageout), first touch (a fresh region) and bare "
              "(a handler that only copies)\n");
  Status s = Status::Ok();
  if (f.common.runs > 0) s = Readahead(f, *corpus, report);
  if (s.ok() && f.fault_pages > 0) s = FaultLatency(f, *corpus, report);
  if (!s.ok()) return ReportFailure(kCommand, "FATAL: " + s.message());
  return report.Finish(kCommand, f.common);
}

}  // namespace ztier::tool
