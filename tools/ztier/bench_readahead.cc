// File: tools/ztier/bench_readahead.cc
//
// `ztier bench readahead` (see bench_readahead.h), on Regions without a
// budget and the pool limit at 100% (Pageout evicts, and stores every page
// that compresses); region page i holds corpus page i % corpus.size().
// 1. Readahead: fill --size, Pageout all, then time reading it in order:
//    one 8-byte load (the fault, and the readahead of its aligned window)
//    and a memcmp per page.
// 2. Fault-in latency: each page read once in a random order (kSeed), each
//    touch timed, mincore() first telling a fault from a hit (a page an
//    earlier fault mapped, or that Pageout refused), on a paged-out region
//    ("stored"), a fresh one ("first touch", all zeros) and plain memory
//    on a userfaultfd whose handler only answers each fault with one
//    UFFDIO_COPY ("bare": what a fault costs alone).
#include "bench_readahead.h"

#include <poll.h>
#include <sys/mman.h>  // mincore

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <numeric>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "bench_harness.h"
#include "bench_report.h"
#include "bench_stats.h"
#include "platform/event_fd.h"
#include "platform/mapping.h"
#include "platform/userfaultfd.h"  // internal: the bare baseline uses it
#include "tool_common.h"
#include "ztier/page.h"
#include "ztier/region.h"

