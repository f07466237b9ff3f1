// bench_policy.cc: `ztier bench policy` (see bench_policy.h): the latency
// experiment's method (bench_latency.cc: timed rounds on a fixed schedule,
// variants alternating in each run, per-run quantiles) applied to a
// Device's client reads with and without the post-processing policy.
#include "bench_policy.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <optional>
#include <random>

#include "bench_harness.h"
#include "bench_report.h"
#include "bench_stats.h"
#include "policy_runner.h"
#include "tool_common.h"
#include "ztier/device.h"
#include "ztier/policy.h"

namespace ztier::tool {
namespace {

using Clock = std::chrono::steady_clock;
constexpr char kCommand[] = "ztier bench policy";
constexpr unsigned kRoundUs = 2000;  // the reader's rounds, as bench latency
constexpr std::size_t kFillPages = 256;
constexpr char kDefaultPolicy[] =
    "period=1s idle_age=2s recompress_cpu=25% writeback_age=4s "
    "writeback_daily=none";

struct Flags {
  std::string size = "128M", corpus = kDefaultCorpusFile;
  std::string policy = kDefaultPolicy;
  std::int64_t hot_pages = 1024, reads = 4000, seconds = 10;
  BenchFlags common{.runs = 5};
  std::uint64_t cold_bytes = 0;
  PolicyOptions options;
};

std::optional<int> ParseFlags(std::span<const std::string_view> args,
                              Flags* f) {
  FlagSet flags(kCommand,
                "[--size SIZE] [--hot-pages N] [--reads N] [--seconds S] "
                "[--policy TOKENS] [--runs N] [--corpus FILE] [--json FILE] "
                "[--plot DIR]");
  flags.AddString("size", &f->size, "SIZE",
                  "the cold pages, which go idle (default 128M)");
  flags.AddInt("hot-pages", &f->hot_pages, "N",
               "pages the client reads, at random (default 1024)", 1, 1 << 20);
  flags.AddInt("reads", &f->reads, "N",
               "client reads per second, in rounds every 2 ms (default 4000)",
               500, 1'000'000);
  flags.AddInt("seconds", &f->seconds, "S",
               "seconds per run and variant (default 10)", 1, 3600);
  flags.AddString(
      "policy", &f->policy, "TOKENS",
      std::string("the policy (default \"") + kDefaultPolicy + "\")");
  AddBenchFlags(flags, &f->common);
  AddCorpusFileFlag(flags, &f->corpus, "pages to store");
  if (auto rc = flags.ParseCommandLine(
          args,
          "client read latency with the post-processing policy running "
          "against without it, same run (target: median within 1.2x).")) {
    return *rc;
  }
  auto size = ParseSizeFlag(f->size, 1u << 20, "1M");
  if (!size.has_value())
    return ReportUsageError(kCommand, size.error().message());
  f->cold_bytes = *size;
  auto options = ParsePolicyOptions(f->policy);
  if (!options.has_value()) {
    return ReportUsageError(kCommand, options.error().message());
  }
  f->options = std::move(*options);
  return std::nullopt;
}

// A fresh device in *registry of the hot pages then the cold ones, filled
// from `pages` (page i holds corpus page i mod its size).
Result<std::shared_ptr<Device>> MakeDevice(const Flags& f,
                                           const corpus::PageSet& pages,
                                           const std::string& dir,
                                           DeviceRegistry* registry) {
  ZT_ASSIGN_OR_RETURN(std::shared_ptr<Device> d, registry->Add("zram0"));
  ZT_RETURN_IF_ERROR(d->SetRecompAlgorithm("algo=zstd priority=1"));
  ZT_RETURN_IF_ERROR(d->SetBackingDev(dir + "/zram0.img"));
  const std::uint64_t total =
      static_cast<std::uint64_t>(f.hot_pages) * kPageSize + f.cold_bytes;
  ZT_RETURN_IF_ERROR(d->SetDisksize(total));
  // Runs of up to kFillPages consecutive corpus pages.
  for (std::uint64_t first = 0; first < total / kPageSize;) {
    const std::size_t from = first % pages.size();
    const auto n = static_cast<std::size_t>(std::min<std::uint64_t>(
        {total / kPageSize - first, pages.size() - from, kFillPages}));
    ZT_RETURN_IF_ERROR(
        d->Write(first * kPageSize,
                 pages.bytes().subspan(from * kPageSize, n * kPageSize)));
    first += n;
  }
  return d;
}

// One run of a variant: the client's reads of the hot pages for --seconds,
// timed, with the policy's thread running when `with_policy`. Samples:
// "read p50", "read p99" (us), "reads", and the device's "recompressed",
// "written back", "compacted" (pages, the policy's compactions) and the
// policy's "passes". kCorruption if a read returned wrong data.
Status RunOnce(const Flags& f, bool with_policy, const corpus::PageSet& pages,
               Samples& out) {
  ZT_ASSIGN_OR_RETURN(TempDir dir, TempDir::Create("ztier-bench-policy"));
  DeviceRegistry registry{DeviceDefaults{}};
  ZT_ASSIGN_OR_RETURN(std::shared_ptr<Device> d,
                      MakeDevice(f, pages, dir.path(), &registry));
  std::optional<PolicyRunner> runner;
  if (with_policy) runner.emplace(&registry, f.options, nullptr);
  std::vector<std::uint32_t> ns;
  ns.reserve(static_cast<std::size_t>(f.reads * f.seconds));
  const auto per_round = static_cast<std::size_t>(
      std::max<std::int64_t>(1, f.reads * kRoundUs / 1'000'000));
  std::minstd_rand rng(301);
  alignas(64) std::byte got[kPageSize];
  std::uint64_t mismatches = 0;
  const auto end = Clock::now() + std::chrono::seconds(f.seconds);
  auto next = Clock::now();
  while (Clock::now() < end) {
    for (std::size_t r = 0; r < per_round; ++r) {
      const std::uint64_t page =
          rng() % static_cast<std::uint64_t>(f.hot_pages);
      const auto t0 = Clock::now();
      ZT_RETURN_IF_ERROR(d->Read(page * kPageSize, got));
      const auto dt = std::chrono::nanoseconds(Clock::now() - t0).count();
      ns.push_back(
          static_cast<std::uint32_t>(std::min<std::int64_t>(dt, UINT32_MAX)));
      mismatches += std::memcmp(got, pages.page(page % pages.size()).data(),
                                kPageSize) != 0;
    }
    SleepUntilNextRound(&next, std::chrono::microseconds(kRoundUs));
  }
  const std::uint64_t passes = runner ? runner->passes() : 0;
  runner.reset();  // stops it
  if (mismatches > 0) {
    return Status::Corruption(std::to_string(mismatches) +
                              " reads returned wrong data");
  }
  const PageStoreStats st = d->Stats();
  out.Add("reads", static_cast<double>(ns.size()));
  out.Add("read p50", Percentile(ns, 0.5) / 1000.0);
  out.Add("read p99", Percentile(ns, 0.99) / 1000.0);
  out.Add("recompressed", static_cast<double>(st.recompressed_pages));
  out.Add("written back", static_cast<double>(st.bd_writes));
  out.Add("compacted", static_cast<double>(st.pages_compacted));
  out.Add("passes", static_cast<double>(passes));
  return Status::Ok();
}

// The tables, the ratio's line and the chart (bars of the read latencies,
// without and with the policy).
void AddResults(const Measurements& m, std::size_t runs, Report& report) {
  constexpr const char* kVariants[] = {"none", "policy"};
  Table& t = report.AddTable("reads", "client reads of the hot pages (us)");
  for (const char* v : kVariants) {
    Row& row = t.AddRow()
                   .Text("variant", v)
                   .Figure("p50", m.Of(v, "read p50"), 2)
                   .Figure("p99", m.Of(v, "read p99"), 2)
                   .Figure("reads per run", m.Of(v, "reads"), 0, kMedian);
    for (const char* figure :
         {"recompressed", "written back", "compacted", "passes"}) {
      row.Figure(figure, m.Of(v, figure), 0, kMedian);
    }
  }
  const auto p50 = m.Ratios("policy", "read p50", "none", "read p50");
  Table& c = report.AddTable("policy_vs_none", "policy against none, same run");
  c.AddRow()
      .Text("figure", "median read")
      .Figure("ratio", p50, 3)
      .Text("target", "<= 1.2")
      .Bool("met", !p50.empty() && Summarize(p50).median <= 1.2);
  c.AddRow()
      .Text("figure", "p99 read")
      .Figure("ratio", m.Ratios("policy", "read p99", "none", "read p99"), 3);
  report.Ratio("median read latency, policy / none (target <= 1.2)", p50,
               "no run measured both");
  Chart chart{.name = "policy-reads",
              .title = "client reads of the hot pages while the policy runs (" +
                       MedianOfRuns(runs) + ")",
              .x_label = "variant",
              .y_label = "read latency (us)",
              .style = PlotStyle::kBars,
              .x_tics = {{0, kVariants[0]}, {1, kVariants[1]}}};
  for (const char* figure : {"read p50", "read p99"}) {
    PlotSeries& s = chart.series.emplace_back(PlotSeries{.title = figure});
    for (std::size_t k = 0; k < 2; ++k) {
      const std::vector<double> v = m.Of(kVariants[k], figure);
      if (!v.empty()) s.points.push_back(SpreadPoint(k, v));
    }
  }
  report.AddChart(std::move(chart));
}

}  // namespace

int RunBenchPolicy(std::span<const std::string_view> args) {
  Flags f;
  if (auto rc = ParseFlags(args, &f)) return *rc;
  auto pages = LoadCorpus(f.corpus);
  if (!pages) return ReportFailure(kCommand, pages.error().message());
  const std::string config =
      "size=" + f.size + " hot_pages=" + std::to_string(f.hot_pages) +
      " reads=" + std::to_string(f.reads) +
      " seconds=" + std::to_string(f.seconds) +
      " runs=" + std::to_string(f.common.runs) + " corpus=" + f.corpus +
      " policy=\"" + f.policy + "\"";
  Report report(kCommand, GetMachineInfo());
  report.Condition("config", config);
  report.Line("config: " + config +
              "; device: lz4, zstd at priority 1, a backing file in the "
              "temporary folder; one client thread\n");
  std::vector<Variant> variants;
  for (const char* v : {"none", "policy"}) {
    variants.push_back(
        {v, [&, with = std::string(v) == "policy"](std::size_t, Samples& s) {
           return RunOnce(f, with, *pages, s);
         }});
  }
  Progress progress;
  auto m = RunVariants({.runs = static_cast<std::size_t>(f.common.runs),
                        .label = std::to_string(f.seconds) + " s per variant"},
                       variants, progress);
  if (!m) return ReportFailure(kCommand, m.error().message());
  AddResults(*m, static_cast<std::size_t>(f.common.runs), report);
  return report.Finish(kCommand, f.common);
}

}  // namespace ztier::tool
