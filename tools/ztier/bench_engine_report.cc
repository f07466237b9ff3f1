// File: tools/ztier/bench_engine_report.cc
//
// Tables and charts of `ztier bench engine` (bench_engine_report.h).
#include "bench_engine_report.h"

#include <algorithm>
#include <iterator>
#include <tuple>

#include "bench_stats.h"
#include "plot.h"

namespace ztier::tool {
namespace {

using P = BenchPath;
using O = BenchOp;
constexpr BatchBackend kSer = BatchBackend::kSerial;
constexpr BatchBackend kPar = BatchBackend::kParallel;

// The samples of figure `op` (store variants give three) of a variant.
std::vector<double> Of(const EngineCase& c, P p, O op, std::size_t threads,
                       std::size_t batch = 1, BatchBackend b = kSer) {
  const EngineVariant v{p, p == P::kStore ? O::kStore : op, threads, batch, b};
  return c.m.Of(VariantName(v), BenchOpName(op));
}

double Median(const std::vector<double>& s) { return Summarize(s).median; }

std::string OpTitle(const EngineVariant& k) {
  return std::string(BenchPathName(k.path)) + " " +
         std::string(BenchOpName(k.op));
}

// The batch-1 serial lines of the scaling table and the charts.
constexpr EngineVariant kLines[] = {{P::kCodec, O::kCompress},
                                    {P::kCodec, O::kDecompress},
                                    {P::kStore, O::kStore},
                                    {P::kStore, O::kLoad},
                                    {P::kStore, O::kOverwrite}};

// The thread counts the case measured, ascending, 1 first.
std::vector<std::size_t> Counts(const EngineCase& c) {
  std::vector<std::size_t> n = {1};
  for (const EngineVariant& v : c.variants) {
    if (v.threads > 1 && v.op == O::kCompress && v.batch == 1) {
      n.push_back(v.threads);
    }
  }
  return n;
}

// The start of every row of a case's tables.
Row& KeyCells(Table& t, const EngineVariant& k) {
  return t.AddRow()
      .Text("path", std::string(BenchPathName(k.path)))
      .Text("op", std::string(BenchOpName(k.op)))
      .Int("threads", static_cast<std::int64_t>(k.threads));
}

void AddTables(Report& report, const EngineCase& c) {
  const std::string name = c.codec + " " + c.corpus;
  const std::string title = c.codec + " / " + c.corpus;
  std::vector<EngineVariant> rows;
  for (EngineVariant v : c.variants) {
    if (v.path == P::kCodec) rows.push_back(v);
    for (O op : {O::kStore, O::kLoad, O::kOverwrite}) {
      if (v.path == P::kStore) rows.push_back({v.path, op, v.threads, v.batch,
                                               v.backend});
    }
  }
  auto order = [](const EngineVariant& v) {
    return std::make_tuple(v.path, v.op, v.threads, v.batch, v.backend);
  };
  std::stable_sort(rows.begin(), rows.end(), [&](const auto& a, const auto& b) {
    return order(a) < order(b);
  });
  Table& t = report.AddTable(name, title + " (" + std::to_string(c.pages) +
                                       " pages), MB/s");
  for (const EngineVariant& k : rows) {
    KeyCells(t, k)
        .Int("batch", static_cast<std::int64_t>(k.batch))
        .Text("backend", std::string(BatchBackendName(k.backend)))
        .Figure("MB/s", Of(c, k.path, k.op, k.threads, k.batch, k.backend), 1,
                kRange | kCv);
  }
  if (Counts(c).size() > 1) {
    Table& s = report.AddTable(
        name + " scaling",
        title + ": throughput against threads (batch 1, serial), MB/s; "
                "ideal = threads x the 1-thread median");
    for (const EngineVariant& line : kLines) {
      const double one = Median(Of(c, line.path, line.op, 1));
      for (std::size_t n : Counts(c)) {
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
}

// engine-threads-CODEC (`threads`: batch 1 serial against threads, each line
// with its dashed ideal) or engine-batch-CODEC (bars: batch 1 serial, batch
// 8 serial and parallel, one thread).
Chart CaseChart(const EngineCase& c, std::size_t runs, bool threads) {
  const std::vector<std::size_t> counts = Counts(c);
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
    PlotSeries line{.title = OpTitle(k), .color = threads ? i + 1 : 0};
    PlotSeries ideal{.title = "ideal: " + OpTitle(k) + " x threads",
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

}  // namespace

void AddCase(Report& report, const EngineCase& c, bool charts,
             std::size_t runs) {
  AddTables(report, c);
  if (!charts) return;
  if (Counts(c).size() > 1) report.AddChart(CaseChart(c, runs, true));
  report.AddChart(CaseChart(c, runs, false));
}

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
            .Text("met", value >= target ? "yes" : "NO");
      }
    }
  }
}

}  // namespace ztier::tool
