// File: tools/ztier/bench_engine.cc
//
// `ztier bench engine` (bench_engine.h): parses the flags, loads the
// corpora, runs each case's variants through RunVariants (bench_harness.h)
// and reports them (bench_engine_report.h).
#include "bench_engine.h"

#include <algorithm>
#include <charconv>
#include <optional>

#include "bench_engine_report.h"
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
  for (const EngineVariant& v : c->variants) {
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
  const RunPlan plan{.runs = static_cast<std::size_t>(cfg.common.runs),
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
                     .variants = StandardVariants(cfg.thread_counts)});
      const Status s = MeasureCase(cfg, options, *codec, set, progress, &c);
      progress.Clear();
      if (!s.ok()) {
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
