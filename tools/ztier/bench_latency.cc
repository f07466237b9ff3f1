// bench_latency.cc: `ztier bench latency` (see bench_latency.h), the
// experiment of the zswap load contention series (docs/references.md) on a
// PageStore; LatencyRun::Task says what each thread of a run does.
#include "bench_latency.h"

#include <sched.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <latch>
#include <optional>
#include <thread>
#include <tuple>

#include "bench_harness.h"
#include "bench_report.h"
#include "bench_stats.h"
#include "shared_stream.h"
#include "tool_common.h"
#include "ztier/codec.h"

namespace ztier::tool {
namespace {

using Clock = std::chrono::steady_clock;
constexpr char kCommand[] = "ztier bench latency";
constexpr const char* kSeries[] = {"reads", "stores"};
constexpr std::size_t kBufferPages = 16;  // each task's own buffer
constexpr unsigned kRoundUs = 2000;       // the reader's and storer's rounds
// Each run's q-quantile (bench_stats.h's Percentile); q = 1 is the slowest.
constexpr std::pair<double, const char*> kLevels[] = {
    {0.5, "p50"},     {0.9, "p90"},       {0.99, "p99"},
    {0.999, "p99.9"}, {0.9999, "p99.99"}, {1.0, "max"}};

struct Flags {
  std::int64_t cpus = 1, seconds = 12;
  std::string mode = "both", codec = "zstd", corpus = kDefaultCorpusFile;
  BenchFlags common{.runs = 5};
  std::vector<std::string> modes;  // in the order they run
};

std::optional<int> ParseFlags(std::span<const std::string_view> args,
                              Flags* f) {
  FlagSet flags(kCommand,
                "[--cpus N] [--seconds S] [--runs N] "
                "[--mode shared|separate|both] [--codec NAME] [--corpus FILE] "
                "[--json FILE] [--plot DIR]");
  flags.AddInt("cpus", &f->cpus, "N",
               "CPUs 0..N-1 used, each with its own group (default 1)", 1,
               1024);
  flags.AddInt("seconds", &f->seconds, "S",
               "seconds per run and mode (default 12)", 1, 3600);
  AddBenchFlags(flags, &f->common);
  flags.AddString("mode", &f->mode, "MODE",
                  "shared (the baseline), separate or both (default)");
  flags.AddString("codec", &f->codec, "NAME",
                  "codec (default zstd, as the zswap load contention series)");
  AddCorpusFileFlag(flags, &f->corpus, "pages to store");
  if (auto rc = flags.ParseCommandLine(
          args,
          "how long a high-priority load or store waits behind "
          "preempted low-priority stores (the zswap load contention "
          "series), shared-stream baseline against separate paths.")) {
    return *rc;
  }
  if (f->mode == "both") f->modes = {"shared", "separate"};
  if (f->mode == "shared" || f->mode == "separate") f->modes = {f->mode};
  const long online = sysconf(_SC_NPROCESSORS_ONLN);
  if (f->modes.empty()) {
    return ReportUsageError(kCommand,
                            "--mode must be shared, separate or both");
  }
  if (f->cpus > online) {
    return ReportUsageError(
        kCommand,
        "--cpus must be 1.." + std::to_string(online) + " (online CPUs)");
  }
  if (MakeCodec(f->codec).has_value()) return std::nullopt;
  return ReportUsageError(kCommand, "unknown codec '" + f->codec + "'");
}

// Pins the calling thread to `cpu` and sets its nice value; false if either
// failed (e.g. a negative nice without privilege).
bool PinAndNice(std::size_t cpu, int nice) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  const bool pinned = sched_setaffinity(0, sizeof(set), &set) == 0;
  const auto tid = static_cast<id_t>(syscall(SYS_gettid));
  return setpriority(PRIO_PROCESS, tid, nice) == 0 && pinned;
}

// "SERIES timed", "SERIES over 10 ms" and "SERIES LEVEL" (us) of `ns`.
void AddSeries(const std::string& series, std::vector<std::uint32_t> ns,
               Samples& out) {
  out.Add(series + " timed", static_cast<double>(ns.size()));
  out.Add(series + " over 10 ms",
          std::count_if(ns.begin(), ns.end(),
                        [](std::uint32_t x) { return x > 10'000'000; }));
  for (auto [q, level] : kLevels) {
    if (!ns.empty()) out.Add(series + " " + level, Percentile(ns, q) / 1000.0);
  }
}

// The tasks of each CPU's group, by index: 0 and 1 workers, 2 the reader,
// 3 the storer (each on its own buffer), 4 the spinner; their nice values.
constexpr int kNice[] = {10, 10, -19, -19, 0};
using Lat = std::vector<std::uint32_t>;

// One run of a mode: its state, shared by its threads.
struct LatencyRun {
  SharedStreamStore& store;
  const corpus::PageSet& pages;
  std::atomic<bool> stop{false}, failed{false}, priorities{true};
  std::atomic<std::uint64_t> worker_ops{0}, worker_cpu_ns{0}, mismatches{0};
  std::latch start{1};
  std::mutex mu;
  Lat ns[2];  // of kSeries, appended under mu

