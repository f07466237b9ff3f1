// latency_run.cc: one run of the latency experiment (see latency_run.h).
#include "latency_run.h"

#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <latch>
#include <thread>

#include "shared_stream.h"
#include "ztier/page_store.h"

namespace ztier::tool {
namespace {

using Clock = std::chrono::steady_clock;

// Pins the calling thread to `cpu` and sets its nice value. Returns false
// if either could not be applied (e.g. negative nice without privilege).
bool PinAndNice(std::size_t cpu, int nice) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  bool ok = sched_setaffinity(0, sizeof(set), &set) == 0;
  const pid_t tid = static_cast<pid_t>(syscall(SYS_gettid));
  ok = setpriority(PRIO_PROCESS, static_cast<id_t>(tid), nice) == 0 && ok;
  return ok;
}

double ThreadCpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + ts.tv_nsec * 1e-9;
}

// Sleeps until the next round of a fixed schedule; a round that started
// late (after a long wait) skips the periods it missed rather than
// hurrying to catch up.
void NextRound(Clock::time_point* next, std::chrono::microseconds period) {
  *next += period;
  const auto now = Clock::now();
  if (*next < now) *next = now + period;
  std::this_thread::sleep_until(*next);
}

std::uint32_t NanosSince(Clock::time_point t0) {
  const auto ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0)
          .count();
  return ns > UINT32_MAX ? UINT32_MAX : static_cast<std::uint32_t>(ns);
}

}  // namespace

Result<LatencyRunResult> RunLatencyOnce(const LatencyConfig& config,
                                        const corpus::PageSet& pages) {
  const long online = sysconf(_SC_NPROCESSORS_ONLN);
  if (config.cpus == 0 || static_cast<long>(config.cpus) > online) {
    return Err(Status::InvalidArgument(
        "--cpus must be 1.." + std::to_string(online) + " (online CPUs)"));
  }
  const std::size_t bp = config.buffer_pages;
  if (pages.size() < bp) {
    return Err(Status::InvalidArgument("corpus has fewer pages than a buffer"));
  }
  // Slots: per CPU, 2 worker buffers, the reader's and the storer's.
  constexpr std::size_t kBuffersPerCpu = 4;
  PageStoreOptions o;
  o.num_pages = config.cpus * kBuffersPerCpu * bp;
  o.codec = config.codec;
  o.streams = config.cpus;  // one per CPU, as zram/zswap have
  ZT_ASSIGN_OR_RETURN(std::unique_ptr<PageStore> engine, PageStore::Create(o));
  // The mode: the engine's stream policy, or the shared baseline around it.
  SharedStreamStore streams(*engine, config.shared, config.cpus);
  SharedStreamStore* store = &streams;

  LatencyRunResult result;
  std::atomic<bool> stop{false};
  std::atomic<std::uint64_t> worker_ops{0};
  std::atomic<std::uint64_t> worker_cpu_ns{0};
  const std::chrono::microseconds period(config.round_period_us);
  std::atomic<std::uint64_t> mismatches{0};
  std::atomic<bool> priorities_ok{true};
  std::atomic<bool> failed{false};
  std::latch start(1);
  std::vector<std::vector<std::uint32_t>> read_ns(config.cpus);
  std::vector<std::vector<std::uint32_t>> store_ns(config.cpus);

  auto page = [&](std::size_t i) { return pages.page(i % pages.size()); };
  auto check = [&](std::size_t want, const std::byte* got) {
    if (std::memcmp(page(want).data(), got, kPageSize) != 0) ++mismatches;
  };
  std::vector<std::thread> threads;
  for (std::size_t cpu = 0; cpu < config.cpus; ++cpu) {
    const std::size_t base = cpu * kBuffersPerCpu * bp;
    for (std::size_t w = 0; w < 2; ++w) {
      threads.emplace_back([&, cpu, w, first = base + w * bp] {
        if (!PinAndNice(cpu, 10)) priorities_ok = false;
        start.wait();
        alignas(64) std::byte out[kPageSize];
        std::uint64_t ops = 0;
        for (std::size_t iter = 0; !stop.load(std::memory_order_relaxed);
             ++iter) {
          // Rotate through the corpus so the work is not one page's.
          const std::size_t data = (cpu * 7 + w * 3 + iter) * bp;
          for (std::size_t p = 0; p < bp; ++p) {
            if (!store->Store(first + p, page(data + p)).ok()) failed = true;
          }
          for (std::size_t p = 0; p < bp; ++p) {
            if (!store->Load(first + p, MutablePage(out, kPageSize)).ok()) {
              failed = true;
            }
            check(data + p, out);
          }
          ops += 2 * bp;
        }
        worker_ops += ops;
        worker_cpu_ns += static_cast<std::uint64_t>(ThreadCpuSeconds() * 1e9);
      });
    }
    threads.emplace_back([&, cpu] {
      if (!PinAndNice(cpu, 0)) priorities_ok = false;
      start.wait();
      volatile std::uint64_t spin = 0;
      while (!stop.load(std::memory_order_relaxed)) spin = spin + 1;
    });
    threads.emplace_back([&, cpu, first = base + 2 * bp] {
      if (!PinAndNice(cpu, -19)) priorities_ok = false;
      alignas(64) std::byte warm[kPageSize];
      for (std::size_t p = 0; p < bp; ++p) {
        if (!store->Store(first + p, page(p)).ok()) failed = true;
        // The first load creates this thread's decompressor: not timed.
        if (!store->Load(first + p, MutablePage(warm, kPageSize)).ok()) {
          failed = true;
        }
      }
      start.wait();
      auto& lat = read_ns[cpu];
      lat.reserve(1 << 20);
      alignas(64) std::byte out[kPageSize];
      auto next = Clock::now();
      while (!stop.load(std::memory_order_relaxed)) {
        for (std::size_t p = 0; p < bp; ++p) {
          const auto t0 = Clock::now();
          if (!store->Load(first + p, MutablePage(out, kPageSize)).ok()) {
            failed = true;
          }
          lat.push_back(NanosSince(t0));
          check(p, out);
        }
        NextRound(&next, period);
      }
    });
    threads.emplace_back([&, cpu, first = base + 3 * bp] {
      if (!PinAndNice(cpu, -19)) priorities_ok = false;
      for (std::size_t p = 0; p < bp; ++p) {  // untimed first round
        if (!store->Store(first + p, page(p)).ok()) failed = true;
      }
      start.wait();
      auto& lat = store_ns[cpu];
      lat.reserve(1 << 20);
      auto next = Clock::now();
      for (std::size_t iter = 0; !stop.load(std::memory_order_relaxed);
           ++iter) {
        for (std::size_t p = 0; p < bp; ++p) {
          const auto t0 = Clock::now();
          if (!store->Store(first + p, page(iter + p)).ok()) failed = true;
          lat.push_back(NanosSince(t0));
        }
        NextRound(&next, period);
      }
    });
  }
  const auto t0 = Clock::now();
  start.count_down();
  std::this_thread::sleep_for(std::chrono::duration<double>(config.seconds));
  stop = true;
  for (auto& t : threads) t.join();
  result.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  if (failed) return Err(Status::IoError("a store or load failed"));
  for (auto& v : read_ns) result.read_ns.insert(result.read_ns.end(), v.begin(), v.end());
  for (auto& v : store_ns) result.store_ns.insert(result.store_ns.end(), v.begin(), v.end());
  result.worker_ops = worker_ops;
  result.worker_cpu_seconds = worker_cpu_ns.load() * 1e-9;
  result.mismatches = mismatches;
  result.priorities_applied = priorities_ok;
  return result;
}

}  // namespace ztier::tool
