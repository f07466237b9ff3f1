// File: tools/ztier/usemem.cc
//
// `ztier usemem` (see usemem.h): parses flags, loads the corpus, runs the
// variants in alternating order (one run is usemem_run.h's) and reports
// (usemem_report.h).
#include "usemem.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "bench_harness.h"
#include "corpus/corpus.h"
#include "flags.h"
#include "machine_info.h"
#include "plot.h"
#include "progress.h"
#include "tool_common.h"
#include "usemem_report.h"
#include "usemem_run.h"
#include "ztier/device.h"
#include "ztier/page.h"

namespace ztier::tool {
namespace {

constexpr const char kCommand[] = "ztier usemem";
constexpr const char kSynopsis[] =
    "[--workers N] [--size BYTES] [--budget PERCENT|BYTES] [--corpus FILE] "
    "[--codec NAME] [--compare-batching] [--runs N] [--json FILE] "
    "[--page-cluster N] [--sleep SECONDS] [--max-pool-percent N] "
    "[--plot DIR]";
constexpr const char kAbout[] =
    "the vm-scalability usemem workload of the zswap store batching\n"
    "series, on a ztier region.\n"
    "N worker threads share one region of N x --size bytes with a "
    "budget of\n--budget; each fills its slice from the corpus, adds a "
    "constant to every\n8-byte word, sleeps, reads it all back and "
    "checks every page. Reports the\nseries' Average/Total Throughput "
    "(KB/s) and Time to Free (usecs, the region's\ndestruction), and "
    "zswap's counters. --compare-batching alternates batched\nstores "
    "(parallel backend, batch 8, 64 KiB units) with one page at a time "
    "and\nends with the line `batched / one-at-a-time: X.XXx`.\n"
    "Needs userfaultfd (root, or vm.unprivileged_userfaultfd=1).";

struct Flags {
  std::int64_t workers = 4;
  std::string size = "256M";
  std::string budget = "60%";
  std::string corpus = kDefaultCorpusFile;
  std::string codec = "lz4";
  bool compare = false;
  std::int64_t runs = 1;
  std::string json;
  std::int64_t page_cluster = 3;  // vm.page-cluster's default
  std::string sleep = "1";
  // Not zswap's 20: see the flag's help.
  std::int64_t max_pool_percent = 50;
  std::string plot;
};

void DeclareFlags(FlagSet& flags, Flags* f) {
  flags.AddInt("workers", &f->workers, "N",
               "worker threads sharing the region (default 4)", 1, 256);
  flags.AddString("size", &f->size, "BYTES",
                  "memory per worker (default 256M; K/M/G suffixes)");
  flags.AddString("budget", &f->budget, "PERCENT|BYTES",
                  "resident memory before the reclaimer runs: a percent of "
                  "the region (\"60%\", the default) or bytes (\"600M\")");
  AddCorpusFileFlag(flags, &f->corpus, "pages the workers copy in, cyclically");
  flags.AddString("codec", &f->codec, "NAME", "region codec (default lz4)");
  flags.AddBool("compare-batching", &f->compare,
                "run one-at-a-time and batched stores alternately and "
                "report the ratio");
  flags.AddInt("runs", &f->runs, "N",
               "runs per variant (default 3 with --compare-batching, else 1)",
               1, 1000);
  AddJsonFlag(flags, &f->json);
  flags.AddInt("page-cluster", &f->page_cluster, "N",
               "readahead window 2^N pages on fault-in (default 3, as "
               "vm.page-cluster)", 0, 5);
  flags.AddString("sleep", &f->sleep, "SECONDS",
                  "pause between the write and the read pass (default 1; the "
                  "zswap store batching series' usemem sleeps 10)");
  flags.AddInt("max-pool-percent", &f->max_pool_percent, "N",
               "pool limit, percent of the budget (default 50; zswap's 20 "
               "would bind here, unlike in the zswap store batching series, "
               "and leave pages resident over the budget)",
               1, 100);
  AddPlotFlag(flags, &f->plot);
}

// "60%" or "62.5%" -> a fraction of `region`; else a size with K/M/G.
// Rounded down to pages. kInvalidArgument when malformed or 0.
Result<std::size_t> ParseBudget(const std::string& text, std::size_t region) {
  std::size_t bytes = 0;
  if (!text.empty() && text.back() == '%') {
    const std::string number = text.substr(0, text.size() - 1);
    char* end = nullptr;
    errno = 0;
    const double pct = std::strtod(number.c_str(), &end);
    if (number.empty() || end != number.c_str() + number.size() || errno != 0 ||
        !(pct > 0) || pct > 100) {
      return Err(Status::InvalidArgument("--budget " + text +
                                         ": a percent must be in (0, 100]"));
    }
    bytes = static_cast<std::size_t>(static_cast<double>(region) * pct / 100);
  } else {
    auto size = ParseSize(text);
    if (!size.has_value()) {
      return Err(Status::InvalidArgument("--budget " + text + ": " +
                                         size.error().message()));
    }
    bytes = *size;
  }
  bytes = bytes / kPageSize * kPageSize;
  if (bytes == 0) {
    return Err(Status::InvalidArgument(
        "--budget " + text + ": must be at least one page (4096 bytes)"));
  }
  return bytes;
}

Result<double> ParseSeconds(const std::string& text) {
  char* end = nullptr;
  errno = 0;
  const double s = std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size() || errno != 0 ||
      !(s >= 0) || s > 3600) {
    return Err(Status::InvalidArgument(
        "--sleep " + text + ": must be a number of seconds in [0, 3600]"));
  }
  return s;
}

// Fills *cfg from the flags; 0 when all is well, else the exit status (the
// message printed).
int CheckFlags(const Flags& f, bool runs_given, UsememConfig* cfg) {
  auto size = ParseSizeFlag(f.size, kPageSize, "4K");
  if (!size.has_value()) {
    PrintError(kCommand, size.error().message());
    return 2;
  }
  if (Status s = CheckCodecName(f.codec); !s.ok()) {
    PrintError(kCommand, s.message());
    return 2;
  }
  UsememRunConfig& r = cfg->run;
  r.workers = static_cast<std::size_t>(f.workers);
  r.worker_bytes = *size;
  auto budget = ParseBudget(f.budget, r.workers * r.worker_bytes);
  if (!budget.has_value()) {
    PrintError(kCommand, budget.error().message());
    return 2;
  }
  auto sleep = ParseSeconds(f.sleep);
  if (!sleep.has_value()) {
    PrintError(kCommand, sleep.error().message());
    return 2;
  }
  r.budget_bytes = *budget;
  r.codec = f.codec;
  r.page_cluster = static_cast<unsigned>(f.page_cluster);
  r.max_pool_percent = static_cast<unsigned>(f.max_pool_percent);
  r.sleep_seconds = *sleep;
  cfg->budget_text = f.budget;
  cfg->corpus_path = f.corpus;
  cfg->compare = f.compare;
  cfg->runs =
      runs_given ? static_cast<std::size_t>(f.runs) : (f.compare ? 3 : 1);
  cfg->json_path = f.json;
  return 0;
}

}  // namespace

