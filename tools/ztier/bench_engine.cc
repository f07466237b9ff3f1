// File: tools/ztier/bench_engine.cc
//
// `ztier bench engine` (see bench_engine.h): parses flags, finds and loads
// the corpora, runs the alternating measurement loop of engine_measure.h,
// and reports (bench_engine_report.h).
#include "bench_engine.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "bench_engine_charts.h"
#include "bench_engine_report.h"
#include "bench_harness.h"
#include "corpus/corpus.h"
#include "engine_measure.h"
#include "flags.h"
#include "machine_info.h"
#include "plot.h"
#include "progress.h"
#include "tool_common.h"
#include "ztier/codec.h"
#include "ztier/worker_pool.h"

namespace ztier::tool {
namespace {

constexpr const char kCommand[] = "ztier bench engine";

// The corpus files to use: the --corpus files, plus those of the corpus
// folder when no --corpus was given or --corpus-dir was.
Result<std::vector<std::string>> FindCorpora(
    const FlagSet& flags, const std::vector<std::string>& files,
    const std::string& dir) {
  std::vector<std::string> paths = files;
  if (!files.empty() && !flags.WasSet("corpus-dir")) return paths;
  ZT_ASSIGN_OR_RETURN(
      const std::vector<std::string> found,
      FindCorpusDir(dir,
                    "Pass corpus files with --corpus FILE (a .pages.zst "
                    "file, or any plain file read as 4096-byte pages; "
                    "repeatable), or a folder of *.pages.zst files with "
                    "--corpus-dir DIR."));
  paths.insert(paths.end(), found.begin(), found.end());
  return paths;
}

// The default thread counts: 1, 2, 4, ... up to `cores`, and `cores`.
std::vector<std::size_t> DefaultThreadCounts(std::size_t cores) {
  std::vector<std::size_t> counts;
  for (std::size_t n = 1; n < cores; n *= 2) counts.push_back(n);
  counts.push_back(std::max<std::size_t>(1, cores));
  return counts;
}

// --threads "1,2,4" -> {1, 2, 4}: each in [1, 1024], sorted, each once, and
// 1 always (the batch variants and the ideal line start from it).
Result<std::vector<std::size_t>> ParseThreadCounts(
    const std::vector<std::string>& items) {
  std::vector<std::size_t> counts = {1};
  for (const std::string& item : items) {
    std::size_t n = 0;
    bool ok = !item.empty() && item.size() <= 4;
    for (char c : item) {
      ok = ok && c >= '0' && c <= '9';
      if (ok) n = n * 10 + static_cast<std::size_t>(c - '0');
    }
    if (!ok || n < 1 || n > 1024) {
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

// Fresh memory probed after each run (machine_info.h): 16 steps of 2 MiB.
constexpr std::size_t kPopulateProbeBytes = std::size_t{32} << 20;

constexpr const char kSynopsis[] =
    "[--corpus FILE]... [--corpus-dir DIR] [--codec NAME]... [--runs N] "
    "[--threads N,N,...] [--json FILE] [--plot DIR]";
constexpr const char kAbout[] =
    "codec and store throughput (MB/s of uncompressed pages) and "
    "memory use, per codec and corpus.";

// The command line into *cfg and *paths (the corpus files); the exit status
// when it is bad (2), names no corpus (1), or asked for --help (0).
std::optional<int> ParseFlags(std::span<const std::string_view> args,
                              unsigned cores, BenchConfig* cfg,
                              std::string* plot_dir,
                              std::vector<std::string>* paths) {
  std::vector<std::string> corpus_files;
  std::string corpus_dir = kDefaultCorpusDir;
  std::vector<std::string> codec_flags;
  std::int64_t runs = 5;
  std::vector<std::string> thread_flags;
  FlagSet flags(kCommand, kSynopsis);
  flags.AddList("corpus", &corpus_files, "FILE",
                "corpus file (.pages.zst or plain pages); repeatable");
  AddCorpusDirFlag(flags, &corpus_dir, "; used when no --corpus is given");
  flags.AddList("codec", &codec_flags, "NAME",
                "codec to measure; repeatable, or a comma list (default: "
                "every registered codec)");
  flags.AddInt("runs", &runs, "N",
               "measured runs per codec and corpus, after one warm-up run "
               "(default 5)",
               1, 1000);
  flags.AddList("threads", &thread_flags, "N,N,...",
                "thread counts for the batch-1 (and batch-8 serial) "
                "variants, a comma list; 1 is always measured (default: 1, "
                "2, 4, ... up to the online cores, and the online cores)");
  AddJsonFlag(flags, &cfg->json_path);
  AddPlotFlag(flags, plot_dir);
  if (auto rc = flags.ParseCommandLine(args, kAbout)) return *rc;
  if (thread_flags.empty()) {
    cfg->thread_counts = DefaultThreadCounts(cores);
  } else {
    auto counts = ParseThreadCounts(thread_flags);
    if (!counts.has_value()) {
      return ReportUsageError(kCommand, counts.error().message());
    }
    cfg->thread_counts = std::move(*counts);
  }
  // Codecs: as given (deduplicated, in order), else every registered one.
  if (codec_flags.empty()) {
    const std::vector<std::string_view> known = CodecNames();
    codec_flags.assign(known.begin(), known.end());
  }
  if (Status s = AddCodecs(codec_flags, &cfg->codecs); !s.ok()) {
    return ReportUsageError(kCommand, s.message());
  }
  cfg->runs = static_cast<std::size_t>(runs);
  // "threads - 1" helpers plus the caller (by default the cores, as the
  // store's parallel backend defaults to); at least one so that "parallel"
  // differs from "serial".
  cfg->parallel_workers =
      std::max<std::size_t>(1, cfg->thread_counts.back() - 1);
  auto found = FindCorpora(flags, corpus_files, corpus_dir);
  if (!found.has_value())
    return ReportFailure(kCommand, found.error().message());
  *paths = std::move(*found);
  return std::nullopt;
}

// "store+load threads=1 batch=8 serial": what the progress line shows of
// variant `v`.
std::string VariantLabel(const EngineVariant& v) {
  return std::string(BenchPathName(v.path)) + " " +
         (v.path == BenchPath::kStore ? std::string("store+load")
                                      : std::string(BenchOpName(v.op))) +
         " threads=" + std::to_string(v.threads) +
         " batch=" + std::to_string(v.batch) + " " +
         std::string(BatchBackendName(v.backend));
}

// One codec on one corpus: a warm-up run and cfg.runs measured runs of
// every variant, in turn, then the sizes.
Status MeasureCase(const BenchConfig& cfg, std::shared_ptr<const Codec> codec,
                   const corpus::PageSet& set,
                   const std::vector<EngineVariant>& variants, WorkerPool& pool,
                   Progress& progress, CaseResult* result) {
  const std::string label = "[" + result->codec + " " + set.name() + "] ";
  progress.Update(label + "preparing");
  ZT_ASSIGN_OR_RETURN(
      auto measurer,
      EngineMeasurer::Create(std::move(codec), set,
                             {.all_threads = cfg.thread_counts.back(),
                              .pool = &pool,
                              .parallel_workers = cfg.parallel_workers}));
  std::vector<OpSample> samples;
  for (std::size_t run = 0; run <= cfg.runs; ++run) {
    for (const EngineVariant& v : variants) {
      progress.Update(label + RunLabel(run, cfg.runs) + ": " + VariantLabel(v));
      samples.clear();
      ZT_RETURN_IF_ERROR(measurer->Measure(v, &samples));
      if (run > 0) AddSamples(v, samples, result);
    }
    if (run > 0) {
      result->cross_cpu_rtt_ns.push_back(CrossCpuRoundTripNs());
      for (double us : FreshMemoryPopulateUs(kPopulateProbeBytes)) {
        result->populate_2mib_us.push_back(us);
      }
    }
  }
  progress.Update(label + "sizes");
  ZT_ASSIGN_OR_RETURN(result->sizes, measurer->MeasureSizes());
  return Status::Ok();
}

}  // namespace

int RunBenchEngine(std::span<const std::string_view> args) {
  const MachineInfo machine = GetMachineInfo();
  BenchConfig cfg;
  std::string plot_dir;
  std::vector<std::string> paths;
  if (auto rc = ParseFlags(args, machine.cores, &cfg, &plot_dir, &paths)) {
    return *rc;
  }
  std::vector<corpus::PageSet> corpora;
  for (const std::string& path : paths) {
    auto set = LoadCorpus(path);
    if (!set.has_value()) return ReportFailure(kCommand, set.error().message());
    cfg.corpora.push_back({set->name(), path, set->size()});
    corpora.push_back(std::move(*set));
  }

  std::printf("%s\n%s\n", MachineLine(machine).c_str(),
              ConfigText(cfg).c_str());
  std::fflush(stdout);
  ChartWriter charts(kCommand, plot_dir);
  WorkerPool pool(cfg.parallel_workers);
  const std::vector<EngineVariant> variants = StandardVariants(cfg.thread_counts);
  std::vector<CaseResult> results;
  Progress progress;
  for (const std::string& codec_name : cfg.codecs) {
    auto codec = MakeCodec(codec_name);
    if (!codec.has_value()) {
      return ReportFailure(
          kCommand, "codec " + codec_name + ": " + codec.error().ToString());
    }
    for (const corpus::PageSet& set : corpora) {
      CaseResult result = NewCaseResult(codec_name, set, variants);
      const Status s =
          MeasureCase(cfg, *codec, set, variants, pool, progress, &result);
      progress.Clear();
      if (!s.ok()) {
        return ReportFailure(kCommand, "FATAL: codec " + codec_name +
                                           ", corpus " + set.name() + ": " +
                                           s.ToString());
      }
      std::printf("\n%s", CaseTable(result).c_str());
      if (const std::string scaling = ScalingTable(result); !scaling.empty()) {
        std::printf("\n%s", scaling.c_str());
      }
      std::fflush(stdout);
      results.push_back(std::move(result));
    }
  }

  std::printf("\n%s\n%s", SizeTable(results).c_str(),
              DerivedTable(results).c_str());
  std::fflush(stdout);
  const int rc = FinishJson(kCommand, cfg.json_path, [&](const std::string& p) {
    return WriteJson(p, machine, cfg, results);
  });
  return rc != 0 ? rc : charts.Write(EngineCharts(cfg, results)) ? 0 : 1;
}

}  // namespace ztier::tool
