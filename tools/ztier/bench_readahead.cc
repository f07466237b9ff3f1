// File: tools/ztier/bench_readahead.cc
//
// `ztier bench readahead` (see bench_readahead.h): flags, the alternating
// sequential-read runs, the fault-latency pass, and their text and JSON
// reports. The measurements are bench_readahead_run.h's.
#include "bench_readahead.h"

#include <algorithm>
#include <cstdio>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "bench_harness.h"
#include "bench_readahead_run.h"
#include "bench_stats.h"
#include "corpus/corpus.h"
#include "flags.h"
#include "machine_info.h"
#include "plot.h"
#include "progress.h"
#include "tool_common.h"
#include "usemem_report.h"
#include "ztier/page.h"

namespace ztier::tool {
namespace {

constexpr const char kCommand[] = "ztier bench readahead";
constexpr const char kSynopsis[] =
    "[--corpus FILE] [--size SIZE] [--codec NAME] [--runs N] "
    "[--page-cluster N] [--fault-pages N] [--json FILE] [--plot DIR]";
constexpr const char kAbout[] =
    "fault-in on a ztier region, two sections in one command.\n"
    "1. readahead (as in the zswap decompress batching series): a "
    "paged-out region\n   read in order with page_cluster 0 and "
    "--page-cluster, alternating; pages/s,\n   MB/s, swap_ra, "
    "swap_ra_hit and the line\n   `page_cluster 3 / page_cluster 0: "
    "X.XXx`.\n"
    "2. fault-in latency: one read per page in random order, each "
    "timed, of a\n   paged-out region and of an untouched one "
    "(first-touch faults): median,\n   p90, p99, max in microseconds, "
    "beside a bare UFFDIO_COPY fault measured\n   in the same run and "
    "the one measured earlier on the 2-vCPU development\n   machine.\n"
    "Needs userfaultfd (root, or vm.unprivileged_userfaultfd=1).";
// Measured on the 2-vCPU development machine: a 64 MiB region touched in
// order, one byte per page, by one thread, while another answered each
// MISSING read fault with one 4 KiB UFFDIO_COPY.
constexpr const char kBareFaultLine[] =
    "bare UFFDIO_COPY 4K fault measured on the 2-vCPU development machine: "
    "p50 14.0 \xC2\xB5s, p99 27.6 \xC2\xB5s (default scheduler); 7.55 "
    "\xC2\xB5s p50 when handler and faulter share a vCPU";
constexpr double kBareP50Us = 14.0;
constexpr double kBareP99Us = 27.6;
constexpr double kBarePinnedP50Us = 7.55;

struct Config {
  std::string corpus_path;
  std::string corpus_name;
  std::size_t corpus_pages = 0;
  std::size_t size_bytes = 0;
  std::string codec;
  std::size_t runs = 5;
  unsigned page_cluster = 3;  // the compared value
  std::size_t fault_pages = 16384;
  std::uint32_t seed = 301;
  std::string json_path;
};

struct SeqRun {
  std::size_t run = 0;                 // 1-based
  std::vector<SeqReadSample> samples;  // in the order they ran
};

// ---- flags ----

struct Flags {
  std::string corpus = kDefaultCorpusFile;
  std::string size = "256M";
  std::string codec = "lz4";
  std::int64_t runs = 5;
  std::int64_t page_cluster = 3;
  std::int64_t fault_pages = 16384;
  std::string json;
  std::string plot;
};

void DeclareFlags(FlagSet& flags, Flags* f) {
  AddCorpusFileFlag(flags, &f->corpus,
                    "pages to fill the regions with, repeated as needed");
  flags.AddString("size", &f->size, "SIZE",
                  "region of the readahead section (default 256M; K/M/G "
                  "suffixes)");
  flags.AddString("codec", &f->codec, "NAME", "region codec (default lz4)");
  flags.AddInt("runs", &f->runs, "N",
               "readahead runs, page_cluster 0 and --page-cluster alternating "
               "within each "
               "(default 5; 0 skips the section)",
               0, 1000);
  flags.AddInt("page-cluster", &f->page_cluster, "N",
               "the page_cluster compared with 0 (default 3)", 1, 5);
  flags.AddInt("fault-pages", &f->fault_pages, "N",
               "pages touched in the fault-in latency section (default "
               "16384; 0 skips it)",
               0, 1 << 22);
  AddJsonFlag(flags, &f->json);
  AddPlotFlag(flags, &f->plot);
}

int CheckFlags(const Flags& f, Config* cfg) {
  auto size = ParseSizeFlag(f.size, kPageSize, "4K");
  if (!size.has_value()) {
    PrintError(kCommand, size.error().message());
    return 2;
  }
  if (Status s = CheckCodecName(f.codec); !s.ok()) {
    PrintError(kCommand, s.message());
    return 2;
  }
  cfg->corpus_path = f.corpus;
  cfg->size_bytes = *size;
  cfg->codec = f.codec;
  cfg->runs = static_cast<std::size_t>(f.runs);
  cfg->page_cluster = static_cast<unsigned>(f.page_cluster);
  cfg->fault_pages = static_cast<std::size_t>(f.fault_pages);
  cfg->json_path = f.json;
  return 0;
}

// ---- sequential-read summaries ----

struct Series {
  std::vector<double> pages_s;
  std::vector<double> mb_s;
  const SeqReadSample* last = nullptr;
};

Series Collect(const std::vector<SeqRun>& runs, unsigned page_cluster) {
  Series s;
  for (const SeqRun& r : runs) {
    for (const SeqReadSample& x : r.samples) {
      if (x.page_cluster != page_cluster) continue;
      s.pages_s.push_back(x.pages_s);
      s.mb_s.push_back(x.mb_s);
      s.last = &x;
    }
  }
  return s;
}

// pages/s of page_cluster `pc` over page_cluster 0, within each run.
std::vector<double> Ratios(const std::vector<SeqRun>& runs, unsigned pc) {
  std::vector<double> out;
  for (const SeqRun& r : runs) {
    double base = 0;
    double other = 0;
    for (const SeqReadSample& x : r.samples) {
      if (x.page_cluster == 0) base = x.pages_s;
      if (x.page_cluster == pc) other = x.pages_s;
    }
    if (base > 0 && other > 0) out.push_back(other / base);
  }
  return out;
}

// ---- latency percentiles ----

struct Percentiles {
  std::size_t n = 0;
  double median_us = 0;
  double p90_us = 0;
  double p99_us = 0;
  double max_us = 0;
};

// By bench_stats.h's percentile rule.
Percentiles LatencyPercentiles(std::vector<std::uint32_t> ns) {
  Percentiles p;
  p.n = ns.size();
  if (ns.empty()) return p;
  std::sort(ns.begin(), ns.end());
  auto at = [&](double q) {
    return ns[PercentileIndex(ns.size(), q)] / 1000.0;
  };
  p.median_us = at(0.5);
  p.p90_us = at(0.9);
  p.p99_us = at(0.99);
  p.max_us = ns.back() / 1000.0;
  return p;
}

void AddLatencyRow(TextTable& t, const std::string& name,
                   const Percentiles& p) {
  if (p.n == 0) {
    t.AddRow({name, "0", "-", "-", "-", "-"});
    return;
  }
  t.AddRow({name, std::to_string(p.n), FormatDouble(p.median_us, 2),
            FormatDouble(p.p90_us, 2), FormatDouble(p.p99_us, 2),
            FormatDouble(p.max_us, 1)});
}

// ---- text ----

std::string ConfigText(const Config& cfg) {
  std::string t = "config: corpus=" + cfg.corpus_path + " (" + cfg.corpus_name +
                  ", " + std::to_string(cfg.corpus_pages) +
                  " pages, repeated to fill) codec=" + cfg.codec + "\n";
  if (cfg.runs > 0) {
    t += "  readahead: region " + std::to_string(cfg.size_bytes) + " bytes (" +
         std::to_string(cfg.size_bytes / kPageSize) +
         " pages), no budget; fill, Pageout all (untimed), then timed: read "
         "in order, one 8-byte load + memcmp per page; page_cluster 0 and " +
         std::to_string(cfg.page_cluster) + " alternating, " +
         std::to_string(cfg.runs) + " runs\n";
  }
  if (cfg.fault_pages > 0) {
    t += "  fault-in latency: " + std::to_string(cfg.fault_pages) +
         " pages, page_cluster 0, one read per page in random order "
         "(mt19937 seed " +
         std::to_string(cfg.seed) +
         "), each touch timed with steady_clock; stored (after Pageout), "
         "first touch (a fresh region) and bare (a handler that only "
         "copies)\n";
  }
  return t;
}

std::string SeqText(const Config& cfg, const std::vector<SeqRun>& runs) {
  std::string t =
      "readahead: sequential read of a paged-out region (as in the zswap "
      "decompress batching series)\n";
  TextTable table(
      {"variant", "pages/s median (min-max)", "MB/s median (min-max)", "cv%",
       "stored", "faults", "swap_ra", "swap_ra_hit"},
      {Align::kLeft, Align::kRight, Align::kRight, Align::kRight, Align::kRight,
       Align::kRight, Align::kRight, Align::kRight});
  for (unsigned pc : {0u, cfg.page_cluster}) {
    const Series s = Collect(runs, pc);
    if (s.last == nullptr) continue;
    table.AddRow({"page_cluster " + std::to_string(pc),
                  FormatSpread(s.pages_s, 0), FormatSpread(s.mb_s, 1),
                  FormatDouble(Summarize(s.mb_s).cv_percent, 1),
                  std::to_string(s.last->after_pageout.stored_pages),
                  std::to_string(s.last->after_read.faults -
                                 s.last->after_pageout.faults),
                  std::to_string(s.last->after_read.swap_ra),
                  std::to_string(s.last->after_read.swap_ra_hit)});
  }
  t += table.Render();
  t += "  (stored: pages in the pool after Pageout; faults, swap_ra, "
       "swap_ra_hit: during the read, last run of each variant; the region "
       "counts a read-ahead hit on the page's first write, and this pass "
       "only reads)\n";
  const SampleStats r = Summarize(Ratios(runs, cfg.page_cluster));
  t += "page_cluster " + std::to_string(cfg.page_cluster) +
       " / page_cluster 0: " + FormatDouble(r.median, 2) +
       "x (pages/s; median of per-run ratios, " + FormatDouble(r.min, 2) + "-" +
       FormatDouble(r.max, 2) + ")\n";
  return t;
}

std::string LatencyText(const Config& cfg, const FaultLatencySample& s) {
  std::string t = "fault-in latency: " + std::to_string(cfg.fault_pages) +
                  " pages, " + cfg.codec +
                  ", page_cluster 0, random order (microseconds)\n";
  TextTable table({"touches", "n", "median", "p90", "p99", "max"},
                  {Align::kLeft, Align::kRight, Align::kRight, Align::kRight,
                   Align::kRight, Align::kRight});
  AddLatencyRow(table, "stored, faulted",
                LatencyPercentiles(s.stored.fault_ns));
  if (!s.stored.hit_ns.empty()) {
    AddLatencyRow(table, "stored, mapped (refused by Pageout)",
                  LatencyPercentiles(s.stored.hit_ns));
  }
  AddLatencyRow(table, "first touch, faulted",
                LatencyPercentiles(s.first_touch.fault_ns));
  std::vector<std::uint32_t> all = s.first_touch.fault_ns;
  all.insert(all.end(), s.first_touch.hit_ns.begin(),
             s.first_touch.hit_ns.end());
  AddLatencyRow(table, "first touch, all", LatencyPercentiles(all));
  AddLatencyRow(table, "bare UFFDIO_COPY, faulted (measured now)",
                LatencyPercentiles(s.bare.fault_ns));
  t += table.Render();
  const std::uint64_t ft_faults =
      s.first_touch.after.faults - s.first_touch.before.faults;
  t += "  stored: " +
       std::to_string(s.stored.after.faults - s.stored.before.faults) +
       " faults, zswpin " +
       std::to_string(s.stored.after.zswpin - s.stored.before.zswpin) +
       "; first touch: " + std::to_string(ft_faults) + " faults for " +
       std::to_string(cfg.fault_pages) + " pages (" +
       FormatDouble(ft_faults > 0 ? static_cast<double>(cfg.fault_pages) /
                                        static_cast<double>(ft_faults)
                                  : 0,
                    1) +
       " pages mapped per fault)\n";
  t += "  bare: the same touches on plain anonymous memory whose handler "
       "thread only answers each fault with one 4 KiB UFFDIO_COPY\n";
  const double region_p50 = LatencyPercentiles(s.stored.fault_ns).median_us;
  const double bare_p50 = LatencyPercentiles(s.bare.fault_ns).median_us;
  if (bare_p50 > 0) {
    t += "stored fault-in / bare UFFDIO_COPY fault (p50): " +
         FormatDouble(region_p50 / bare_p50, 2) + "x\n";
  }
  t += std::string(kBareFaultLine) + "\n";
  return t;
}

// ---- charts (plot.h) ----

Chart SeqChart(const Config& cfg, const std::vector<SeqRun>& runs) {
  Chart c{.name = "readahead",
          .title = "Sequential read of a paged-out " +
                   FormatMiB(cfg.size_bytes) + " region (" + cfg.codec +
                   "): without and with readahead (" +
                   MedianOfRuns(runs.size()) + ")",
          .x_label = "readahead window",
          .y_label = "read throughput (MB/s)",
          .style = PlotStyle::kBars};
  PlotSeries bars{.title = "MB/s"};
  int x = 0;
  for (unsigned pc : {0u, cfg.page_cluster}) {
    const Series s = Collect(runs, pc);
    c.x_tics.push_back({static_cast<double>(x),
                        "page_cluster " + std::to_string(pc) + " (" +
                            std::to_string(1u << pc) +
                            (pc == 0 ? " page)" : " pages)")});
    if (!s.mb_s.empty()) {
      const SampleStats st = Summarize(s.mb_s);
      bars.points.push_back({static_cast<double>(x), st.median, st.min, st.max});
    }
    ++x;
  }
  c.series.push_back(std::move(bars));
  return c;
}

// One run: percentiles without error bars.
Chart FaultChart(const Config& cfg, const FaultLatencySample& s) {
  Chart c{.name = "fault-latency",
          .title = "Fault-in latency of one 4 KiB page (" + cfg.codec + ", " +
                   std::to_string(cfg.fault_pages) +
                   " pages in random order, one run)",
          .x_label = "percentile of the faulting touches",
          .y_label = "latency (microseconds, log scale)",
          .log_y = true,
          .x_tics = {{0, "p50"}, {1, "p90"}, {2, "p99"}, {3, "max"}}};
  const std::pair<const char*, const std::vector<std::uint32_t>*> kLines[] = {
      {"stored page (decompressed)", &s.stored.fault_ns},
      {"first touch (zeroed run)", &s.first_touch.fault_ns},
      {"bare UFFDIO_COPY (plain memory)", &s.bare.fault_ns}};
  for (const auto& [title, ns] : kLines) {
    const Percentiles p = LatencyPercentiles(*ns);
    PlotSeries line{.title = title};
    if (p.n > 0) {
      int x = 0;
      for (double us : {p.median_us, p.p90_us, p.p99_us, p.max_us}) {
        // A log axis has no 0; no fault is that short.
        line.points.push_back({static_cast<double>(x++), std::max(us, 0.001)});
      }
    }
    c.series.push_back(std::move(line));
  }
  return c;
}

// ---- JSON ----

void WriteSeqSample(JsonWriter& j, const SeqReadSample& x) {
  j.BeginObject();
  j.UintField("page_cluster", x.page_cluster);
  j.UintField("pages", x.pages);
  j.DoubleField("seconds", x.seconds, 6);
  j.DoubleField("pages_s", x.pages_s, 0);
  j.DoubleField("mb_s", x.mb_s, 2);
  j.UintField("mismatches", x.mismatches);
  j.Key("stats_after_pageout");
  WriteRegionStatsJson(j, x.after_pageout);
  j.Key("stats_after_read");
  WriteRegionStatsJson(j, x.after_read);
  j.EndObject();
}

void WritePercentiles(JsonWriter& j, const Percentiles& p) {
  j.BeginObject();
  j.UintField("n", p.n);
  j.DoubleField("median_us", p.median_us, 3);
  j.DoubleField("p90_us", p.p90_us, 3);
  j.DoubleField("p99_us", p.p99_us, 3);
  j.DoubleField("max_us", p.max_us, 3);
  j.EndObject();
}

void WriteTouchSeries(JsonWriter& j, const TouchSeries& t) {
  j.BeginObject();
  j.Key("faulted");
  WritePercentiles(j, LatencyPercentiles(t.fault_ns));
  j.Key("mapped");
  WritePercentiles(j, LatencyPercentiles(t.hit_ns));
  std::vector<std::uint32_t> all = t.fault_ns;
  all.insert(all.end(), t.hit_ns.begin(), t.hit_ns.end());
  j.Key("all");
  WritePercentiles(j, LatencyPercentiles(all));
  j.UintField("mismatches", t.mismatches);
  j.Key("stats_before");
  WriteRegionStatsJson(j, t.before);
  j.Key("stats_after");
  WriteRegionStatsJson(j, t.after);
  j.EndObject();
}

Status WriteJson(const std::string& path, const MachineInfo& machine,
                 const Config& cfg, const std::vector<SeqRun>& runs,
                 const FaultLatencySample* latency) {
  JsonWriter j;
  BeginResultJson(j, "ztier bench readahead", machine);
  j.Key("config");
  j.BeginObject();
  j.StringField("corpus", cfg.corpus_path);
  j.StringField("corpus_name", cfg.corpus_name);
  j.UintField("corpus_pages", cfg.corpus_pages);
  j.StringField("codec", cfg.codec);
  j.UintField("size_bytes", cfg.size_bytes);
  j.UintField("runs", cfg.runs);
  j.UintField("page_cluster", cfg.page_cluster);
  j.UintField("fault_pages", cfg.fault_pages);
  j.UintField("seed", cfg.seed);
  j.EndObject();

  j.Key("readahead");
  if (runs.empty()) {
    j.Null();
  } else {
    j.BeginObject();
    j.Key("runs");
    j.BeginArray();
    for (const SeqRun& r : runs) {
      j.BeginObject();
      j.UintField("run", r.run);
      j.Key("samples");
      j.BeginArray();
      for (const SeqReadSample& x : r.samples) WriteSeqSample(j, x);
      j.EndArray();
      j.EndObject();
    }
    j.EndArray();
    j.Key("summary");
    j.BeginObject();
    for (unsigned pc : {0u, cfg.page_cluster}) {
      const Series s = Collect(runs, pc);
      j.Key("page_cluster_" + std::to_string(pc));
      j.BeginObject();
      j.UintField("runs", s.pages_s.size());
      WriteStatsJson(j, "pages_s", Summarize(s.pages_s), 0);
      WriteStatsJson(j, "mb_s", Summarize(s.mb_s), 2);
      j.EndObject();
    }
    WriteRatiosJson(j, "ratio_pages_s", Ratios(runs, cfg.page_cluster));
    j.EndObject();
    j.EndObject();
  }

  j.Key("fault_latency");
  if (latency == nullptr) {
    j.Null();
  } else {
    j.BeginObject();
    j.Key("stored");
    WriteTouchSeries(j, latency->stored);
    j.Key("first_touch");
    WriteTouchSeries(j, latency->first_touch);
    j.Key("bare_uffdio_copy");
    WriteTouchSeries(j, latency->bare);
    j.Key("reference_bare_uffdio_copy_4k");
    j.BeginObject();
    j.Key("source");
    j.String(
        "bare UFFDIO_COPY 4K fault measured on the 2-vCPU development "
        "machine");
    j.DoubleField("p50_us", kBareP50Us, 2);
    j.DoubleField("p99_us", kBareP99Us, 2);
    j.DoubleField("same_vcpu_p50_us", kBarePinnedP50Us, 2);
    j.EndObject();
    j.EndObject();
  }
  j.EndObject();
  return WriteJsonFile(path, j);
}

}  // namespace

int RunBenchReadahead(std::span<const std::string_view> args) {
  Flags f;
  FlagSet flags(kCommand, kSynopsis);
  DeclareFlags(flags, &f);
  if (auto rc = flags.ParseCommandLine(args, kAbout)) return *rc;
  Config cfg;
  if (int rc = CheckFlags(f, &cfg); rc != 0) return rc;
  auto corpus = LoadCorpus(cfg.corpus_path);
  if (!corpus.has_value()) {
    PrintError(kCommand, corpus.error().message());
    return 1;
  }
  cfg.corpus_name = corpus->name();
  cfg.corpus_pages = corpus->size();

  const MachineInfo machine = GetMachineInfo();
  std::printf("%s\n%s", MachineLine(machine).c_str(), ConfigText(cfg).c_str());
  std::fflush(stdout);

  ChartWriter charts(kCommand, f.plot);
  Progress progress;
  std::vector<SeqRun> runs;
  for (std::size_t run = 0; run < cfg.runs; ++run) {
    SeqRun r{.run = run + 1, .samples = {}};
    std::vector<unsigned> order = {0, cfg.page_cluster};
    if (run % 2 == 1) std::reverse(order.begin(), order.end());
    for (unsigned pc : order) {
      const std::string label = "[" + RunLabel(run + 1, cfg.runs) +
                                "] page_cluster " + std::to_string(pc);
      progress.Update(label);
      auto s = RunSequentialRead({.size_bytes = cfg.size_bytes,
                                  .codec = cfg.codec,
                                  .page_cluster = pc},
                                 *corpus);
      if (!s.has_value()) {
        progress.Clear();
        PrintError(kCommand, "FATAL: " + label + ": " + s.error().ToString());
        return 1;
      }
      if (s->mismatches > 0) {
        progress.Clear();
        PrintError(kCommand, "FATAL: " + label + ": " +
                                 std::to_string(s->mismatches) + " of " +
                                 std::to_string(s->pages) +
                                 " pages read back wrong");
        return 1;
      }
      r.samples.push_back(std::move(*s));
    }
    runs.push_back(std::move(r));
  }
  progress.Clear();
  if (!runs.empty()) {
    std::printf("\n%s", SeqText(cfg, runs).c_str());
    std::fflush(stdout);
  }

  std::optional<FaultLatencySample> latency;
  if (cfg.fault_pages > 0) {
    progress.Update("fault-in latency");
    auto s = RunFaultLatency(
        {.pages = cfg.fault_pages, .codec = cfg.codec, .seed = cfg.seed},
        *corpus);
    progress.Clear();
    if (!s.has_value()) {
      PrintError(kCommand, "FATAL: fault-in latency: " + s.error().ToString());
      return 1;
    }
    if (s->stored.mismatches + s->first_touch.mismatches + s->bare.mismatches >
        0) {
      PrintError(
          kCommand,
          "FATAL: fault-in latency: " + std::to_string(s->stored.mismatches) +
              " stored, " + std::to_string(s->first_touch.mismatches) +
              " first-touch and " + std::to_string(s->bare.mismatches) +
              " bare pages read back wrong");
      return 1;
    }
    latency = std::move(*s);
    std::printf("\n%s", LatencyText(cfg, *latency).c_str());
    std::fflush(stdout);
  }

  if (int rc = FinishJson(kCommand, cfg.json_path, [&](const std::string& p) {
        return WriteJson(p, machine, cfg, runs,
                         latency.has_value() ? &*latency : nullptr);
      })) {
    return rc;
  }
  std::vector<Chart> drawn;
  if (!runs.empty()) drawn.push_back(SeqChart(cfg, runs));
  if (latency.has_value()) drawn.push_back(FaultChart(cfg, *latency));
  return charts.Write(drawn) ? 0 : 1;
}

}  // namespace ztier::tool
