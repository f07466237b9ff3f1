// File: tools/ztier/bench_engine_report.cc
//
// Tables and JSON for `ztier bench engine` (bench_engine_report.h).
#include "bench_engine_report.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <limits>
#include <tuple>

#include "bench_stats.h"

namespace ztier::tool {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

auto SortKey(const EngineVariant& v) {
  return std::make_tuple(static_cast<int>(v.path), static_cast<int>(v.op),
                         v.threads, v.batch, static_cast<int>(v.backend));
}

bool SameSeries(const EngineVariant& a, const EngineVariant& b) {
  return SortKey(a) == SortKey(b);
}

const Series* FindSeries(const CaseResult& r, BenchPath path, BenchOp op,
                         std::size_t threads, std::size_t batch,
                         BatchBackend backend) {
  const EngineVariant want{path, op, threads, batch, backend};
  for (const Series& s : r.series) {
    if (SameSeries(s.variant, want)) return &s;
  }
  return nullptr;
}

// The batch-1 serial series of the scaling table, in print order.
struct ScalingOp {
  BenchPath path;
  BenchOp op;
};
constexpr ScalingOp kScalingOps[] = {
    {BenchPath::kCodec, BenchOp::kCompress},
    {BenchPath::kCodec, BenchOp::kDecompress},
    {BenchPath::kStore, BenchOp::kStore},
    {BenchPath::kStore, BenchOp::kLoad},
    {BenchPath::kStore, BenchOp::kOverwrite},
};

double Median(const Series* s) {
  if (s == nullptr || s->samples.empty()) return kNaN;
  return Summarize(s->samples).median;
}

std::string Fixed(double v, int decimals) {
  return std::isfinite(v) ? FormatDouble(v, decimals) : "-";
}

std::string MiB(std::uint64_t bytes) {
  return FormatDouble(static_cast<double>(bytes) / (1024.0 * 1024.0), 2);
}

}  // namespace

CaseResult NewCaseResult(const std::string& codec,
                         const corpus::PageSet& corpus,
                         const std::vector<EngineVariant>& variants) {
  CaseResult r;
  r.codec = codec;
  r.corpus = corpus.name();
  r.pages = corpus.size();
  for (const EngineVariant& v : variants) {
    if (v.path == BenchPath::kCodec) {
      r.series.push_back({v, {}});
    } else {
      EngineVariant store = v;
      store.op = BenchOp::kStore;
      EngineVariant load = v;
      load.op = BenchOp::kLoad;
      EngineVariant overwrite = v;
      overwrite.op = BenchOp::kOverwrite;
      r.series.push_back({store, {}});
      r.series.push_back({load, {}});
      r.series.push_back({overwrite, {}});
    }
  }
  std::stable_sort(r.series.begin(), r.series.end(),
                   [](const Series& a, const Series& b) {
                     return SortKey(a.variant) < SortKey(b.variant);
                   });
  return r;
}

void AddSamples(const EngineVariant& v, const std::vector<OpSample>& samples,
                CaseResult* result) {
  for (const OpSample& s : samples) {
    EngineVariant key = v;
    key.op = s.op;
    for (Series& series : result->series) {
      if (SameSeries(series.variant, key)) series.samples.push_back(s.mb_s);
    }
  }
}

std::vector<Derived> DeriveRatios(const CaseResult& r) {
  using P = BenchPath;
  using O = BenchOp;
  const BatchBackend kSer = BatchBackend::kSerial;
  const BatchBackend kPar = BatchBackend::kParallel;
  const std::size_t kB = kMaxBatchSize;
  std::vector<Derived> d;
  const double store = Median(FindSeries(r, P::kStore, O::kStore, 1, 1, kSer));
  const double compress =
      Median(FindSeries(r, P::kCodec, O::kCompress, 1, 1, kSer));
  const double load = Median(FindSeries(r, P::kStore, O::kLoad, 1, 1, kSer));
  const double overwrite =
      Median(FindSeries(r, P::kStore, O::kOverwrite, 1, 1, kSer));
  const double decompress =
      Median(FindSeries(r, P::kCodec, O::kDecompress, 1, 1, kSer));
  const double par = Median(FindSeries(r, P::kStore, O::kStore, 1, kB, kPar));
  const double ser = Median(FindSeries(r, P::kStore, O::kStore, 1, kB, kSer));
  d.push_back({"store/compress", store / compress,
               r.codec == "lz4" ? std::optional<double>(0.85) : std::nullopt});
  d.push_back({"overwrite/compress", overwrite / compress,
               r.codec == "lz4" ? std::optional<double>(0.85) : std::nullopt});
  d.push_back({"load/(decompress+copy)", load / decompress, 0.80});
  const bool cc1plus = r.corpus.starts_with("anon-cc1plus");
  d.push_back({"batch8 store parallel/serial", par / ser,
               r.codec == "lz4" && cc1plus ? std::optional<double>(1.6)
                                           : std::nullopt});
  return d;
}

