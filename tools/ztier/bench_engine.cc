// File: tools/ztier/bench_engine.cc
//
// `ztier bench engine` (bench_engine.h): parses the flags, loads the
// corpora, runs each case's variants through RunVariants (bench_harness.h)
// and adds its tables and charts to one Report (bench_report.h).
#include "bench_engine.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <iterator>
#include <optional>
#include <tuple>

#include "bench_harness.h"
#include "bench_report.h"
#include "bench_stats.h"
#include "engine_measure.h"
#include "plot.h"
#include "tool_common.h"
#include "ztier/codec.h"
#include "ztier/worker_pool.h"

namespace ztier::tool {
namespace {

constexpr const char kCommand[] = "ztier bench engine";
constexpr const char kSynopsis[] =
    "[--corpus FILE]... [--corpus-dir DIR] [--codec NAME]... [--runs N] "
    "[--threads N,N,...] [--json FILE] [--plot DIR]";
constexpr const char kAbout[] =
    "codec and store throughput (MB/s of uncompressed pages) and "
    "memory use, per codec and corpus.";
// Fresh memory probed after each run (machine_info.h): 16 steps of 2 MiB.
constexpr std::size_t kPopulateProbeBytes = std::size_t{32} << 20;

using P = BenchPath;
using O = BenchOp;
constexpr BatchBackend kSer = BatchBackend::kSerial;
constexpr BatchBackend kPar = BatchBackend::kParallel;

struct EngineCase {
  std::string codec, corpus;
  std::size_t pages = 0;
  std::vector<std::size_t> counts;      // thread counts, ascending, 1 first
  Measurements m;  // figure BenchOpName(op) of variant VariantName(v)
  std::vector<double> cross_cpu_rtt_ns;  // one per measured run
  std::vector<double> populate_2mib_us;  // FreshMemoryPopulateUs() of each
  SizeFigures sizes;
};

// The samples of figure `op` (store variants give three) of a variant.
std::vector<double> Of(const EngineCase& c, P p, O op, std::size_t threads,
                       std::size_t batch = 1, BatchBackend b = kSer) {
  const EngineVariant v{p, p == P::kStore ? O::kStore : op, threads, batch, b};
  return c.m.Of(VariantName(v), BenchOpName(op));
}

double Median(const std::vector<double>& s) { return Summarize(s).median; }

// The batch-1 serial lines of the scaling table and the charts.
constexpr EngineVariant kLines[] = {{P::kCodec, O::kCompress},
                                    {P::kCodec, O::kDecompress},
                                    {P::kStore, O::kStore},
                                    {P::kStore, O::kLoad},
                                    {P::kStore, O::kOverwrite}};

// The start of every row of a case's tables.
Row& KeyCells(Table& t, const EngineVariant& k) {
  return t.AddRow()
      .Text("path", std::string(BenchPathName(k.path)))
      .Text("op", std::string(BenchOpName(k.op)))
      .Int("threads", static_cast<std::int64_t>(k.threads));
}

// engine-threads-CODEC (`threads`: batch 1 serial against threads, each line
// with its dashed ideal) or engine-batch-CODEC (bars: batch 1 serial, batch
// 8 serial and parallel, one thread).
Chart CaseChart(const EngineCase& c, std::size_t runs, bool threads) {
  const std::vector<std::size_t>& counts = c.counts;
  Chart chart{
      .name = std::string("engine-") + (threads ? "threads-" : "batch-") +
              c.codec,
      .title = c.codec + " on " + c.corpus + ": throughput against " +
               (threads ? "threads (batch 1, serial; "
                        : "batch size and backend (1 thread; ") +
               MedianOfRuns(runs) + ")",
      .x_label = threads ? "threads" : "batch size (pages) and batch backend",
      .y_label = "throughput (MB/s of uncompressed pages)",
      .style = threads ? PlotStyle::kLines : PlotStyle::kBars,
      .log_x = threads && counts.back() >= 4};
  std::vector<EngineVariant> points;  // x: threads, or the bar's position
  if (threads) {
    for (std::size_t n : counts) {
      points.push_back({P::kCodec, O::kCompress, n});
      chart.x_tics.push_back({static_cast<double>(n), std::to_string(n)});
    }
  } else {
    for (BatchBackend b : {kSer, kSer, kPar}) {
      points.push_back({P::kCodec, O::kCompress, 1,
                        points.empty() ? 1 : kMaxBatchSize, b});
      chart.x_tics.push_back({points.size() - 1.0,
                              "batch " + std::to_string(points.back().batch) +
                                  ", " + std::string(BatchBackendName(b))});
    }
  }
  // The measured series first, then each one's ideal, dashed, in its colour.
  std::vector<PlotSeries> ideals;
  for (int i = 0; i < (threads ? 4 : 5); ++i) {
    const EngineVariant& k = kLines[i];
    const std::string title = std::string(BenchPathName(k.path)) + " " +
                              std::string(BenchOpName(k.op));
    PlotSeries line{.title = title, .color = threads ? i + 1 : 0};
    PlotSeries ideal{.title = "ideal: " + title + " x threads",
                     .dashed = true,
                     .color = i + 1};
    const std::vector<double> one = Of(c, k.path, k.op, 1);
    for (std::size_t j = 0; j < points.size(); ++j) {
      const EngineVariant& p = points[j];
      const std::vector<double> s =
          Of(c, k.path, k.op, p.threads, p.batch, p.backend);
      if (s.empty() || one.empty()) continue;
      const double x = threads ? static_cast<double>(p.threads) : j;
      line.points.push_back(SpreadPoint(x, s));
      ideal.points.push_back({x, Median(one) * x});
    }
    chart.series.push_back(std::move(line));
    if (threads) ideals.push_back(std::move(ideal));
  }
  std::move(ideals.begin(), ideals.end(), std::back_inserter(chart.series));
  return chart;
}

// One case's tables, and its charts when `charts`.
void AddCase(Report& report, const EngineCase& c, bool charts,
             std::size_t runs) {
  const std::string name = c.codec + " " + c.corpus;
  const std::string title = c.codec + " / " + c.corpus;
  Table& t = report.AddTable(name, title + " (" + std::to_string(c.pages) +
                                       " pages), MB/s");
  // By op, then as run: StandardVariants orders threads, batch, backend.
  for (const EngineVariant& line : kLines) {
    for (const EngineVariant& v : StandardVariants(c.counts)) {
      if (v.path != line.path || (v.path == P::kCodec && v.op != line.op)) {
        continue;
      }
      KeyCells(t, {line.path, line.op, v.threads})
          .Int("batch", static_cast<std::int64_t>(v.batch))
          .Text("backend", std::string(BatchBackendName(v.backend)))
          .Figure("MB/s", Of(c, line.path, line.op, v.threads, v.batch,
                             v.backend),
                  1, kRange | kCv);
    }
  }
  if (c.counts.size() > 1) {
    Table& s = report.AddTable(
        name + " scaling",
        title + ": throughput against threads (batch 1, serial), MB/s; "
                "ideal = threads x the 1-thread median");
    for (const EngineVariant& line : kLines) {
      const double one = Median(Of(c, line.path, line.op, 1));
      for (std::size_t n : c.counts) {
        const double ideal = one * static_cast<double>(n);
        const std::vector<double> f = Of(c, line.path, line.op, n);
        KeyCells(s, {line.path, line.op, n})
            .Figure("MB/s", f, 1, kRange | kCv)
            .Number("ideal", ideal, 1)
            .Text("of ideal", FormatDouble(100 * Median(f) / ideal, 0) + "%");
      }
    }
  }
  std::vector<double> steps = c.populate_2mib_us;
  report.AddTable(name + " conditions", title + ": the machine after each run")
      .AddRow()
      .Figure("cross-CPU rtt ns", c.cross_cpu_rtt_ns, 0)
      .Int("2 MiB steps", static_cast<std::int64_t>(steps.size()))
      .Figure("fresh 2 MiB us", steps, 0)
      .Number("fresh p90", steps.empty() ? 0 : Percentile(steps, 0.9), 0);
  if (!charts) return;
  if (c.counts.size() > 1) report.AddChart(CaseChart(c, runs, true));
  report.AddChart(CaseChart(c, runs, false));
}

// The "sizes" and "derived" tables of every case.
void AddSummary(Report& report, std::span<const EngineCase> cases) {
  Table& sizes = report.AddTable(
      "sizes",
      "sizes (threads=1 batch=1 store; after_compact: a random half "
      "discarded, then Compact())");
  const auto mib = [](std::uint64_t b) { return b / 1048576.0; };
  const auto over = [](std::uint64_t a, std::uint64_t b) {
    return static_cast<double>(a) / static_cast<double>(b);
  };
  for (const EngineCase& c : cases) {
    const SizeFigures& f = c.sizes;
    sizes.AddRow()
        .Text("codec", c.codec)
        .Text("corpus", c.corpus)
        .Number("ratio", f.ratio, 3)
        .Number("compr_MiB", mib(f.compressed_bytes), 2)
        .Number("mem_used_MiB", mib(f.mem_used_total), 2)
        .Number("mem/compr", over(f.mem_used_total, f.compressed_bytes), 3)
        .Number("meta_B/page", f.metadata_bytes_per_page, 1)
        .Int("huge", static_cast<std::int64_t>(f.huge_pages))
        .Int("same", static_cast<std::int64_t>(f.same_pages))
        .Number("after_compact_MiB", mib(f.mem_used_total_after_compact), 2)
        .Number("after/compr",
                over(f.mem_used_total_after_compact,
                     f.compressed_bytes_after_compact),
                3)
        .Int("pages_compacted", static_cast<std::int64_t>(f.pages_compacted));
  }
  Table& d = report.AddTable(
      "derived",
      "derived ratios of medians (same run; targets: store/compress lz4 >= "
      "0.85, load/(decompress+copy) >= 0.80, batch8 par/ser lz4 anon-cc1plus "
      ">= 1.6 on 2 cores)");
  for (const EngineCase& c : cases) {
    const auto med = [&](P p, O op, std::size_t batch = 1,
                         BatchBackend b = kSer) {
      return Median(Of(c, p, op, 1, batch, b));
    };
    const double compress = med(P::kCodec, O::kCompress);
    const double lz4 = c.codec == "lz4" ? 0.85 : 0;
    const double cc1 = lz4 && c.corpus.starts_with("anon-cc1plus") ? 1.6 : 0;
    const std::tuple<const char*, double, double> ratios[] = {
        {"store/compress", med(P::kStore, O::kStore) / compress, lz4},
        {"overwrite/compress", med(P::kStore, O::kOverwrite) / compress, lz4},
        {"load/(decompress+copy)",
         med(P::kStore, O::kLoad) / med(P::kCodec, O::kDecompress), 0.80},
        {"batch8 store parallel/serial",
         med(P::kStore, O::kStore, kMaxBatchSize, kPar) /
             med(P::kStore, O::kStore, kMaxBatchSize),
         cc1}};
    for (const auto& [name, value, target] : ratios) {
      Row& row = d.AddRow()
                     .Text("codec", c.codec)
                     .Text("corpus", c.corpus)
                     .Text("ratio", name)
                     .Number("value", value, 3);
      if (target > 0) {
        row.Number("target >=", target, 2)
            .Text("met", !std::isfinite(value) ? "?"
                         : value >= target        ? "yes"
                                                  : "NO");
      }
    }
  }
}

// --threads "1,2,4" -> {1, 2, 4}: each in [1, 1024], sorted, unique, and 1
// always. None given: 1, 2, 4, ... up to `cores`, and `cores`.
Result<std::vector<std::size_t>> ThreadCounts(
    const std::vector<std::string>& items, std::size_t cores) {
  std::vector<std::size_t> counts = {1};
  for (std::size_t n = 2; items.empty() && n < cores; n *= 2) {
    counts.push_back(n);
  }
  if (items.empty()) counts.push_back(std::max<std::size_t>(1, cores));
  for (const std::string& item : items) {
    std::size_t n = 0;
    const char* end = item.data() + item.size();
    if (std::from_chars(item.data(), end, n).ptr != end || item.empty() ||
        n < 1 || n > 1024) {
      return Err(Status::InvalidArgument(
          "--threads " + item +
          ": each thread count must be a number from 1 to 1024"));
    }
    counts.push_back(n);
  }
  std::sort(counts.begin(), counts.end());
  counts.erase(std::unique(counts.begin(), counts.end()), counts.end());
  return counts;
}

struct Config {
  BenchFlags common;
  std::vector<std::size_t> thread_counts;  // ascending, 1 first
  std::vector<std::string> codecs;
  std::vector<std::string> paths;  // the --corpus files, then --corpus-dir's
};

// The command line into *cfg; the exit status when it is bad (2), names no
// corpus (1), or asked for --help (0).
std::optional<int> ParseFlags(std::span<const std::string_view> args,
                              unsigned cores, Config* cfg) {
  std::string corpus_dir = kDefaultCorpusDir;
  std::vector<std::string> codecs, threads;
  FlagSet flags(kCommand, kSynopsis);
  flags.AddList("corpus", &cfg->paths, "FILE",
                "corpus file (.pages.zst or plain pages); repeatable");
  AddCorpusDirFlag(flags, &corpus_dir, "; used when no --corpus is given");
  flags.AddList("codec", &codecs, "NAME",
                "codec to measure; repeatable, or a comma list (default: "
                "every registered codec)");
  flags.AddList("threads", &threads, "N,N,...",
                "thread counts for the batch-1 (and batch-8 serial) "
                "variants, a comma list; 1 is always measured (default: 1, "
                "2, 4, ... up to the online cores, and the online cores)");
  cfg->common.runs = 5;
  AddBenchFlags(flags, &cfg->common);
  if (auto rc = flags.ParseCommandLine(args, kAbout)) return *rc;
  auto counts = ThreadCounts(threads, cores);
  if (!counts.has_value()) {
    return ReportUsageError(kCommand, counts.error().message());
  }
  cfg->thread_counts = std::move(*counts);
  if (codecs.empty()) {
    for (std::string_view name : CodecNames()) codecs.emplace_back(name);
  }
  if (Status s = AddCodecs(codecs, &cfg->codecs); !s.ok()) {
    return ReportUsageError(kCommand, s.message());
  }
  if (!cfg->paths.empty() && !flags.WasSet("corpus-dir")) return std::nullopt;
  auto found = FindCorpusDir(
      corpus_dir,
      "Pass corpus files with --corpus FILE (a .pages.zst file, or any plain "
      "file read as 4096-byte pages; repeatable), or a folder of *.pages.zst "
      "files with --corpus-dir DIR.");
  if (!found.has_value()) {
    return ReportFailure(kCommand, found.error().message());
  }
  cfg->paths.insert(cfg->paths.end(), found->begin(), found->end());
  return std::nullopt;
}

// One codec on one corpus: RunVariants over its variants, with the
// machine's conditions probed once in every measured run, then the sizes.
Status MeasureCase(const Config& cfg, const MeasureOptions& options,
                   std::shared_ptr<const Codec> codec,
                   const corpus::PageSet& set, Progress& progress,
                   EngineCase* c) {
  const std::string label = "[" + c->codec + " " + set.name() + "]";
  progress.Update(label + " preparing");
  ZT_ASSIGN_OR_RETURN(auto measurer,
                      EngineMeasurer::Create(std::move(codec), set, options));
  std::vector<Variant> variants;
  for (const EngineVariant& v : StandardVariants(c->counts)) {
    variants.push_back(
        {VariantName(v), [&, v](std::size_t, Samples& out) -> Status {
           std::vector<OpSample> s;
           ZT_RETURN_IF_ERROR(measurer->Measure(v, &s));
           for (const OpSample& o : s) out.Add(BenchOpName(o.op), o.mb_s);
           return Status::Ok();
         }});
  }
  variants.push_back({"conditions", [&](std::size_t run, Samples&) -> Status {
                        if (run == 0) return Status::Ok();
                        c->cross_cpu_rtt_ns.push_back(CrossCpuRoundTripNs());
                        for (double us :
                             FreshMemoryPopulateUs(kPopulateProbeBytes)) {
                          c->populate_2mib_us.push_back(us);
                        }
                        return Status::Ok();
                      }});
  // The probe runs after every run's measurements, never between them.
  const RunPlan plan{.runs = static_cast<std::size_t>(cfg.common.runs),
                     .fixed_last = 1,
                     .label = label};
  ZT_ASSIGN_OR_RETURN(c->m, RunVariants(plan, variants, progress));
  progress.Update(label + " sizes");
  ZT_ASSIGN_OR_RETURN(c->sizes, measurer->MeasureSizes());
  return Status::Ok();
}

// The configuration: the report's conditions, and its lines ("config:
// runs=5 (+1 warm-up) ...", the corpus lines).
void AddConfig(Report& report, const Config& cfg, std::size_t workers,
               const std::vector<corpus::PageSet>& corpora) {
  std::string codecs, threads;
  for (const std::string& c : cfg.codecs) codecs += "," + c;
  for (std::size_t n : cfg.thread_counts) threads += "," + std::to_string(n);
  codecs.erase(0, 1);
  threads.erase(0, 1);
  const std::string runs = std::to_string(cfg.common.runs);
  const std::string batch = std::to_string(kMaxBatchSize);
  report.Condition("runs", runs);
  report.Condition("thread_counts", threads);
  report.Condition("parallel_workers", std::to_string(workers));
  report.Condition("batch", batch);
  report.Condition("codecs", codecs);
  std::string text = "config: runs=" + runs +
                     " (+1 warm-up, not counted), threads=" + threads +
                     ", parallel backend workers=" + std::to_string(workers) +
                     " (+ caller), batch=" + batch + ", codecs=" + codecs +
                     "\n";
  for (std::size_t i = 0; i < corpora.size(); ++i) {
    text += "corpus: " + corpora[i].name() + " (" +
            std::to_string(corpora[i].size()) + " pages) from " + cfg.paths[i] +
            "\n";
  }
  report.Line(text +
              "MB/s = 10^6 bytes of uncompressed pages per second; median, "
              "min and max over the runs; cv% = stddev/mean.\n"
              "decompress = decompress + one 4096-byte copy (the load path's "
              "limit).\n");
}

}  // namespace

int RunBenchEngine(std::span<const std::string_view> args) {
  const MachineInfo machine = GetMachineInfo();
  Config cfg;
  if (auto rc = ParseFlags(args, machine.cores, &cfg)) return *rc;
  std::vector<corpus::PageSet> corpora;
  for (const std::string& path : cfg.paths) {
    auto set = LoadCorpus(path);
    if (!set.has_value()) return ReportFailure(kCommand, set.error().message());
    corpora.push_back(std::move(*set));
  }
  // "threads - 1" helpers plus the caller, at least one so that "parallel"
  // differs from "serial".
  const std::size_t workers =
      std::max<std::size_t>(1, cfg.thread_counts.back() - 1);
  WorkerPool pool(workers);
  const MeasureOptions options{.all_threads = cfg.thread_counts.back(),
                               .pool = &pool,
                               .parallel_workers = workers};
  Report report(kCommand, machine);
  AddConfig(report, cfg, workers, corpora);
  std::vector<EngineCase> cases;
  Progress progress;
  for (const std::string& name : cfg.codecs) {
    auto codec = MakeCodec(name);
    if (!codec.has_value()) {
      return ReportFailure(kCommand,
                           "codec " + name + ": " + codec.error().ToString());
    }
    for (const corpus::PageSet& set : corpora) {
      EngineCase& c = cases.emplace_back(
          EngineCase{.codec = name, .corpus = set.name(), .pages = set.size(),
                     .counts = cfg.thread_counts});
      const Status s = MeasureCase(cfg, options, *codec, set, progress, &c);
      progress.Clear();
      if (!s.ok()) {
        std::fputs(report.Text().c_str(), stdout);  // the cases finished
        return ReportFailure(kCommand, "FATAL: codec " + name + ", corpus " +
                                           set.name() + ": " + s.ToString());
      }
      AddCase(report, c, &set == &corpora.front(), cfg.common.runs);
    }
  }
  AddSummary(report, cases);
  return report.Finish(kCommand, cfg.common);
}

}  // namespace ztier::tool
