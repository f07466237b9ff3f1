// File: tools/ztier/bench_harness.h
//
// What every `ztier bench` experiment shares around its own measurements:
// the common flags, spelled one way (--runs N, --json FILE, --plot DIR,
// --corpus FILE, --corpus-dir DIR), finding a folder's corpora, and the run
// loop. An experiment declares its variants, each a function that runs it
// once and returns its samples; RunVariants runs the warm-up and then the
// measured runs, every variant in each, alternating their order, with the
// progress line, and hands back every sample. The experiment derives its
// ratios from them (Measurements::Ratios) and reports through
// bench_report.h.
//
//   BenchFlags common{.runs = 5};
//   AddBenchFlags(flags, &common);
//   ...
//   std::vector<Variant> variants = {
//       {"sync", [&](std::size_t, Samples& s) -> Status {
//          ...; s.Add("mb_s", mb_s); return Status::Ok(); }},
//       {"batched", ...}};
//   Progress progress;
//   auto m = RunVariants({.runs = common.runs, .label = "lz4"}, variants,
//                        progress);
//   if (!m.has_value()) return ReportFailure(kCommand, ...);
//   std::vector<double> speedup =
//       m->Ratios("batched", "mb_s", "sync", "mb_s");
//
// Thread safety: plain functions and values; no shared state. A variant's
// function runs on the calling thread.
#ifndef ZTIER_TOOLS_ZTIER_BENCH_HARNESS_H_
#define ZTIER_TOOLS_ZTIER_BENCH_HARNESS_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "flags.h"
#include "progress.h"
#include "ztier/status.h"

namespace ztier::tool {

// The flags every experiment has.
struct BenchFlags {
  std::int64_t runs = 5;  // measured runs; the default is the caller's
  std::string json;       // --json FILE; empty: none
  std::string plot;       // --plot DIR; empty: none
};

// --runs N (N >= 1, "measured runs, after one warm-up run"), --json FILE and
// --plot DIR into *f; f->runs holds the default before parsing.
void AddBenchFlags(FlagSet& flags, BenchFlags* f);

// The samples of one run of one variant: each figure's value by name, in
// the order added. Adding a name again replaces its value.
class Samples {
 public:
  void Add(std::string_view figure, double value);
  const std::vector<std::pair<std::string, double>>& values() const {
    return values_;
  }

 private:
  std::vector<std::pair<std::string, double>> values_;
};

// One variant of an experiment: a name (shown on the progress line and
// used to find its samples) and the function that runs it once. `run` is 0
// for a warm-up run, else 1..runs. A variant's function may also keep
// whatever else it wants to report from its last run.
struct Variant {
  std::string name;
  std::function<Status(std::size_t run, Samples& out)> run;
};

struct RunPlan {
  std::size_t runs = 5;     // measured runs
  std::size_t warmups = 1;  // runs before them whose samples are dropped
  // Reverse the order of the variants in every other run, so that no
  // variant always runs first (after a quiet period) or last.
  bool alternate = true;
  // The last `fixed_last` variants are left out of the reversal and run at
  // the end of every run (a probe of the machine after each run).
  std::size_t fixed_last = 0;
  std::string label;  // the progress line's prefix ("lz4 anon-python")
};

// Every sample of every variant over the measured runs.
class Measurements {
 public:
  // The samples of `figure` of `variant`, in run order, over the runs that
  // gave one; empty when none did.
  std::vector<double> Of(std::string_view variant,
                         std::string_view figure) const;
  // Per run: num's figure over den's, for each measured run in which both
  // gave one and den's is not 0.
  std::vector<double> Ratios(std::string_view num_variant,
                             std::string_view num_figure,
                             std::string_view den_variant,
                             std::string_view den_figure) const;
  // The value of `figure` of `variant` in measured run `run` (1-based).
  std::optional<double> At(std::string_view variant, std::string_view figure,
                           std::size_t run) const;

  // Used by RunVariants.
  void Record(std::string_view variant, std::size_t run, const Samples& s);

 private:
  using ByRun = std::vector<std::optional<double>>;  // index run - 1
  const ByRun* Find(std::string_view variant, std::string_view figure) const;
  std::map<std::pair<std::string, std::string>, ByRun> by_run_;
};

// Runs plan.warmups warm-up runs and then plan.runs measured runs of every
// variant, in declaration order, reversed in every other run when
// plan.alternate (but for the last plan.fixed_last), updating `progress`
// with "LABEL: warm-up: NAME" or "LABEL: run R/RUNS: NAME" before each.
// Stops at the first error, which it returns with "NAME, warm-up: " or
// "NAME, run R/RUNS: " in front, the progress line cleared.
Result<Measurements> RunVariants(const RunPlan& plan,
                                 std::span<const Variant> variants,
                                 Progress& progress);

// --json FILE: "also write every figure as JSON to FILE".
void AddJsonFlag(FlagSet& flags, std::string* path);

// --plot DIR: "also draw PNG charts with gnuplot into DIR (...)" (plot.h).
// When no Plotter can be made (no gnuplot, DIR cannot be created), Parse()
// says so on stderr once the flags are parsed: "COMMAND: --plot DIR: ERROR;
// the benchmark runs, but draws no charts". The command's own checks of
// its other flags come after, so a usage error they find follows it.
void AddPlotFlag(FlagSet& flags, std::string* dir);

// --corpus FILE, one file: "PURPOSE (a .pages.zst file or any plain file
// read as pages; default the checkout's anon-python corpus)". *file should
// hold kDefaultCorpusFile (tool_common.h) before parsing.
void AddCorpusFileFlag(FlagSet& flags, std::string* file,
                       std::string_view purpose);

// --corpus-dir DIR: every *.pages.zst in DIR. *dir should hold
// kDefaultCorpusDir (tool_common.h) before parsing.
void AddCorpusDirFlag(FlagSet& flags, std::string* dir,
                      std::string_view when = "");

// The *.pages.zst files in `dir`, sorted. kNotFound "no corpus: the corpus
// folder 'DIR' (ABS) is missing (or not a folder)." or "... holds no
// *.pages.zst files.", each followed by `hint` on its own line.
Result<std::vector<std::string>> FindCorpusDir(const std::string& dir,
                                               std::string_view hint);

// The hint of FindCorpusDir for commands that take only --corpus-dir.
inline constexpr char kCorpusDirHint[] =
    "Pass a folder of *.pages.zst files with --corpus-dir DIR.";

// After each timed round of a thread (bench latency and policy; *next first
// set to now): sleeps until the next round is due, `period` on. A round that
// ended late skips the periods it missed (the next is due a period from
// now), so a round blocked for long does not pile up rounds after it.
inline void SleepUntilNextRound(std::chrono::steady_clock::time_point* next,
                                std::chrono::microseconds period) {
  const auto now = std::chrono::steady_clock::now();
  *next = *next + period < now ? now + period : *next + period;
  std::this_thread::sleep_until(*next);
}

// "warm-up" for run 0, else "run R/RUNS".
std::string RunLabel(std::size_t run, std::size_t runs);

}  // namespace ztier::tool

#endif  // ZTIER_TOOLS_ZTIER_BENCH_HARNESS_H_