std::string ConfigText(const BenchConfig& cfg) {
  std::string codecs;
  for (const std::string& c : cfg.codecs) {
    codecs += (codecs.empty() ? "" : ",") + c;
  }
  std::string threads;
  for (std::size_t n : cfg.thread_counts) {
    threads += (threads.empty() ? "" : ",") + std::to_string(n);
  }
  std::string text =
      "config: runs=" + std::to_string(cfg.runs) +
      " (+1 warm-up, not counted), threads=" + threads +
      ", parallel backend workers=" + std::to_string(cfg.parallel_workers) +
      " (+ caller), batch=" + std::to_string(kMaxBatchSize) +
      ", codecs=" + codecs + "\n";
  for (const BenchConfig::Corpus& c : cfg.corpora) {
    text += "corpus: " + c.name + " (" + std::to_string(c.pages) +
            " pages) from " + c.path + "\n";
  }
  text +=
      "MB/s = 10^6 bytes of uncompressed pages per second; median, min and "
      "max over the runs; cv% = stddev/mean.\n"
      "decompress = decompress + one 4096-byte copy (the load path's "
      "limit).";
  return text;
}

std::string CaseTable(const CaseResult& r) {
  TextTable t(
      {"path", "op", "threads", "batch", "backend", "median", "min", "max",
       "cv%"},
      {Align::kLeft, Align::kLeft, Align::kRight, Align::kRight, Align::kLeft,
       Align::kRight, Align::kRight, Align::kRight, Align::kRight});
  for (const Series& s : r.series) {
    const SampleStats st = Summarize(s.samples);
    t.AddRow({std::string(BenchPathName(s.variant.path)),
              std::string(BenchOpName(s.variant.op)),
              std::to_string(s.variant.threads),
              std::to_string(s.variant.batch),
              std::string(BatchBackendName(s.variant.backend)),
              FormatDouble(st.median, 1), FormatDouble(st.min, 1),
              FormatDouble(st.max, 1), FormatDouble(st.cv_percent, 1)});
  }
  // What the runs saw of the machine; median and max as in the JSON.
  std::string conditions;
  if (!r.cross_cpu_rtt_ns.empty()) {
    const SampleStats st = Summarize(r.cross_cpu_rtt_ns);
    conditions = "cross-CPU round trip after each run, ns: median " +
                 FormatDouble(st.median, 0) + ", min " +
                 FormatDouble(st.min, 0) + ", max " + FormatDouble(st.max, 0) +
                 "\n";
  }
  if (!r.populate_2mib_us.empty()) {
    const SampleStats st = Summarize(r.populate_2mib_us);
    std::vector<double> sorted = r.populate_2mib_us;
    std::sort(sorted.begin(), sorted.end());
    // Nearest rank: the smallest value with 90% of the steps at or below.
    const std::size_t rank = (sorted.size() * 9 + 9) / 10;
    conditions += "fresh memory after each run, us per 2 MiB populated (" +
                  std::to_string(st.n) + "): median " +
                  FormatDouble(st.median, 0) + ", p90 " +
                  FormatDouble(sorted[rank - 1], 0) + ", max " +
                  FormatDouble(st.max, 0) + "\n";
  }
  return "== " + r.codec + " / " + r.corpus + " (" + std::to_string(r.pages) +
         " pages), MB/s ==\n" + t.Render() + conditions;
}

const Series* FindCaseSeries(const CaseResult& r, BenchPath path, BenchOp op,
                             std::size_t threads, std::size_t batch,
                             BatchBackend backend) {
  const Series* s = FindSeries(r, path, op, threads, batch, backend);
  return s != nullptr && !s->samples.empty() ? s : nullptr;
}

