// File: tools/ztier/bench_ratio.cc
//
// `ztier bench ratio` (bench_ratio.h): parses the flags, loads the corpora,
// runs each (corpus, codec) case's variants through RunVariants
// (bench_harness.h) and reports them through one Report (bench_report.h).
#include "bench_ratio.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <numeric>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "bench_harness.h"
#include "bench_report.h"
#include "bench_stats.h"
#include "bench_zram_compare_io.h"
#include "bench_zram_compare_kernel.h"
#include "tool_common.h"
#include "ztier/codec.h"
#include "ztier/device.h"
#include "ztier/page_store.h"

namespace ztier::tool {
namespace {

constexpr const char kCommand[] = "ztier bench ratio";
constexpr const char kSynopsis[] =
    "[--corpus-dir DIR] [--codec NAME]... [--dict-size SIZE] "
    "[--algorithm-params TOKENS] [--runs N] "
    "[--zram-dev PATH] [--json FILE] [--plot DIR]";
constexpr const char kAbout[] =
    "the memory the same pages take (mem_used_total): per-page objects,\n"
    "units of 4, 8 and 16 pages, a dictionary trained from the store's\n"
    "pages (train_dict), units of 16 with one, and the kernel's zram\n"
    "where /dev/zram0 offers the codec; with the store MB/s and random\n"
    "4 KiB and sequential read MB/s of each.";
constexpr std::size_t kSeqBatch = 32;    // pages per LoadBatch
constexpr std::size_t kStoreBatch = 16;  // pages per StoreBatch

// The variants in the order of the tables' rows and the charts' bars: the
// kernel's zram, then ztier's with their unit_pages and whether they train
// a dictionary (ztier's run first, the kernel's last).
struct RatioVariant {
  const char* name;
  std::size_t unit_pages;
  bool dict;
};
constexpr RatioVariant kVariants[] = {
    {"kernel", 0, false},        {"per-page", 0, false},  {"units-4", 4, false},
    {"units-8", 8, false},       {"units-16", 16, false}, {"dict", 0, true},
    {"units-16+dict", 16, true},
};

struct Config {
  BenchFlags common{.runs = 3};
  std::string corpus_dir = kDefaultCorpusDir;
  std::vector<std::string> codecs;
  std::size_t dict_bytes = 16 << 10;
  std::string algorithm_params;  // for every store and the kernel's zram
  std::string zram_dev = "/dev/zram0";
};

double Seconds(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
      .count();
}

double MbS(std::size_t pages, double seconds) {
  return seconds > 0 ? pages * kPageSize / seconds / 1e6 : 0;
}

// Stores every page of `set` in `store` (slot i: page i), 16 pages per
// StoreBatch (a whole unit of any size); store MB/s.
Status StoreAll(PageStore& store, const corpus::PageSet& set, Samples& s) {
  const auto t0 = std::chrono::steady_clock::now();
  for (std::size_t i = 0; i < set.size(); i += kStoreBatch) {
    const std::size_t n = std::min(kStoreBatch, set.size() - i);
    ZT_RETURN_IF_ERROR(
        store.StoreBatch(i, set.bytes().subspan(i * kPageSize, n * kPageSize)));
  }
  s.Add("store_mb_s", MbS(set.size(), Seconds(t0)));
  return Status::Ok();
}

// Reads every page back in order, in batches (checked, outside the
// time: only the LoadBatch calls are timed), and then in a random order;
// their MB/s, and mem_used_total.
Status ReadAll(PageStore& store, const corpus::PageSet& set, Samples& s) {
  const std::size_t n = set.size();
  std::vector<std::byte> out(kSeqBatch * kPageSize);
  double load_seconds = 0;
  for (std::size_t i = 0; i < n; i += kSeqBatch) {
    const std::size_t count = std::min(kSeqBatch, n - i);
    const auto t0 = std::chrono::steady_clock::now();
    ZT_RETURN_IF_ERROR(store.LoadBatch(
        i, std::span<std::byte>(out.data(), count * kPageSize)));
    load_seconds += Seconds(t0);
    for (std::size_t k = 0; k < count; ++k) {
      if (std::memcmp(out.data() + k * kPageSize, set.page(i + k).data(),
                      kPageSize) != 0) {
        return Status::Corruption("page " + std::to_string(i + k) +
                                  " reads back different");
      }
    }
  }
  s.Add("seq_read_mb_s", MbS(n, load_seconds));
  std::vector<std::size_t> order(n);
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::shuffle(order.begin(), order.end(), std::mt19937_64(n));
  const auto t0 = std::chrono::steady_clock::now();
  for (const std::size_t i : order) {
    ZT_RETURN_IF_ERROR(store.Load(i, MutablePage(out.data(), kPageSize)));
  }
  s.Add("rand_read_mb_s", MbS(n, Seconds(t0)));
  s.Add("used", static_cast<double>(store.Stats().mem_used_total));
  return Status::Ok();
}

// One ztier variant: per-page or units, and with `dict` a dictionary
// trained after the first fill and every page stored again with it.
Status RunZtier(const Config& cfg, const corpus::PageSet& set,
                const std::string& codec, const RatioVariant& v, Samples& s) {
  ZT_ASSIGN_OR_RETURN(
      std::unique_ptr<PageStore> store,
      PageStore::Create({.num_pages = set.size(),
                         .codec = codec,
                         .algorithm_params = cfg.algorithm_params,
                         .unit_pages = v.unit_pages}));
  ZT_RETURN_IF_ERROR(StoreAll(*store, set, s));
  if (v.dict) {
    ZT_ASSIGN_OR_RETURN(const DictionaryInfo info,
                        store->TrainDictionary({.dict_bytes = cfg.dict_bytes}));
    ZT_RETURN_IF_ERROR(StoreAll(*store, set, s));
    store->Compact();
    s.Add("dict_memory", static_cast<double>(info.memory));
  }
  return ReadAll(*store, set, s);
}

// The kernel's zram with `codec`, written with the pages.
Status RunKernel(const Config& cfg, KernelZram& zram,
                 const corpus::PageSet& set, const std::string& codec,
                 Samples& s) {
  const corpus::PageSet* one[] = {&set};
  ZT_ASSIGN_OR_RETURN(DataPages data, DataPages::From(one, 0));
  const std::uint64_t bytes = set.size() * kPageSize;
  ZT_RETURN_IF_ERROR(zram.Init(codec, bytes, cfg.algorithm_params));
  const IoTarget t{.path = zram.dev_path()};
  // A fill: one sequential pass of 4 KiB writes, one at a time.
  const IoPattern fill{
      .random = false, .writes = true, .area_bytes = bytes, .seconds = 0};
  ZT_ASSIGN_OR_RETURN(IoResult r, RunIo(t, fill, data));
  s.Add("store_mb_s", r.mb_s());
  ZT_RETURN_IF_ERROR(VerifyArea(t, bytes, data, 1));
  ZT_ASSIGN_OR_RETURN(MmStat mm, zram.ReadMmStat());
  s.Add("used", static_cast<double>(mm.mem_used_total));
  return zram.Reset();
}

std::optional<int> ParseFlags(std::span<const std::string_view> args,
                              Config* cfg) {
  std::string dict_size = "16K";
  FlagSet flags(kCommand, kSynopsis);
  AddCorpusDirFlag(flags, &cfg->corpus_dir);
  flags.AddList("codec", &cfg->codecs, "NAME",
                "codecs to compare (default lz4 and zstd)");
  flags.AddString("dict-size", &dict_size, "SIZE",
                  "the trained dictionary's size (default 16K; 1K..1M)");
  flags.AddString("algorithm-params", &cfg->algorithm_params, "TOKENS",
                  "zram's algorithm_params tokens for every codec, in ztier "
                  "and in the kernel's zram alike (e.g. level=9; default "
                  "none: each codec's default level)");
  AddBenchFlags(flags, &cfg->common);
  flags.AddString("zram-dev", &cfg->zram_dev, "PATH",
                  "the kernel device (default /dev/zram0)");
  flags.NotEmpty("zram-dev");
  if (auto rc = flags.ParseCommandLine(args, kAbout)) return *rc;
  if (cfg->codecs.empty()) cfg->codecs = {"lz4", "zstd"};
  for (const std::string& c : cfg->codecs) {
    if (Status st = CheckCodecName(c); !st.ok()) {
      return ReportUsageError(kCommand, st.message());
    }
    if (auto codec = MakeCodec(c, cfg->algorithm_params); !codec.has_value()) {
      return ReportUsageError(kCommand, codec.error().message());
    }
  }
  // train_dict's own bounds (1K to 1M), checked here so that a size out of
  // range is bad usage, not a failure after the corpora are loaded; not
  // rounded to pages, as train_dict takes any size in that range.
  auto bytes = ParseSize(dict_size);
  if (!bytes.has_value() || *bytes < kMinDictBytes || *bytes > kMaxDictBytes) {
    return ReportUsageError(
        kCommand, "--dict-size " + dict_size + ": " +
                      (bytes ? "want 1K to 1M" : bytes.error().message()));
  }
  cfg->dict_bytes = *bytes;
  return std::nullopt;
}

// Codec c's table (a row per corpus and variant) and ratios, and its chart
// (bars of mem_used_total per corpus, one per variant).
void ReportCodec(Report& report, const Config& cfg, std::size_t c,
                 const std::vector<corpus::PageSet>& corpora,
                 const std::vector<std::vector<Measurements>>& m) {
  const std::string& codec = cfg.codecs[c];
  Chart chart{.name = "ratio-" + codec,
              .title = "mem_used_total of the same pages, " + codec + " (" +
                       MedianOfRuns(cfg.common.runs) + ")",
              .x_label = "corpus",
              .y_label = "mem_used_total (MiB)",
              .style = PlotStyle::kBars};
  for (const RatioVariant& v : kVariants) chart.series.push_back({v.name});
  Table& t = report.AddTable("ratio_" + codec, codec);
  for (std::size_t k = 0; k < corpora.size(); ++k) {
    const Measurements& mm = m[k][c];
    chart.x_tics.push_back({static_cast<double>(k), corpora[k].name()});
    for (std::size_t i = 0; i < std::size(kVariants); ++i) {
      const char* v = kVariants[i].name;
      const std::vector<double> used = MiB(mm.Of(v, "used"));
      if (used.empty()) continue;
      chart.series[i].points.push_back(SpreadPoint(k, used));
      t.AddRow()
          .Text("corpus", corpora[k].name())
          .Text("variant", v)
          .Figure("mem_used_total MiB", used, 3, kRange)
          .Figure("/ per-page", mm.Ratios(v, "used", "per-page", "used"), 3)
          .Figure("/ kernel", mm.Ratios(v, "used", "kernel", "used"), 3)
          .Figure("store MB/s", mm.Of(v, "store_mb_s"), 0)
          .Figure("rand read MB/s", mm.Of(v, "rand_read_mb_s"), 0)
          .Figure("seq read MB/s", mm.Of(v, "seq_read_mb_s"), 0);
    }
  }
  report.AddChart(std::move(chart));
  // After the table's rows: the first Ratio adds the table "ratios".
  const std::string no_kernel = cfg.zram_dev + " not used or without " + codec;
  for (std::size_t k = 0; k < corpora.size(); ++k) {
    const Measurements& mm = m[k][c];
    const std::string what = corpora[k].name() + " " + codec + " ";
    for (const std::string v : {"dict", "units-16+dict"}) {
      report.Ratio(what + "mem_used_total, " + v + " / per-page",
                   mm.Ratios(v, "used", "per-page", "used"), "no dictionary");
    }
    for (const std::string v : {"dict", "units-16+dict"}) {
      report.Ratio(what + "mem_used_total, " + v + " / kernel zram",
                   mm.Ratios(v, "used", "kernel", "used"), no_kernel);
    }
    for (const auto& [f, reads] :
         {std::pair{"rand_read_mb_s", "random 4 KiB read MB/s"},
          std::pair{"seq_read_mb_s", "sequential read MB/s"}}) {
      report.Ratio(what + "units-16 / per-page, " + reads,
                   mm.Ratios("units-16", f, "per-page", f), "no units");
    }
  }
}

}  // namespace

int RunBenchRatio(std::span<const std::string_view> args) {
  Config cfg;
  if (auto rc = ParseFlags(args, &cfg)) return *rc;
  auto paths = FindCorpusDir(cfg.corpus_dir, kCorpusDirHint);
  if (!paths.has_value())
    return ReportFailure(kCommand, paths.error().message());
  std::vector<corpus::PageSet> corpora;
  for (const std::string& path : *paths) {
    auto set = LoadCorpus(path);
    if (!set.has_value()) return ReportFailure(kCommand, set.error().message());
    corpora.push_back(std::move(*set));
  }
  Report report(kCommand, GetMachineInfo());
  std::optional<KernelZram> zram;
  std::string kernel_line = "kernel: " + cfg.zram_dev;
  if (auto z = KernelZram::Open(cfg.zram_dev); z.has_value()) {
    zram.emplace(std::move(*z));
    kernel_line += " offers";
    for (const std::string& a : zram->algorithms()) kernel_line += " " + a;
  } else {
    kernel_line +=
        " not used: " + z.error().message() + "; compare with per-page";
  }
  report.Condition("runs", std::to_string(cfg.common.runs));
  report.Condition("dict_bytes", std::to_string(cfg.dict_bytes));
  std::string codecs;
  for (const std::string& c : cfg.codecs) {
    codecs += (codecs.empty() ? "" : ",") + c;
  }
  if (!cfg.algorithm_params.empty()) {
    report.Condition("algorithm_params", cfg.algorithm_params);
    codecs += " with algorithm_params \"" + cfg.algorithm_params + "\"";
  }
  report.Line("config: codecs " + codecs + ", dictionary " +
              std::to_string(cfg.dict_bytes) +
              " bytes, runs=" + std::to_string(cfg.common.runs) +
              " (+1 warm-up), variants alternate; every page read back "
              "and checked\n" +
              kernel_line + "\n");
  std::vector<std::vector<Measurements>> m(corpora.size());
  Progress progress;
  for (std::size_t k = 0; k < corpora.size(); ++k) {
    for (const std::string& codec : cfg.codecs) {
      const corpus::PageSet& set = corpora[k];
      std::vector<Variant> variants;
      for (const RatioVariant& v : std::span(kVariants).subspan(1)) {
        variants.push_back({v.name, [&](std::size_t, Samples& s) {
                              return RunZtier(cfg, set, codec, v, s);
                            }});
      }
      if (zram.has_value() && std::ranges::find(zram->algorithms(), codec) !=
                                  zram->algorithms().end()) {
        variants.push_back({"kernel", [&](std::size_t, Samples& s) {
                              return RunKernel(cfg, *zram, set, codec, s);
                            }});
      }
      auto r = RunVariants({.runs = static_cast<std::size_t>(cfg.common.runs),
                            .label = "[" + set.name() + " " + codec + "]"},
                           variants, progress);
      if (!r.has_value()) {
        if (zram.has_value()) (void)zram->Reset();
        return ReportFailure(kCommand, "FATAL: " + set.name() + " " + codec +
                                           ": " + r.error().ToString());
      }
      m[k].push_back(std::move(*r));
    }
  }
  for (std::size_t c = 0; c < cfg.codecs.size(); ++c) {
    ReportCodec(report, cfg, c, corpora, m);
  }
  return report.Finish(kCommand, cfg.common);
}

}  // namespace ztier::tool
