// File: tools/ztier/bench_readahead_run.cc
//
// The sequential-read and fault-latency measurements of `ztier bench
// readahead` (bench_readahead_run.h).
#include "bench_readahead_run.h"

#include <poll.h>
#include <sys/mman.h>  // mincore
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cassert>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <numeric>
#include <random>
#include <thread>

#include "platform/event_fd.h"
#include "platform/mapping.h"
#include "platform/userfaultfd.h"  // internal: the bare baseline uses it
#include "ztier/page.h"

namespace ztier::tool {
namespace {

using Clock = std::chrono::steady_clock;

// One 8-byte load the compiler must do (volatile: kept even when unused).
std::uint64_t Touch(const std::byte* p) {
  return *reinterpret_cast<const volatile std::uint64_t*>(p);
}

// Copies corpus page i % corpus.size() into page i of the region.
void Fill(Region& region, const corpus::PageSet& corpus) {
  const std::size_t pages = region.size() / kPageSize;
  for (std::size_t i = 0; i < pages; ++i) {
    std::memcpy(region.data() + i * kPageSize,
                corpus.page(i % corpus.size()).data(), kPageSize);
  }
}

std::uint64_t CountMismatches(const Region& region,
                              const corpus::PageSet& corpus) {
  const std::size_t pages = region.size() / kPageSize;
  std::uint64_t bad = 0;
  for (std::size_t i = 0; i < pages; ++i) {
    if (std::memcmp(region.data() + i * kPageSize,
                    corpus.page(i % corpus.size()).data(), kPageSize) != 0) {
      ++bad;
    }
  }
  return bad;
}

// Whether the page at p is mapped (mincore); a page that mincore cannot
// answer for counts as unmapped.
bool Mapped(const std::byte* p) {
  unsigned char vec = 0;
  if (::mincore(const_cast<std::byte*>(p), kPageSize, &vec) != 0) return false;
  return (vec & 1) != 0;
}

// Touches the pages at `base` in `order`, timing each touch; classifies it
// by mincore() first. Returns the XOR of the values read (so that the loads
// stay) in *sink.
void TimedTouches(const std::byte* base, const std::vector<std::size_t>& order,
                  TouchSeries* out, std::uint64_t* sink) {
  out->fault_ns.reserve(order.size());
  std::uint64_t x = 0;
  for (std::size_t i : order) {
    const std::byte* p = base + i * kPageSize;
    const bool mapped = Mapped(p);
    const Clock::time_point t0 = Clock::now();
    x ^= Touch(p);
    const Clock::time_point t1 = Clock::now();
    const auto ns =
        std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count();
    const auto clamped =
        static_cast<std::uint32_t>(std::min<std::int64_t>(ns, UINT32_MAX));
    (mapped ? out->hit_ns : out->fault_ns).push_back(clamped);
  }
  *sink = x;
}

std::vector<std::size_t> RandomOrder(std::size_t pages, std::uint32_t seed) {
  std::vector<std::size_t> order(pages);
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::mt19937 rng(seed);
  std::shuffle(order.begin(), order.end(), rng);
  return order;
}

// The bare handler of RunBareCopyFaults: answers every missing fault with
// one UFFDIO_COPY of the page's corpus page until `stop_fd` is readable.
// A failed copy is logged once and the page mapped with zeros instead, so
// that the toucher never hangs (the check afterwards then fails).
void BareHandler(internal::Userfaultfd* uffd, int stop_fd, const std::byte* base,
                 const corpus::PageSet* corpus, std::atomic<bool>* failed) {
  constexpr std::size_t kMaxMsgs = 16;
  uffd_msg msgs[kMaxMsgs];
  pollfd fds[2] = {{uffd->poll_fd(), POLLIN, 0}, {stop_fd, POLLIN, 0}};
  for (;;) {
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      failed->store(true);
      return;
    }
    if (fds[1].revents != 0) return;
    const Result<std::size_t> got = uffd->ReadEvents(msgs, kMaxMsgs);
    if (!got.has_value()) {
      failed->store(true);
      return;
    }
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
      Status z = uffd->ZeroPage(addr, kPageSize, &done);
      z.IgnoreError();
    }
  }
}

}  // namespace