std::string ScalingTable(const CaseResult& r) {
  std::vector<std::size_t> counts;
  for (const Series& s : r.series) {
    if (s.variant.batch == 1 && s.variant.threads > 1 && !s.samples.empty()) {
      counts.push_back(s.variant.threads);
    }
  }
  if (counts.empty()) return "";
  counts.push_back(1);
  std::sort(counts.begin(), counts.end());
  counts.erase(std::unique(counts.begin(), counts.end()), counts.end());
  TextTable t({"path", "op", "threads", "median", "min", "max", "cv%", "ideal",
               "of ideal"},
              {Align::kLeft, Align::kLeft, Align::kRight, Align::kRight,
               Align::kRight, Align::kRight, Align::kRight, Align::kRight,
               Align::kRight});
  const BatchBackend kSer = BatchBackend::kSerial;
  for (const ScalingOp& o : kScalingOps) {
    const double one = Median(FindCaseSeries(r, o.path, o.op, 1, 1, kSer));
    for (std::size_t n : counts) {
      const Series* s = FindCaseSeries(r, o.path, o.op, n, 1, kSer);
      if (s == nullptr) continue;
      const SampleStats st = Summarize(s->samples);
      const double ideal = one * static_cast<double>(n);
      t.AddRow({std::string(BenchPathName(o.path)),
                std::string(BenchOpName(o.op)), std::to_string(n),
                FormatDouble(st.median, 1), FormatDouble(st.min, 1),
                FormatDouble(st.max, 1), FormatDouble(st.cv_percent, 1),
                Fixed(ideal, 1),
                std::isfinite(ideal) && ideal > 0
                    ? FormatDouble(100.0 * st.median / ideal, 0) + "%"
                    : "-"});
    }
  }
  return "== " + r.codec + " / " + r.corpus +
         ": throughput against threads (batch 1, serial), MB/s; ideal = "
         "threads x the 1-thread median ==\n" +
         t.Render();
}

std::string SizeTable(const std::vector<CaseResult>& results) {
  TextTable t({"codec", "corpus", "ratio", "compr_MiB", "mem_used_MiB",
               "mem/compr", "meta_B/page", "huge", "same", "after_compact_MiB",
               "after/compr", "pages_compacted"},
              {Align::kLeft, Align::kLeft, Align::kRight, Align::kRight,
               Align::kRight, Align::kRight, Align::kRight, Align::kRight,
               Align::kRight, Align::kRight, Align::kRight, Align::kRight});
  for (const CaseResult& r : results) {
    const SizeFigures& f = r.sizes;
    t.AddRow({r.codec, r.corpus, Fixed(f.ratio, 3), MiB(f.compressed_bytes),
              MiB(f.mem_used_total), Fixed(f.mem_used_total_over_compressed, 3),
              Fixed(f.metadata_bytes_per_page, 1), std::to_string(f.huge_pages),
              std::to_string(f.same_pages), MiB(f.mem_used_total_after_compact),
              Fixed(f.mem_used_total_after_compact_over_compressed, 3),
              std::to_string(f.pages_compacted)});
  }
  return "== sizes (threads=1 batch=1 store; after_compact: a random half "
         "discarded, then Compact()) ==\n" +
         t.Render();
}

std::string DerivedTable(const std::vector<CaseResult>& results) {
  TextTable t({"codec", "corpus", "ratio", "value", "target", "met"},
              {Align::kLeft, Align::kLeft, Align::kLeft, Align::kRight,
               Align::kRight, Align::kLeft});
  for (const CaseResult& r : results) {
    for (const Derived& d : DeriveRatios(r)) {
      std::string met = "";
      if (d.target.has_value()) {
        met = !std::isfinite(d.value) ? "?"
              : d.value >= *d.target  ? "yes"
                                      : "NO";
      }
      t.AddRow({r.codec, r.corpus, d.name, Fixed(d.value, 3),
                d.target ? ">= " + FormatDouble(*d.target, 2) : "", met});
    }
  }
  return "\n== derived ratios of medians (same run; targets: store/compress "
         "lz4 >= 0.85, load/(decompress+copy) >= 0.80, batch8 par/ser lz4 "
         "anon-cc1plus >= 1.6 on 2 cores) ==\n" +
         t.Render();
}

