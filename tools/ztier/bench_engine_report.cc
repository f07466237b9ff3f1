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

constexpr BatchBackend kSer = BatchBackend::kSerial;
constexpr BatchBackend kPar = BatchBackend::kParallel;

// A row of the tables: `op` is the figure (store variants give three).
using Key = EngineVariant;

std::vector<double> Of(const EngineCase& c, const Key& k) {
  Key v = k;
  if (v.path == BenchPath::kStore) v.op = BenchOp::kStore;
  return c.m.Of(VariantName(v), BenchOpName(k.op));
}

std::vector<double> Of(const EngineCase& c, BenchPath p, BenchOp op,
                       std::size_t threads, std::size_t batch = 1,
                       BatchBackend b = kSer) {
  return Of(c, {p, op, threads, batch, b});
}

double Median(const std::vector<double>& s) { return Summarize(s).median; }

std::string OpTitle(const Key& k) {
  return std::string(BenchPathName(k.path)) + " " +
         std::string(BenchOpName(k.op));
}

// The batch-1 serial lines of the scaling table and chart.
constexpr Key kLines[] = {{BenchPath::kCodec, BenchOp::kCompress},
                          {BenchPath::kCodec, BenchOp::kDecompress},
                          {BenchPath::kStore, BenchOp::kStore},
                          {BenchPath::kStore, BenchOp::kLoad},
                          {BenchPath::kStore, BenchOp::kOverwrite}};

// Thread counts above 1 that the case measured, ascending.
std::vector<std::size_t> Counts(const EngineCase& c) {
  std::vector<std::size_t> n = {1};
  for (const EngineVariant& v : c.variants) {
    if (v.threads > 1 && v.op == BenchOp::kCompress && v.batch == 1) {
      n.push_back(v.threads);
    }
  }
  return n;
}

void AddThroughput(Report& report, const EngineCase& c) {
  std::vector<Key> rows;
  for (const EngineVariant& v : c.variants) {
    if (v.path == BenchPath::kCodec) rows.push_back(v);
    for (BenchOp op : {BenchOp::kStore, BenchOp::kLoad, BenchOp::kOverwrite}) {
      if (v.path == BenchPath::kStore)
        rows.push_back({v.path, op, v.threads, v.batch, v.backend});
    }
  }
  auto order = [](const Key& v) {
    return std::make_tuple(v.path, v.op, v.threads, v.batch, v.backend);
  };
  std::stable_sort(rows.begin(), rows.end(), [&](const Key& a, const Key& b) {
    return order(a) < order(b);
  });
  Table& t = report.AddTable(c.codec + " " + c.corpus,
                             c.codec + " / " + c.corpus + " (" +
                                 std::to_string(c.pages) + " pages), MB/s");
  for (const Key& k : rows) {
    t.AddRow()
        .Text("path", std::string(BenchPathName(k.path)))
        .Text("op", std::string(BenchOpName(k.op)))
        .Int("threads", static_cast<std::int64_t>(k.threads))
        .Int("batch", static_cast<std::int64_t>(k.batch))
        .Text("backend", std::string(BatchBackendName(k.backend)))
        .Figure("MB/s", Of(c, k), 1, kRange | kCv);
  }
}

void AddScaling(Report& report, const EngineCase& c) {
  Table& t = report.AddTable(
      c.codec + " " + c.corpus + " scaling",
      c.codec + " / " + c.corpus +
          ": throughput against threads (batch 1, serial), MB/s; ideal = "
          "threads x the 1-thread median");
  for (const Key& line : kLines) {
    const double one = Median(Of(c, line.path, line.op, 1));
    for (std::size_t n : Counts(c)) {
      const double ideal = one * static_cast<double>(n);
      const std::vector<double> s = Of(c, line.path, line.op, n);
      t.AddRow()
          .Text("path", std::string(BenchPathName(line.path)))
          .Text("op", std::string(BenchOpName(line.op)))
          .Int("threads", static_cast<std::int64_t>(n))
          .Figure("MB/s", s, 1, kRange | kCv)
          .Number("ideal", ideal, 1)
          .Text("of ideal", FormatDouble(100.0 * Median(s) / ideal, 0) + "%");
    }
  }
}

void AddConditions(Report& report, const EngineCase& c) {
  std::vector<double> steps = c.populate_2mib_us;
  Table& t = report.AddTable(
      c.codec + " " + c.corpus + " conditions",
      c.codec + " / " + c.corpus + ": the machine after each run");
  t.AddRow()
      .Figure("cross-CPU rtt ns", c.cross_cpu_rtt_ns, 0)
      .Int("2 MiB steps", static_cast<std::int64_t>(steps.size()))
      .Figure("fresh 2 MiB us", steps, 0)
      .Number("fresh p90", steps.empty() ? 0 : Percentile(steps, 0.9), 0);
}