namespace ztier::tool {
namespace {

using Clock = std::chrono::steady_clock;
constexpr char kCommand[] = "ztier bench readahead";
// Measured on the 2-vCPU development machine: a 64 MiB region touched in
// order, one byte per page, by one thread, while another answered each
// MISSING read fault with one 4 KiB UFFDIO_COPY.
constexpr char kBareFaultLine[] =
    "bare UFFDIO_COPY 4K fault measured on the 2-vCPU development machine: "
    "p50 14.0 \xC2\xB5s, p99 27.6 \xC2\xB5s (default scheduler); 7.55 "
    "\xC2\xB5s p50 when handler and faulter share a vCPU";
constexpr std::uint32_t kSeed = 301;
// The fault-in latency's columns and chart points.
constexpr std::pair<double, const char*> kLevels[] = {
    {0.5, "median"}, {0.9, "p90"}, {0.99, "p99"}, {1.0, "max"}};

struct Flags {
  std::string corpus = kDefaultCorpusFile, size = "256M", codec = "lz4";
  std::int64_t page_cluster = 3, fault_pages = 16384;
  BenchFlags common{.runs = 5};
  std::size_t size_bytes = 0;
};

std::optional<int> ParseFlags(std::span<const std::string_view> args,
                              Flags* f) {
  FlagSet flags(kCommand,
                "[--corpus FILE] [--size SIZE] [--codec NAME] [--runs N] "
                "[--page-cluster N] [--fault-pages N] [--json FILE] "
                "[--plot DIR]");
  AddCorpusFileFlag(flags, &f->corpus,
                    "pages to fill the regions with, repeated as needed");
  flags.AddString("size", &f->size, "SIZE", "readahead region (default 256M)");
  flags.AddString("codec", &f->codec, "NAME", "region codec (default lz4)");
  flags.AddInt("runs", &f->common.runs, "N",
               "readahead runs (default 5; 0 skips them)", 0, 1000);
  flags.AddInt("page-cluster", &f->page_cluster, "N",
               "the page_cluster compared with 0 (default 3)", 1, 5);
  flags.AddInt("fault-pages", &f->fault_pages, "N",
               "fault-in latency pages (default 16384; 0 skips it)", 0,
               1 << 22);
  AddJsonFlag(flags, &f->common.json);
  AddPlotFlag(flags, &f->common.plot);
  if (auto rc = flags.ParseCommandLine(
          args,
          "fault-in on a ztier region: readahead (page_cluster 0 "
          "against --page-cluster), then the latency of one fault-in. "
          "Needs userfaultfd (root, or vm.unprivileged_userfaultfd=1).")) {
    return *rc;
  }
  auto size = ParseSizeFlag(f->size, kPageSize, "4K");
  if (!size) return ReportUsageError(kCommand, size.error().message());
  f->size_bytes = *size;
  if (Status s = CheckCodecName(f->codec); !s.ok()) {
    return ReportUsageError(kCommand, s.message());
  }
  return std::nullopt;
}

// One phase's touches (ns) and the region's counters' growth (not bare).
struct TouchSeries {
  std::vector<std::uint32_t> fault_ns;  // touches of unmapped pages
  std::vector<std::uint32_t> hit_ns;    // touches of mapped pages
  std::int64_t faults = 0, zswpin = 0;
};

// One 8-byte load the compiler must do.
std::uint64_t Touch(const std::byte* p) {
  return *reinterpret_cast<const volatile std::uint64_t*>(p);
}

bool Differs(const std::byte* p, std::size_t i, const corpus::PageSet& c) {
  return std::memcmp(p, c.page(i % c.size()).data(), kPageSize) != 0;
}

// kCorruption "BAD of N WHAT read back wrong" unless `bad` is 0 and each
// of the `n` pages at `base` (with one) holds its corpus page (`corpus`
// null: zeros).
Status Check(std::uint64_t bad, std::size_t n, const char* what,
             const std::byte* base = nullptr,
             const corpus::PageSet* corpus = nullptr) {
  for (std::size_t i = 0; base != nullptr && i < n; ++i) {
    const std::byte* p = base + i * kPageSize;
    bad += corpus ? Differs(p, i, *corpus)
                  : std::any_of(p, p + kPageSize,
                                [](std::byte b) { return b != std::byte{}; });
  }
  if (bad == 0) return Status::Ok();
  return Status::Corruption(std::to_string(bad) + " of " + std::to_string(n) +
                            " " + what + " read back wrong");
}

// A region of `o` with no budget and the pool limit at 100%; with `fill`,
// holding the corpus and paged out.
Result<std::unique_ptr<Region>> MakeRegion(RegionOptions o, bool fill,
                                           const corpus::PageSet& corpus) {
  o.budget = 0;
  o.max_pool_percent = 100;
  ZT_ASSIGN_OR_RETURN(std::unique_ptr<Region> r, Region::Create(o));
  if (!fill) return r;
  for (std::size_t i = 0; i < r->size() / kPageSize; ++i) {
    std::memcpy(r->data() + i * kPageSize,
                corpus.page(i % corpus.size()).data(), kPageSize);
  }
  ZT_RETURN_IF_ERROR(r->Pageout(r->data(), r->size()));
  return r;
}

// Touches the pages at `base` in `order`, timing each touch, classified by
// mincore() first (a page it cannot answer for counts as unmapped); the
// XOR of the values read goes to *sink (so that the loads stay).
void TimedTouches(const std::byte* base, const std::vector<std::size_t>& order,
                  TouchSeries* out, std::uint64_t* sink) {
  out->fault_ns.reserve(order.size());
  for (std::size_t i : order) {
    const std::byte* p = base + i * kPageSize;
    unsigned char vec = 0;
    const bool mapped =
        ::mincore(const_cast<std::byte*>(p), kPageSize, &vec) == 0 &&
        (vec & 1) != 0;
    const Clock::time_point t0 = Clock::now();
    *sink ^= Touch(p);
    const auto ns = std::chrono::nanoseconds(Clock::now() - t0).count();
    (mapped ? out->hit_ns : out->fault_ns)
        .push_back(std::min<std::int64_t>(ns, UINT32_MAX));
  }
}

// Answers every missing fault with one UFFDIO_COPY of the page's corpus
// page until `stop_fd` is readable. A failed copy is logged once and maps
// zeros, so that the toucher never hangs (the check then fails).
void BareHandler(internal::Userfaultfd* uffd, int stop_fd,
                 const std::byte* base, const corpus::PageSet* corpus,
                 std::atomic<bool>* failed) {
  uffd_msg msgs[16];
  pollfd fds[2] = {{uffd->poll_fd(), POLLIN, 0}, {stop_fd, POLLIN, 0}};
  for (;;) {
    if (::poll(fds, 2, -1) < 0 && errno == EINTR) continue;
    if (fds[1].revents != 0) return;
    const Result<std::size_t> got = uffd->ReadEvents(msgs, std::size(msgs));
    if (!got.has_value()) return failed->store(true);
    for (std::size_t i = 0; i < *got; ++i) {
      if (msgs[i].event != UFFD_EVENT_PAGEFAULT) continue;
      const std::uintptr_t addr =
          msgs[i].arg.pagefault.address & ~std::uintptr_t{kPageSize - 1};
      const std::size_t page =
          (addr - reinterpret_cast<std::uintptr_t>(base)) / kPageSize;
      std::size_t done = 0;
      Status st = uffd->Copy(addr, corpus->page(page % corpus->size()).data(),
                             kPageSize, /*wp=*/false, &done);
      if (st.ok()) continue;
      if (!failed->exchange(true)) {
        std::fprintf(stderr, "bare handler: %s\n", st.ToString().c_str());
      }
      uffd->ZeroPage(addr, kPageSize, &done).IgnoreError();
    }
  }
}

Status BareCopyFaults(const std::vector<std::size_t>& order,
                      const corpus::PageSet& corpus, TouchSeries* s) {
  const std::size_t len = order.size() * kPageSize;
  ZT_ASSIGN_OR_RETURN(const platform::Mapping map,
                      platform::Mapping::Anonymous(
                          len, platform::Commit::kCharged, "mmap bare region"));
  std::byte* const mem = map.data();
  platform::Advise(mem, len, platform::Advice::kNoHugePages).IgnoreError();
  ZT_ASSIGN_OR_RETURN(std::unique_ptr<internal::Userfaultfd> uffd,
                      internal::OpenUserfaultfd());
  ZT_RETURN_IF_ERROR(uffd->Register(mem, len));
  ZT_ASSIGN_OR_RETURN(const platform::EventFd stop,
                      platform::EventFd::Create());
  std::atomic<bool> failed{false};
  std::thread handler(BareHandler, uffd.get(), stop.fd(), mem, &corpus,
                      &failed);
  std::uint64_t sink = 0;
  TimedTouches(mem, order, s, &sink);
  const Status checked = Check(0, order.size(), "bare pages", mem, &corpus);
  stop.Signal();
  handler.join();
  uffd->Unregister(mem, len).IgnoreError();
  if (failed) return Status::IoError("the bare userfaultfd handler failed");
  return checked;
}

// One run of section 1 into `out`: "pages_s" and "mb_s" of the read
// pass, "stored" (the pages Pageout stored), and "faults", "swap_ra" and
// "swap_ra_hit" during the read (RegionStats).
Status SequentialRead(std::size_t size_bytes, const std::string& codec,
                      unsigned page_cluster, const corpus::PageSet& corpus,
                      Samples& out) {
  ZT_ASSIGN_OR_RETURN(std::unique_ptr<Region> r,
                      MakeRegion({.size = size_bytes,
                                  .codec = codec,
                                  .page_cluster = page_cluster,
                                  .count_ra_hits = true},  // swap_ra_hit
                                 true, corpus));
  const std::size_t pages = r->size() / kPageSize;
  const RegionStats before = r->Stats();
  std::uint64_t bad = 0;
  const Clock::time_point t0 = Clock::now();
  for (std::size_t i = 0; i < pages; ++i) {
    const std::byte* p = r->data() + i * kPageSize;
    static_cast<void>(Touch(p));  // the fault, as a program's first load
    bad += Differs(p, i, corpus);
  }
  const double s = std::chrono::duration<double>(Clock::now() - t0).count();
  const RegionStats after = r->Stats();
  ZT_RETURN_IF_ERROR(Check(bad, pages, "pages"));
  out.Add("pages_s", static_cast<double>(pages) / s);
  out.Add("mb_s", static_cast<double>(pages * kPageSize) / s / 1e6);
  out.Add("stored", static_cast<double>(before.stored_pages));
  out.Add("faults", static_cast<double>(after.faults - before.faults));
  out.Add("swap_ra", static_cast<double>(after.swap_ra));
  out.Add("swap_ra_hit", static_cast<double>(after.swap_ra_hit));
  return Status::Ok();
}

std::string Pc(std::int64_t pc) { return "page_cluster " + std::to_string(pc); }

// Section 1: the variants, their table and their chart.
Status Readahead(const Flags& f, const corpus::PageSet& corpus,
                 Report& report) {
  std::vector<Variant> variants;
  for (std::int64_t pc : {std::int64_t{0}, f.page_cluster}) {
    variants.push_back({Pc(pc), [&, pc](std::size_t, Samples& s) {
                          return SequentialRead(f.size_bytes, f.codec,
                                                static_cast<unsigned>(pc),
                                                corpus, s);
                        }});
  }
  Progress progress;
  const auto runs = static_cast<std::size_t>(f.common.runs);
  auto m = RunVariants({.runs = runs, .warmups = 0, .label = "readahead"},
                       variants, progress);
  if (!m) return m.error();
  const std::vector<double> ratio =
      m->Ratios(Pc(f.page_cluster), "pages_s", Pc(0), "pages_s");
  Table& t = report.AddTable(
      "readahead",
      "readahead: sequential read of a paged-out region (as in the zswap "
      "decompress batching series)");
  Chart c{.name = "readahead",
          .title = "Sequential read of a paged-out " + FormatMiB(f.size_bytes) +
                   " region (" + f.codec + "): without and with readahead (" +
                   MedianOfRuns(runs) + ")",
          .x_label = "readahead window",
          .y_label = "read throughput (MB/s)",
          .style = PlotStyle::kBars};
  PlotSeries& bars = c.series.emplace_back(PlotSeries{.title = "MB/s"});
  for (std::int64_t pc : {std::int64_t{0}, f.page_cluster}) {
    const std::string v = Pc(pc);
    Row& row = t.AddRow()
                   .Text("variant", v)
                   .Figure("pages/s", m->Of(v, "pages_s"), 0)
                   .Figure("MB/s", m->Of(v, "mb_s"), 1, kRange | kCv);
    for (const char* k : {"stored", "faults", "swap_ra", "swap_ra_hit"}) {
      row.Int(k, static_cast<std::int64_t>(m->At(v, k, runs).value_or(0)));
    }
    if (pc > 0) row.Figure("ratio pages/s", ratio, 2);
    c.x_tics.push_back(
        {double(c.x_tics.size()), v + " (" + std::to_string(1 << pc) +
                                      (pc == 0 ? " page)" : " pages)")});
    bars.points.push_back(SpreadPoint(c.x_tics.back().first, m->Of(v, "mb_s")));
  }
  report.Line(
      "  (stored: pages in the pool after Pageout; faults, swap_ra, "
      "swap_ra_hit: during the read, last run of each variant; the region "
      "counts a read-ahead hit on the page's first write, and this pass "
      "only reads)");
  const SampleStats r = Summarize(ratio);
  report.Line(Pc(f.page_cluster) +
              " / page_cluster 0: " + FormatDouble(r.median, 2) +
              "x (pages/s; median of per-run ratios, " +
              FormatDouble(r.min, 2) + "-" + FormatDouble(r.max, 2) + ")\n");
  report.AddChart(std::move(c));
  return Status::Ok();
}

// A row of the fault-in latency table: the percentiles of `ns` in us.
Row& LatencyRow(Table& t, const char* name, std::vector<std::uint32_t> ns) {
  Row& row = t.AddRow().Text("touches", name).Int("n", std::ssize(ns));
  if (ns.empty()) return row;
  for (auto [q, column] : kLevels) {
    row.Number(column, Percentile(ns, q) / 1000.0, q < 1 ? 2 : 1);
  }
  return row;
}

// The three phases of section 2 (stored, first touch, bare), each
// checked. Errors: Region::Create's, Pageout's, userfaultfd's, kIoError
// when the bare handler failed, kCorruption when a page read back wrong.
Result<std::array<TouchSeries, 3>> FaultTouches(std::size_t pages,
                                                const std::string& codec,
                                                const corpus::PageSet& corpus) {
  std::vector<std::size_t> order(pages);
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::shuffle(order.begin(), order.end(), std::mt19937(kSeed));
  std::array<TouchSeries, 3> s;
  for (bool stored : {true, false}) {
    TouchSeries& t = s[stored ? 0 : 1];
    ZT_ASSIGN_OR_RETURN(std::unique_ptr<Region> r,
                        MakeRegion({.size = pages * kPageSize, .codec = codec},
                                   stored, corpus));
    const RegionStats before = r->Stats();
    std::uint64_t sink = 0;
    TimedTouches(r->data(), order, &t, &sink);
    t.faults = r->Stats().faults - before.faults;
    t.zswpin = r->Stats().zswpin - before.zswpin;
    // A fresh region reads 0 (so does the XOR of what the touches read).
    ZT_RETURN_IF_ERROR(
        stored ? Check(0, pages, "stored pages", r->data(), &corpus)
               : Check(sink != 0, pages, "first-touch pages", r->data()));
  }
  ZT_RETURN_IF_ERROR(BareCopyFaults(order, corpus, &s[2]));
  return s;
}

// Section 2: the fault-in latency table and chart.
Status FaultLatency(const Flags& f, const corpus::PageSet& corpus,
                    Report& report) {
  Progress progress;
  progress.Update("fault-in latency");
  auto s =
      FaultTouches(static_cast<std::size_t>(f.fault_pages), f.codec, corpus);
  progress.Clear();
  if (!s) return s.error();
  auto& [st, ft, bare] = *s;
  Table& t = report.AddTable(
      "fault_latency", "fault-in latency: " + std::to_string(f.fault_pages) +
                           " pages, " + f.codec +
                           ", page_cluster 0, random order (microseconds)");
  Row& stored = LatencyRow(t, "stored, faulted", st.fault_ns)
                    .Int("faults", st.faults)
                    .Int("zswpin", st.zswpin);
  if (!st.fault_ns.empty() && !bare.fault_ns.empty() &&
      Percentile(bare.fault_ns, 0.5) > 0) {
    stored.Number(
        "p50 / bare",
        double(Percentile(st.fault_ns, 0.5)) / Percentile(bare.fault_ns, 0.5),
        2);
  }
  if (!st.hit_ns.empty()) {
    LatencyRow(t, "stored, mapped (refused by Pageout)", st.hit_ns);
  }
  LatencyRow(t, "first touch, faulted", ft.fault_ns)
      .Int("faults", ft.faults)
      .Number("pages per fault",
              ft.faults ? double(f.fault_pages) / double(ft.faults) : 0, 1);
  std::vector<std::uint32_t> all = ft.fault_ns;
  all.insert(all.end(), ft.hit_ns.begin(), ft.hit_ns.end());
  LatencyRow(t, "first touch, all", all);
  LatencyRow(t, "bare UFFDIO_COPY, faulted (measured now)", bare.fault_ns);
  report.Line(
      "  bare: the same touches on plain anonymous memory whose handler "
      "thread only answers each fault with one 4 KiB UFFDIO_COPY; p50 / "
      "bare: the stored fault-in's p50 over the bare fault's");
  report.Line(std::string(kBareFaultLine) + "\n");
  report.Condition("reference", kBareFaultLine);
  Chart c{.name = "fault-latency",
          .title = "Fault-in latency of one 4 KiB page (" + f.codec + ", " +
                   std::to_string(f.fault_pages) +
                   " pages in random order, one run)",
          .x_label = "percentile of the faulting touches",
          .y_label = "latency (microseconds, log scale)",
          .log_y = true,
          .x_tics = {{0, "p50"}, {1, "p90"}, {2, "p99"}, {3, "max"}}};
  for (auto [title, ns] :
       {std::pair{"stored page (decompressed)", st.fault_ns},
        {"first touch (zeroed run)", ft.fault_ns},
        {"bare UFFDIO_COPY (plain memory)", bare.fault_ns}}) {
    PlotSeries& line = c.series.emplace_back(PlotSeries{.title = title});
    for (std::size_t x = 0; x < 4 && !ns.empty(); ++x) {
      // A log axis has no 0; no fault is that short.
      const double us = Percentile(ns, kLevels[x].first) / 1000.0;
      line.points.push_back({double(x), std::max(us, 0.001)});
    }
  }
  report.AddChart(std::move(c));
  return Status::Ok();
}

}  // namespace

int RunBenchReadahead(std::span<const std::string_view> args) {
  Flags f;
  if (auto rc = ParseFlags(args, &f)) return *rc;
  auto corpus = LoadCorpus(f.corpus);
  if (!corpus) return ReportFailure(kCommand, corpus.error().message());
  Report report(kCommand, GetMachineInfo());
  const std::string config = "corpus=" + f.corpus + " (" + corpus->name() +
                             ", " + std::to_string(corpus->size()) +
                             " pages, repeated to fill) codec=" + f.codec +
                             " size=" + std::to_string(f.size_bytes) +
                             " page_cluster=" + std::to_string(f.page_cluster) +
                             " runs=" + std::to_string(f.common.runs) +
                             " fault_pages=" + std::to_string(f.fault_pages) +
                             " seed=" + std::to_string(kSeed);
  report.Condition("config", config);
  report.Line("config: " + config +
              "\n  readahead: no budget; fill, Pageout all (untimed), then "
              "timed: read in order, one 8-byte load + memcmp per page\n"
              "  fault-in latency: page_cluster 0, one read per page in "
              "random order (mt19937), each touch timed with steady_clock; "
              "stored (after Pageout), first touch (a fresh region) and bare "
              "(a handler that only copies)\n");
  Status s = Status::Ok();
  if (f.common.runs > 0) s = Readahead(f, *corpus, report);
  if (s.ok() && f.fault_pages > 0) s = FaultLatency(f, *corpus, report);
  if (!s.ok()) return ReportFailure(kCommand, "FATAL: " + s.message());
  return report.Finish(kCommand, f.common);
}

}  // namespace ztier::tool