Status WriteJson(const std::string& path, const MachineInfo& machine,
                 const BenchConfig& cfg,
                 const std::vector<CaseResult>& results) {
  JsonWriter w;
  BeginResultJson(w, "ztier bench engine", machine);

  w.Key("config");
  w.BeginObject();
  w.UintField("runs", cfg.runs);
  w.UintField("warmup_runs", 1);
  w.UintField("threads",
              cfg.thread_counts.empty() ? 1 : cfg.thread_counts.back());
  w.Key("thread_counts");
  w.BeginArray();
  for (std::size_t n : cfg.thread_counts) w.Uint(n);
  w.EndArray();
  w.UintField("parallel_workers", cfg.parallel_workers);
  w.UintField("batch", kMaxBatchSize);
  w.StringField("unit", "MB/s = 1e6 bytes of uncompressed pages per second");
  w.Key("codecs");
  w.BeginArray();
  for (const std::string& c : cfg.codecs) w.String(c);
  w.EndArray();
  w.Key("corpora");
  w.BeginArray();
  for (const BenchConfig::Corpus& c : cfg.corpora) {
    w.BeginObject();
    w.StringField("name", c.name);
    w.StringField("path", c.path);
    w.UintField("pages", c.pages);
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();

  w.Key("measurements");
  w.BeginArray();
  for (const CaseResult& r : results) {
    for (const Series& s : r.series) {
      const SampleStats st = Summarize(s.samples);
      w.BeginObject();
      w.StringField("codec", r.codec);
      w.StringField("corpus", r.corpus);
      w.StringField("path", BenchPathName(s.variant.path));
      w.StringField("op", BenchOpName(s.variant.op));
      w.UintField("threads", s.variant.threads);
      w.UintField("batch", s.variant.batch);
      w.StringField("backend", BatchBackendName(s.variant.backend));
      w.DoubleField("mb_s_median", st.median);
      w.DoubleField("mb_s_min", st.min);
      w.DoubleField("mb_s_max", st.max);
      w.DoubleField("mb_s_mean", st.mean);
      w.DoubleField("mb_s_stddev", st.stddev);
      w.DoubleField("mb_s_cv", st.cv_percent);
      w.UintField("runs", st.n);
      w.Key("samples");
      w.BeginArray();
      for (double v : s.samples) w.Double(v);
      w.EndArray();
      w.EndObject();
    }
  }
  w.EndArray();

  w.Key("sizes");
  w.BeginArray();
  for (const CaseResult& r : results) {
    const SizeFigures& f = r.sizes;
    w.BeginObject();
    w.StringField("codec", r.codec);
    w.StringField("corpus", r.corpus);
    w.UintField("pages", r.pages);
    w.UintField("orig_bytes", f.orig_bytes);
    w.DoubleField("ratio", f.ratio, 4);
    w.UintField("compressed_bytes", f.compressed_bytes);
    w.UintField("mem_used_total", f.mem_used_total);
    w.DoubleField("mem_used_total_over_compressed",
                  f.mem_used_total_over_compressed, 4);
    w.DoubleField("metadata_bytes_per_page", f.metadata_bytes_per_page, 2);
    w.UintField("same_pages", f.same_pages);
    w.UintField("huge_pages", f.huge_pages);
    w.UintField("discarded_pages", f.discarded_pages);
    w.UintField("compressed_bytes_after_discard",
                f.compressed_bytes_after_discard);
    w.UintField("mem_used_total_after_discard", f.mem_used_total_after_discard);
    w.UintField("mem_used_total_after_compact", f.mem_used_total_after_compact);
    w.DoubleField("mem_used_total_after_compact_over_compressed",
                  f.mem_used_total_after_compact_over_compressed, 4);
    w.UintField("pages_compacted", f.pages_compacted);
    w.EndObject();
  }
  w.EndArray();

  // What the runs saw of the machine (not results: compare_runs.py skips
  // them).
  w.Key("conditions");
  w.BeginArray();
  for (const CaseResult& r : results) {
    w.BeginObject();
    w.StringField("codec", r.codec);
    w.StringField("corpus", r.corpus);
    WriteFigureJson(w, "cross_cpu_rtt_ns", r.cross_cpu_rtt_ns, 1);
    WriteSamplesJson(w, "cross_cpu_rtt_ns_samples", r.cross_cpu_rtt_ns, 1);
    WriteFigureJson(w, "populate_2mib_us", r.populate_2mib_us, 1);
    WriteSamplesJson(w, "populate_2mib_us_samples", r.populate_2mib_us, 1);
    w.EndObject();
  }
  w.EndArray();

  w.Key("derived");
  w.BeginArray();
  for (const CaseResult& r : results) {
    for (const Derived& d : DeriveRatios(r)) {
      w.BeginObject();
      w.StringField("codec", r.codec);
      w.StringField("corpus", r.corpus);
      w.StringField("name", d.name);
      w.DoubleField("value", d.value, 4);
      w.Key("target");
      if (d.target) {
        w.Double(*d.target, 2);
      } else {
        w.Null();
      }
      w.Key("met");
      if (d.target && std::isfinite(d.value)) {
        w.Bool(d.value >= *d.target);
      } else {
        w.Null();
      }
      w.EndObject();
    }
  }
  w.EndArray();
  w.EndObject();

  return WriteJsonFile(path, w);
}

}  // namespace ztier::tool