Result<SeqReadSample> RunSequentialRead(const SeqReadConfig& config,
                                        const corpus::PageSet& corpus) {
  assert(config.size_bytes % kPageSize == 0 && corpus.size() > 0);
  RegionOptions o;
  o.size = config.size_bytes;
  o.budget = 0;
  o.codec = config.codec;
  o.page_cluster = config.page_cluster;
  o.count_ra_hits = true;  // the report shows swap_ra_hit
  o.max_pool_percent = 100;  // of size: every compressible page is stored
  auto region = Region::Create(o);
  if (!region.has_value()) return Err(region.error());
  Region& r = **region;
  Fill(r, corpus);
  ZT_RETURN_IF_ERROR(r.Pageout(r.data(), r.size()));

  SeqReadSample s;
  s.page_cluster = config.page_cluster;
  s.pages = r.size() / kPageSize;
  s.after_pageout = r.Stats();
  std::uint64_t bad = 0;
  const Clock::time_point t0 = Clock::now();
  for (std::size_t i = 0; i < s.pages; ++i) {
    const std::byte* p = r.data() + i * kPageSize;
    static_cast<void>(Touch(p));  // the fault, as a program's first load
    if (std::memcmp(p, corpus.page(i % corpus.size()).data(), kPageSize) != 0) {
      ++bad;
    }
  }
  const Clock::time_point t1 = Clock::now();
  s.after_read = r.Stats();
  s.mismatches = bad;
  s.seconds = std::chrono::duration<double>(t1 - t0).count();
  if (s.seconds > 0) {
    s.pages_s = static_cast<double>(s.pages) / s.seconds;
    s.mb_s = static_cast<double>(s.pages * kPageSize) / s.seconds / 1e6;
  }
  return s;
}

Result<FaultLatencySample> RunFaultLatency(const FaultLatencyConfig& config,
                                           const corpus::PageSet& corpus) {
  assert(config.pages > 0 && corpus.size() > 0);
  const std::vector<std::size_t> order = RandomOrder(config.pages, config.seed);

  RegionOptions o;
  o.size = config.pages * kPageSize;
  o.budget = 0;
  o.codec = config.codec;
  o.page_cluster = 0;
  o.max_pool_percent = 100;  // of size: every compressible page is stored
  FaultLatencySample s;
  std::uint64_t sink = 0;
  {
    auto region = Region::Create(o);
    if (!region.has_value()) return Err(region.error());
    Region& r = **region;
    Fill(r, corpus);
    ZT_RETURN_IF_ERROR(r.Pageout(r.data(), r.size()));
    s.stored.before = r.Stats();
    TimedTouches(r.data(), order, &s.stored, &sink);
    s.stored.after = r.Stats();
    s.stored.mismatches = CountMismatches(r, corpus);
  }
  {
    auto region = Region::Create(o);
    if (!region.has_value()) return Err(region.error());
    Region& r = **region;
    s.first_touch.before = r.Stats();
    TimedTouches(r.data(), order, &s.first_touch, &sink);
    s.first_touch.after = r.Stats();
    // Every value read was 0: the XOR of them is 0.
    s.first_touch.mismatches = sink != 0 ? 1 : 0;
    for (std::size_t i = 0; i < config.pages; ++i) {
      const std::byte* p = r.data() + i * kPageSize;
      if (std::any_of(p, p + kPageSize,
                      [](std::byte b) { return b != std::byte{0}; })) {
        ++s.first_touch.mismatches;
      }
    }
  }
  auto bare = RunBareCopyFaults(config, corpus);
  if (!bare.has_value()) return Err(bare.error());
  s.bare = std::move(*bare);
  return s;
}

Result<TouchSeries> RunBareCopyFaults(const FaultLatencyConfig& config,
                                      const corpus::PageSet& corpus) {
  assert(config.pages > 0 && corpus.size() > 0);
  const std::size_t len = config.pages * kPageSize;
  ZT_ASSIGN_OR_RETURN(const platform::Mapping map,
                      platform::Mapping::Anonymous(len, platform::Commit::kCharged,
                                                   "mmap bare region"));
  std::byte* const mem = map.data();
  // 4 KiB faults, as the reference.
  platform::Advise(mem, len, platform::Advice::kNoHugePages).IgnoreError();
  const std::byte* base = mem;

  ZT_ASSIGN_OR_RETURN(std::unique_ptr<internal::Userfaultfd> uffd,
                      internal::OpenUserfaultfd());
  ZT_RETURN_IF_ERROR(uffd->Register(mem, len));
  ZT_ASSIGN_OR_RETURN(const platform::EventFd stop, platform::EventFd::Create());
  std::atomic<bool> failed{false};
  std::thread handler(BareHandler, uffd.get(), stop.fd(), base, &corpus, &failed);

  TouchSeries s;
  std::uint64_t sink = 0;
  TimedTouches(base, RandomOrder(config.pages, config.seed), &s, &sink);
  for (std::size_t i = 0; i < config.pages; ++i) {
    if (std::memcmp(base + i * kPageSize, corpus.page(i % corpus.size()).data(),
                    kPageSize) != 0) {
      ++s.mismatches;
    }
  }

  stop.Signal();
  handler.join();
  Status u = uffd->Unregister(mem, len);
  u.IgnoreError();
  if (failed.load()) {
    return Err(Status::IoError("the bare userfaultfd handler failed"));
  }
  return s;
}

}  // namespace ztier::tool