  // Stores corpus page `data` into `slot` (`load`: loads and checks it);
  // with `lat`, times the Store (Load) alone into it.
  void Op(bool load, std::size_t slot, std::size_t data, Lat* lat) {
    alignas(64) std::byte got[kPageSize];
    const ConstPage page = pages.page(data % pages.size());
    const auto t0 = lat ? Clock::now() : Clock::time_point{};
    const Status s = load ? store.Load(slot, MutablePage(got, kPageSize))
                          : store.Store(slot, page);
    if (lat) {
      const auto d = std::chrono::nanoseconds(Clock::now() - t0).count();
      lat->push_back(std::min<std::int64_t>(d, UINT32_MAX));
    }
    if (!s.ok()) failed = true;
    if (load && std::memcmp(page.data(), got, kPageSize) != 0) ++mismatches;
  }
  bool Stopped() const { return stop.load(std::memory_order_relaxed); }

  // Task `t` (kNice) of CPU `cpu`, pinned to it, until stop: workers store
  // their buffer and load it back; the spinner burns CPU so that they get
  // preempted; the reader (storer) stores its buffer, does one untimed round
  // (a thread's first load creates its decompressor), then times each load
  // (store) of it in rounds every kRoundUs (SleepUntilNextRound: a mode
  // whose rounds block does fewer of them, and its high-priority tasks
  // leave the workers more CPU: docs/benchmarks.md says which figure that
  // biases).
  void Task(std::size_t cpu, std::size_t t) {
    if (!PinAndNice(cpu, kNice[t])) priorities = false;
    const bool worker = t < 2, reader = t == 2, storer = t == 3;
    const std::size_t bp = kBufferPages, first = (cpu * 4 + t) * bp;
    for (std::size_t p = 0; p < bp && (reader || storer); ++p) {
      Op(false, first + p, p, nullptr);
      if (reader) Op(true, first + p, p, nullptr);  // the untimed round
    }
    start.wait();
    if (t == 4) {
      volatile std::uint64_t spin = 0;
      while (!Stopped()) spin = spin + 1;
      return;
    }
    Lat lat;
    if (!worker) lat.reserve(1 << 20);
    auto next = Clock::now();
    std::size_t iter = 1;
    for (; !Stopped(); ++iter) {
      // Workers rotate through the corpus so that the work is not one
      // page's; the storer stores other pages each round.
      const std::size_t data =
          worker ? (cpu * 7 + t * 3 + iter) * bp : (storer ? iter : 0);
      Lat* timed = worker ? nullptr : &lat;
      for (std::size_t p = 0; p < bp && !reader; ++p) {
        Op(false, first + p, data + p, timed);
      }
      for (std::size_t p = 0; p < bp && !storer; ++p) {
        Op(true, first + p, data + p, timed);
      }
      if (worker) continue;
      SleepUntilNextRound(&next, std::chrono::microseconds(kRoundUs));
    }
    std::lock_guard lock(mu);
    if (!worker) {
      ns[t - 2].insert(ns[t - 2].end(), lat.begin(), lat.end());
      return;
    }
    timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    worker_ops += (iter - 1) * 2 * bp;
    worker_cpu_ns += ts.tv_sec * 1'000'000'000ull + ts.tv_nsec;
  }
};

// One run of a mode into `out`: AddSeries's of "reads" and "stores";
// "ops_s" and "ops_cpu_s", the workers' stores + loads per second of wall
// time and of their own CPU time; "priorities", 1 if every nice value and
// pinning applied. Errors: kIoError (a store or load failed), kCorruption
// (a load returned wrong data).
Status RunOnce(const Flags& f, bool shared, const corpus::PageSet& pages,
               Samples& out) {
  const auto cpus = static_cast<std::size_t>(f.cpus);
  ZT_ASSIGN_OR_RETURN(std::unique_ptr<PageStore> engine,
                      PageStore::Create({.num_pages = cpus * 4 * kBufferPages,
                                         .codec = f.codec,
                                         .streams = cpus}));
  SharedStreamStore store(*engine, shared, cpus);
  LatencyRun run{.store = store, .pages = pages};
  std::vector<std::thread> threads;
  for (std::size_t cpu = 0; cpu < cpus; ++cpu) {
    for (std::size_t t = 0; t < std::size(kNice); ++t) {
      threads.emplace_back(&LatencyRun::Task, &run, cpu, t);
    }
  }
  const auto t0 = Clock::now();
  run.start.count_down();
  std::this_thread::sleep_for(std::chrono::seconds(f.seconds));
  run.stop = true;
  for (auto& t : threads) t.join();
  const double s = std::chrono::duration<double>(Clock::now() - t0).count();
  if (run.failed) return Status::IoError("a store or load failed");
  if (run.mismatches > 0) {
    return Status::Corruption(std::to_string(run.mismatches.load()) +
                              " loads returned wrong data");
  }
  for (int i = 0; i < 2; ++i) AddSeries(kSeries[i], std::move(run.ns[i]), out);
  const auto ops = static_cast<double>(run.worker_ops.load());
  out.Add("ops_s", ops / s);
  out.Add("ops_cpu_s", run.worker_cpu_ns ? ops * 1e9 / run.worker_cpu_ns : 0);
  out.Add("priorities", run.priorities ? 1 : 0);
  return Status::Ok();
}

// latency-cpusN-reads or -stores: each mode's quantiles of each run.
Chart LatencyChart(const Flags& f, const Measurements& m,
                   const std::string& what) {
  const std::string cpus = std::to_string(f.cpus);
  Chart c{.name = "latency-cpus" + cpus + "-" + what,
          .title = "High-priority " + what + ", " + cpus +
                   (f.cpus == 1 ? " CPU" : " CPUs") +
                   ": shared stream vs separate paths (" +
                   MedianOfRuns(f.common.runs) + ")",
          .x_label = "percentile of the " + what + " of one run",
          .y_label = "latency (microseconds, log scale)",
          .log_y = true};
  for (const std::string& mode : f.modes) c.series.push_back({.title = mode});
  for (std::size_t l = 0; l < std::size(kLevels); ++l) {
    c.x_tics.push_back({double(l), kLevels[l].second});
    for (PlotSeries& line : c.series) {
      std::vector<double> us = m.Of(line.title, what + " " + kLevels[l].second);
      // A log axis has no 0; steady_clock never times a load that short.
      for (double& x : us) x = std::max(x, 0.001);
      if (!us.empty()) line.points.push_back(SpreadPoint(double(l), us));
    }
  }
  return c;
}

// The separate mode against the shared one, run by run, with the targets.
void AddComparison(const Measurements& m, Report& report) {
  Table& t = report.AddTable(
      "separate_vs_shared",
      "separate against shared, same run (targets of issue P4)");
  // Label, figure, target; met: the median ratio within [lo, hi].
  for (auto [label, figure, target, lo, hi] :
       {std::tuple{"slowest read", "reads max", "<= 0.1", 0.0, 0.1},
        {"slowest store", "stores max", "<= 0.1", 0.0, 0.1},
        {"worker throughput", "ops_s", ">= 0.95", 0.95, 1e300},
        {"worker ops per CPU-second", "ops_cpu_s", "", 0.0, 0.0}}) {
    const auto r = m.Ratios("separate", figure, "shared", figure);
    const double med = Summarize(r).median;
    Row& row = t.AddRow().Text("figure", label).Figure("ratio", r, 3);
    if (*target != '\0') {
      row.Text("target", target)
          .Bool("met", !r.empty() && med >= lo && med <= hi);
    }
  }
  for (const std::string what : kSeries) {
    const double most = Summarize(m.Of("separate", what + " over 10 ms")).max;
    t.AddRow()
        .Text("figure", what + " over 10 ms, any run")
        .Number("count", most, 0)
        .Text("target", "0")
        .Bool("met", most == 0);
  }
}

// The tables of every mode: each latency level of one run (the slowest
// with its spread), median over the runs; the workers' throughput.
void AddModes(const Flags& f, const Measurements& m, Report& report) {
  Table& lat = report.AddTable("latency", "high-priority latency (us)");
  for (const std::string& mode : f.modes) {
    for (const std::string what : kSeries) {
      Row& row = lat.AddRow().Text("mode", mode).Text("series", what);
      for (auto [q, label] : kLevels) {
        row.Figure(q < 1 ? label : "slowest", m.Of(mode, what + " " + label), 1,
                   q < 1 ? kMedian : kRange | kCv);
      }
      row.Figure("over 10 ms per run", m.Of(mode, what + " over 10 ms"), 0)
          .Figure("timed per run", m.Of(mode, what + " timed"), 0, kMedian);
    }
  }
  Table& workers = report.AddTable("workers", "workers: stores + loads");
  for (const std::string& mode : f.modes) {
    workers.AddRow()
        .Text("mode", mode)
        .Figure("per second", m.Of(mode, "ops_s"), 0)
        .Figure("per CPU-second", m.Of(mode, "ops_cpu_s"), 0);
  }
}

}  // namespace

