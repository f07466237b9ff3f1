// File: tools/ztier/bench_engine_charts.cc
//
// Charts of `ztier bench engine` (bench_engine_charts.h).
#include "bench_engine_charts.h"

#include <iterator>
#include <string>

#include "bench_stats.h"

namespace ztier::tool {
namespace {

struct OpLine {
  BenchPath path;
  BenchOp op;
};

std::string OpTitle(const OpLine& o) {
  return std::string(BenchPathName(o.path)) + " " +
         std::string(BenchOpName(o.op));
}

// The median of `s` at `x` with min and max as its error bar.
PlotPoint Point(double x, const Series& s) {
  const SampleStats st = Summarize(s.samples);
  return {x, st.median, st.min, st.max};
}

Chart ThreadsChart(const BenchConfig& cfg, const CaseResult& r) {
  Chart c{.name = "engine-threads-" + r.codec,
          .title = r.codec + " on " + r.corpus +
                   ": throughput against threads (batch 1, serial; " +
                   MedianOfRuns(cfg.runs) + ")",
          .x_label = "threads",
          .y_label = "throughput (MB/s of uncompressed pages)"};
  const std::size_t most = cfg.thread_counts.back();
  c.log_x = most >= 4;
  for (std::size_t n : cfg.thread_counts) {
    c.x_tics.push_back({static_cast<double>(n), std::to_string(n)});
  }
  constexpr OpLine kOps[] = {{BenchPath::kCodec, BenchOp::kCompress},
                             {BenchPath::kCodec, BenchOp::kDecompress},
                             {BenchPath::kStore, BenchOp::kStore},
                             {BenchPath::kStore, BenchOp::kLoad}};
  // The measured lines first, then each one's ideal, dashed, in its colour.
  std::vector<PlotSeries> ideals;
  int color = 0;
  for (const OpLine& o : kOps) {
    ++color;
    const Series* one = FindCaseSeries(r, o.path, o.op, 1, 1,
                                       BatchBackend::kSerial);
    if (one == nullptr) continue;
    PlotSeries measured{.title = OpTitle(o), .color = color};
    PlotSeries ideal{.title = "ideal: " + OpTitle(o) + " x threads",
                     .dashed = true,
                     .color = color};
    const double base = Summarize(one->samples).median;
    for (std::size_t n : cfg.thread_counts) {
      const Series* s =
          FindCaseSeries(r, o.path, o.op, n, 1, BatchBackend::kSerial);
      if (s == nullptr) continue;
      measured.points.push_back(Point(static_cast<double>(n), *s));
      ideal.points.push_back(
          {static_cast<double>(n), base * static_cast<double>(n)});
    }
    c.series.push_back(std::move(measured));
    ideals.push_back(std::move(ideal));
  }
  for (PlotSeries& s : ideals) c.series.push_back(std::move(s));
  return c;
}

Chart BatchChart(const BenchConfig& cfg, const CaseResult& r) {
  Chart c{.name = "engine-batch-" + r.codec,
          .title = r.codec + " on " + r.corpus +
                   ": throughput against batch size and backend (1 thread; " +
                   MedianOfRuns(cfg.runs) + ")",
          .x_label = "batch size (pages) and batch backend",
          .y_label = "throughput (MB/s of uncompressed pages)",
          .style = PlotStyle::kBars};
  struct Column {
    std::size_t batch;
    BatchBackend backend;
  };
  const Column kColumns[] = {{1, BatchBackend::kSerial},
                             {kMaxBatchSize, BatchBackend::kSerial},
                             {kMaxBatchSize, BatchBackend::kParallel}};
  for (std::size_t i = 0; i < std::size(kColumns); ++i) {
    c.x_tics.push_back({static_cast<double>(i),
                        "batch " + std::to_string(kColumns[i].batch) + ", " +
                            std::string(BatchBackendName(kColumns[i].backend))});
  }
  constexpr OpLine kOps[] = {{BenchPath::kCodec, BenchOp::kCompress},
                             {BenchPath::kCodec, BenchOp::kDecompress},
                             {BenchPath::kStore, BenchOp::kStore},
                             {BenchPath::kStore, BenchOp::kLoad},
                             {BenchPath::kStore, BenchOp::kOverwrite}};
  for (const OpLine& o : kOps) {
    PlotSeries bars{.title = OpTitle(o)};
    for (std::size_t i = 0; i < std::size(kColumns); ++i) {
      const Series* s = FindCaseSeries(r, o.path, o.op, 1, kColumns[i].batch,
                                       kColumns[i].backend);
      if (s != nullptr) bars.points.push_back(Point(static_cast<double>(i), *s));
    }
    c.series.push_back(std::move(bars));
  }
  return c;
}

}  // namespace

std::vector<Chart> EngineCharts(const BenchConfig& cfg,
                                const std::vector<CaseResult>& results) {
  std::vector<Chart> charts;
  if (cfg.corpora.empty()) return charts;
  const std::string& corpus = cfg.corpora.front().name;
  for (const std::string& codec : cfg.codecs) {
    for (const CaseResult& r : results) {
      if (r.codec != codec || r.corpus != corpus) continue;
      if (cfg.thread_counts.size() > 1) charts.push_back(ThreadsChart(cfg, r));
      charts.push_back(BatchChart(cfg, r));
    }
  }
  return charts;
}

}  // namespace ztier::tool
