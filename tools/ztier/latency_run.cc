// latency_run.cc: one run of the latency experiment (see latency_run.h).
#include "latency_run.h"

#include <sched.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <latch>
#include <thread>

#include "bench_stats.h"
#include "shared_stream.h"

namespace ztier::tool {
namespace {

using Clock = std::chrono::steady_clock;

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

std::uint64_t ThreadCpuNs() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1'000'000'000 +
         static_cast<std::uint64_t>(ts.tv_nsec);
}

std::uint32_t NanosSince(Clock::time_point t0) {
  const auto ns = std::chrono::nanoseconds(Clock::now() - t0).count();
  return ns > UINT32_MAX ? UINT32_MAX : static_cast<std::uint32_t>(ns);
}

// The store of a run: per CPU 4 buffers (2 workers', the reader's and the
// storer's) and one stream, as zram/zswap have.
Result<std::unique_ptr<PageStore>> CreateStore(const LatencyConfig& config,
                                               const corpus::PageSet& pages) {
  const long online = sysconf(_SC_NPROCESSORS_ONLN);
  if (config.cpus == 0 || static_cast<long>(config.cpus) > online) {
    return Err(Status::InvalidArgument(
        "--cpus must be 1.." + std::to_string(online) + " (online CPUs)"));
  }
  if (pages.size() < config.buffer_pages) {
    return Err(Status::InvalidArgument("corpus has fewer pages than a buffer"));
  }
  return PageStore::Create({.num_pages = config.cpus * 4 * config.buffer_pages,
                            .codec = config.codec,
                            .streams = config.cpus});
}

// "SERIES timed", "SERIES over 10 ms" and "SERIES LEVEL" of the timings of
// every CPU.
void AddSeries(const std::string& series,
               const std::vector<std::vector<std::uint32_t>>& per_cpu,
               Samples& out) {
  std::vector<std::uint32_t> ns;
  for (const auto& v : per_cpu) ns.insert(ns.end(), v.begin(), v.end());
  out.Add(series + " timed", static_cast<double>(ns.size()));
  out.Add(series + " over 10 ms",
          std::count_if(ns.begin(), ns.end(),
                        [](std::uint32_t x) { return x > 10'000'000; }));
  for (auto [q, level] : kLatencyLevels) {
    if (!ns.empty()) out.Add(series + " " + level, Percentile(ns, q) / 1000.0);
  }
}

}  // namespace

Status RunLatencyOnce(const LatencyConfig& config, const corpus::PageSet& pages,
                      Samples& out) {
  ZT_ASSIGN_OR_RETURN(std::unique_ptr<PageStore> engine,
                      CreateStore(config, pages));
  const std::size_t bp = config.buffer_pages;
  SharedStreamStore store(*engine, config.shared, config.cpus);

  std::atomic<bool> stop{false}, failed{false}, priorities{true};
  std::atomic<std::uint64_t> worker_ops{0}, worker_cpu_ns{0}, mismatches{0};
  std::latch start(1);
  std::vector<std::vector<std::uint32_t>> read_ns(config.cpus),
      store_ns(config.cpus);
  auto page = [&](std::size_t i) { return pages.page(i % pages.size()); };
  // Stores corpus page `data` into `slot` (get: loads and checks it); with
  // `lat`, times the Store (Load) alone into it.
  using Lat = std::vector<std::uint32_t>;
  auto put = [&](std::size_t slot, std::size_t data, Lat* lat = nullptr) {
    const auto t0 = lat ? Clock::now() : Clock::time_point{};
    if (!store.Store(slot, page(data)).ok()) failed = true;
    if (lat) lat->push_back(NanosSince(t0));
  };
  auto get = [&](std::size_t slot, std::size_t data, Lat* lat = nullptr) {
    alignas(64) std::byte got[kPageSize];
    const auto t0 = lat ? Clock::now() : Clock::time_point{};
    if (!store.Load(slot, MutablePage(got, kPageSize)).ok()) failed = true;
    if (lat) lat->push_back(NanosSince(t0));
    if (std::memcmp(page(data).data(), got, kPageSize) != 0) ++mismatches;
  };
  auto set_up = [&](std::size_t cpu, int nice) {
    if (!PinAndNice(cpu, nice)) priorities = false;
  };
  // The reader (`load`) or the storer of buffer `first`: an untimed round,
  // then timed rounds on the fixed schedule.
  auto timed = [&](std::size_t cpu, bool load, std::size_t first) {
    set_up(cpu, -19);
    for (std::size_t p = 0; p < bp; ++p) {
      put(first + p, p);
      if (load) get(first + p, p);
    }
    start.wait();
    Lat& lat = (load ? read_ns : store_ns)[cpu];
    lat.reserve(1 << 20);
    const std::chrono::microseconds period(config.round_period_us);
    auto next = Clock::now();
    for (std::size_t iter = 1; !stop.load(std::memory_order_relaxed); ++iter) {
      for (std::size_t p = 0; p < bp; ++p) {
        load ? get(first + p, p, &lat) : put(first + p, iter + p, &lat);
      }
      next += period;
      if (next < Clock::now()) next = Clock::now() + period;
      std::this_thread::sleep_until(next);
    }
  };
  std::vector<std::thread> threads;
  for (std::size_t cpu = 0; cpu < config.cpus; ++cpu) {
    const std::size_t base = cpu * 4 * bp;
    for (std::size_t w = 0; w < 2; ++w) {
      threads.emplace_back([&, cpu, w, first = base + w * bp] {
        set_up(cpu, 10);
        start.wait();
        std::uint64_t ops = 0;
        for (std::size_t iter = 0; !stop.load(std::memory_order_relaxed);
             ++iter, ops += 2 * bp) {
          // Rotate through the corpus so that the work is not one page's.
          const std::size_t data = (cpu * 7 + w * 3 + iter) * bp;
          for (std::size_t p = 0; p < bp; ++p) put(first + p, data + p);
          for (std::size_t p = 0; p < bp; ++p) get(first + p, data + p);
        }
        worker_ops += ops;
        worker_cpu_ns += ThreadCpuNs();
      });
    }
    threads.emplace_back([&, cpu] {
      set_up(cpu, 0);
      start.wait();
      volatile std::uint64_t spin = 0;
      while (!stop.load(std::memory_order_relaxed)) spin = spin + 1;
    });
    threads.emplace_back(timed, cpu, true, base + 2 * bp);
    threads.emplace_back(timed, cpu, false, base + 3 * bp);
  }
  const auto t0 = Clock::now();
  start.count_down();
  std::this_thread::sleep_for(std::chrono::duration<double>(config.seconds));
  stop = true;
  for (auto& t : threads) t.join();
  const double seconds =
      std::chrono::duration<double>(Clock::now() - t0).count();
  if (failed) return Status::IoError("a store or load failed");
  if (mismatches > 0) {
    return Status::Corruption(std::to_string(mismatches.load()) +
                              " loads returned wrong data");
  }
  AddSeries("reads", read_ns, out);
  AddSeries("stores", store_ns, out);
  const auto ops = static_cast<double>(worker_ops.load());
  out.Add("ops_s", ops / seconds);
  out.Add("ops_cpu_s",
          worker_cpu_ns > 0 ? ops * 1e9 / worker_cpu_ns.load() : 0);
  out.Add("priorities", priorities ? 1 : 0);
  return Status::Ok();
}

}  // namespace ztier::tool