int RunBenchLatency(std::span<const std::string_view> args) {
  Flags f;
  if (auto rc = ParseFlags(args, &f)) return *rc;
  auto pages = LoadCorpus(f.corpus);
  if (!pages) return ReportFailure(kCommand, pages.error().message());
  const std::string config = "cpus=" + std::to_string(f.cpus) +
                             " seconds=" + std::to_string(f.seconds) +
                             " runs=" + std::to_string(f.common.runs) +
                             " mode=" + f.mode + " codec=" + f.codec +
                             " corpus=" + f.corpus;
  Report report(kCommand, GetMachineInfo());
  report.Condition("config", config);
  report.Line("config: " + config +
              "; per CPU: 2 workers nice +10, 1 spinner nice 0, 1 reader and "
              "1 storer nice -19, " +
              std::to_string(kBufferPages) +
              "-page buffers, a timed round every " + std::to_string(kRoundUs) +
              " us\n");
  std::vector<Variant> variants;
  for (const std::string& mode : f.modes) {
    variants.push_back(
        {mode, [&, shared = mode == "shared"](std::size_t, Samples& s) {
           return RunOnce(f, shared, *pages, s);
         }});
  }
  Progress progress;
  auto m = RunVariants({.runs = static_cast<std::size_t>(f.common.runs),
                        .label = std::to_string(f.seconds) + " s per mode"},
                       variants, progress);
  if (!m) return ReportFailure(kCommand, m.error().message());
  AddModes(f, *m, report);
  bool priorities = true;
  for (const std::string& mode : f.modes) {
    for (double p : m->Of(mode, "priorities")) priorities = priorities && p;
  }
  report.Condition("priorities_applied", priorities ? "yes" : "no");
  if (!priorities) {
    report.Line(
        "WARNING: nice values or CPU pinning could not be applied "
        "(run as root); these figures do not show the effect.\n");
  }
  if (f.modes.size() == 2) AddComparison(*m, report);
  for (const char* what : kSeries) report.AddChart(LatencyChart(f, *m, what));
  return report.Finish(kCommand, f.common);
}

}  // namespace ztier::tool