int RunUsemem(std::span<const std::string_view> args) {
  Flags f;
  FlagSet flags(kCommand, kSynopsis);
  DeclareFlags(flags, &f);
  if (auto rc = flags.ParseCommandLine(args, kAbout)) return *rc;
  UsememConfig cfg;
  if (int rc = CheckFlags(f, flags.WasSet("runs"), &cfg); rc != 0) return rc;
  auto corpus = LoadCorpus(cfg.corpus_path);
  if (!corpus.has_value()) {
    PrintError(kCommand, corpus.error().message());
    return 1;
  }
  cfg.corpus_name = corpus->name();
  cfg.corpus_pages = corpus->size();

  const MachineInfo machine = GetMachineInfo();
  std::printf("%s\n%s", MachineLine(machine).c_str(),
              UsememConfigText(cfg).c_str());
  std::fflush(stdout);

  ChartWriter charts(kCommand, f.plot);
  std::vector<UsememRun> runs;
  Progress progress;
  for (std::size_t run = 0; run < cfg.runs; ++run) {
    const std::vector<bool> order = UsememRunOrder(run, cfg.compare);
    for (std::size_t k = 0; k < order.size(); ++k) {
      const std::string label = "[" + RunLabel(run + 1, cfg.runs) + "] " +
                                UsememVariantName(order[k]);
      progress.Update(label);
      UsememRunConfig rc = cfg.run;
      rc.batched = order[k];
      auto result = RunUsememOnce(rc, *corpus);
      if (!result.has_value()) {
        progress.Clear();
        PrintError(kCommand,
                   "FATAL: " + label + ": " + result.error().ToString());
        return 1;
      }
      UsememRun r{.run = run + 1, .order = k, .result = std::move(*result)};
      if (r.result.mismatches > 0) {
        progress.Clear();
        std::fprintf(stderr, "%s", UsememMismatchText(r).c_str());
        PrintError(kCommand, "FATAL: " + label + ": " +
                                 std::to_string(r.result.mismatches) + " of " +
                                 std::to_string(r.result.pages_verified) +
                                 " pages read back wrong");
        return 1;
      }
      runs.push_back(std::move(r));
    }
  }
  progress.Clear();

  std::printf("\n%s", UsememResultText(cfg, runs).c_str());
  std::fflush(stdout);
  if (!cfg.json_path.empty()) {
    if (Status s = WriteUsememJson(cfg.json_path, machine, cfg, runs);
        !s.ok()) {
      PrintError(kCommand, s.ToString());
      return 1;
    }
    // On stderr: the ratio line stays the last line of stdout.
    std::fprintf(stderr, "wrote %s\n", cfg.json_path.c_str());
  }
  const Chart chart = UsememChart(cfg, runs);
  return charts.Write({&chart, 1}) ? 0 : 1;
}

}  // namespace ztier::tool