Chart ThreadsChart(const EngineCase& c, std::size_t runs) {
  Chart chart{.name = "engine-threads-" + c.codec,
              .title = c.codec + " on " + c.corpus +
                       ": throughput against threads (batch 1, serial; " +
                       MedianOfRuns(runs) + ")",
              .x_label = "threads",
              .y_label = "throughput (MB/s of uncompressed pages)"};
  const std::vector<std::size_t> counts = Counts(c);
  chart.log_x = counts.back() >= 4;
  for (std::size_t n : counts) {
    chart.x_tics.push_back({static_cast<double>(n), std::to_string(n)});
  }
  // The measured lines first, then each one's ideal, dashed, in its colour.
  std::vector<PlotSeries> ideals;
  for (int i = 0; i < 4; ++i) {
    const Key& k = kLines[i];
    PlotSeries line{.title = OpTitle(k), .color = i + 1};
    PlotSeries ideal{.title = "ideal: " + OpTitle(k) + " x threads",
                     .dashed = true,
                     .color = i + 1};
    const std::vector<double> one = Of(c, k.path, k.op, 1);
    for (std::size_t n : counts) {
      const std::vector<double> s = Of(c, k.path, k.op, n);
      if (s.empty() || one.empty()) continue;
      const double x = static_cast<double>(n);
      line.points.push_back(SpreadPoint(x, s));
      ideal.points.push_back({x, Median(one) * x});
    }
    chart.series.push_back(std::move(line));
    ideals.push_back(std::move(ideal));
  }
  for (PlotSeries& s : ideals) chart.series.push_back(std::move(s));
  return chart;
}

Chart BatchChart(const EngineCase& c, std::size_t runs) {
  Chart chart{.name = "engine-batch-" + c.codec,
              .title = c.codec + " on " + c.corpus +
                       ": throughput against batch size and backend (1 "
                       "thread; " +
                       MedianOfRuns(runs) + ")",
              .x_label = "batch size (pages) and batch backend",
              .y_label = "throughput (MB/s of uncompressed pages)",
              .style = PlotStyle::kBars};
  const std::pair<std::size_t, BatchBackend> columns[] = {
      {1, kSer}, {kMaxBatchSize, kSer}, {kMaxBatchSize, kPar}};
  for (std::size_t i = 0; i < std::size(columns); ++i) {
    chart.x_tics.push_back(
        {static_cast<double>(i),
         "batch " + std::to_string(columns[i].first) + ", " +
             std::string(BatchBackendName(columns[i].second))});
  }
  for (const Key& k : kLines) {
    PlotSeries bars{.title = OpTitle(k)};
    for (std::size_t i = 0; i < std::size(columns); ++i) {
      const std::vector<double> s =
          Of(c, k.path, k.op, 1, columns[i].first, columns[i].second);
      if (!s.empty()) bars.points.push_back(SpreadPoint(i, s));
    }
    chart.series.push_back(std::move(bars));
  }
  return chart;
}

}  // namespace

void AddCase(Report& report, const EngineCase& c, bool charts,
             std::size_t runs) {
  AddThroughput(report, c);
  if (Counts(c).size() > 1) AddScaling(report, c);
  AddConditions(report, c);
  if (!charts) return;
  if (Counts(c).size() > 1) report.AddChart(ThreadsChart(c, runs));
  report.AddChart(BatchChart(c, runs));
}

void AddSummary(Report& report, std::span<const EngineCase> cases) {
  Table& sizes = report.AddTable(
      "sizes",
      "sizes (threads=1 batch=1 store; after_compact: a random half "
      "discarded, then Compact())");
  const auto mib = [](std::uint64_t b) { return b / 1048576.0; };
  for (const EngineCase& c : cases) {
    const SizeFigures& f = c.sizes;
    sizes.AddRow()
        .Text("codec", c.codec)
        .Text("corpus", c.corpus)
        .Number("ratio", f.ratio, 3)
        .Number("compr_MiB", mib(f.compressed_bytes), 2)
        .Number("mem_used_MiB", mib(f.mem_used_total), 2)
        .Number("mem/compr", f.mem_used_total_over_compressed, 3)
        .Number("meta_B/page", f.metadata_bytes_per_page, 1)
        .Int("huge", static_cast<std::int64_t>(f.huge_pages))
        .Int("same", static_cast<std::int64_t>(f.same_pages))
        .Number("after_compact_MiB", mib(f.mem_used_total_after_compact), 2)
        .Number("after/compr", f.mem_used_total_after_compact_over_compressed,
                3)
        .Int("pages_compacted", static_cast<std::int64_t>(f.pages_compacted));
  }
  Table& d = report.AddTable(
      "derived",
      "derived ratios of medians (same run; targets: store/compress lz4 >= "
      "0.85, load/(decompress+copy) >= 0.80, batch8 par/ser lz4 anon-cc1plus "
      ">= 1.6 on 2 cores)");
  using P = BenchPath;
  using O = BenchOp;
  for (const EngineCase& c : cases) {
    const double compress = Median(Of(c, P::kCodec, O::kCompress, 1));
    const double lz4 = c.codec == "lz4" ? 0.85 : 0;
    const double cc1 = lz4 && c.corpus.starts_with("anon-cc1plus") ? 1.6 : 0;
    const std::tuple<const char*, double, double> ratios[] = {
        {"store/compress", Median(Of(c, P::kStore, O::kStore, 1)) / compress,
         lz4},
        {"overwrite/compress",
         Median(Of(c, P::kStore, O::kOverwrite, 1)) / compress, lz4},
        {"load/(decompress+copy)",
         Median(Of(c, P::kStore, O::kLoad, 1)) /
             Median(Of(c, P::kCodec, O::kDecompress, 1)),
         0.80},
        {"batch8 store parallel/serial",
         Median(Of(c, P::kStore, O::kStore, 1, kMaxBatchSize, kPar)) /
             Median(Of(c, P::kStore, O::kStore, 1, kMaxBatchSize)),
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
