// File: tools/ztier/bench_readahead_run.cc
//
// The measurements of `ztier bench readahead` (bench_readahead_run.h).
#include "bench_readahead_run.h"

#include <poll.h>
#include <sys/mman.h>  // mincore

#include <algorithm>
#include <atomic>
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

// One 8-byte load the compiler must do.
std::uint64_t Touch(const std::byte* p) {
  return *reinterpret_cast<const volatile std::uint64_t*>(p);
}

bool Differs(const std::byte* p, std::size_t i, const corpus::PageSet& c) {
  return std::memcmp(p, c.page(i % c.size()).data(), kPageSize) != 0;
}

// kCorruption "BAD of N WHAT read back wrong" unless bad is 0.
Status Check(std::uint64_t bad, std::size_t n, const char* what) {
  if (bad == 0) return Status::Ok();
  return Status::Corruption(std::to_string(bad) + " of " + std::to_string(n) +
                            " " + what + " read back wrong");
}

std::uint64_t CountMismatches(const std::byte* base, std::size_t pages,
                              const corpus::PageSet& corpus) {
  std::uint64_t bad = 0;
  for (std::size_t i = 0; i < pages; ++i) {
    bad += Differs(base + i * kPageSize, i, corpus);
  }
  return bad;
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
        .push_back(
            static_cast<std::uint32_t>(std::min<std::int64_t>(ns, UINT32_MAX)));
  }
}

// The bare handler: answers every missing fault with one UFFDIO_COPY of
// the page's corpus page until `stop_fd` is readable. A failed copy is
// logged once and the page mapped with zeros instead, so that the toucher
// never hangs (the check afterwards then fails).
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
  const std::uint64_t bad = CountMismatches(mem, order.size(), corpus);
  stop.Signal();
  handler.join();
  uffd->Unregister(mem, len).IgnoreError();
  if (failed) return Status::IoError("the bare userfaultfd handler failed");
  return Check(bad, order.size(), "bare pages");
}

}  // namespace

Status RunSequentialRead(std::size_t size_bytes, const std::string& codec,
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

Result<FaultLatencySample> RunFaultLatency(std::size_t pages,
                                           const std::string& codec,
                                           std::uint32_t seed,
                                           const corpus::PageSet& corpus) {
  std::vector<std::size_t> order(pages);
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::mt19937 rng(seed);
  std::shuffle(order.begin(), order.end(), rng);
  FaultLatencySample s;
  std::uint64_t sink = 0;
  for (TouchSeries* t : {&s.stored, &s.first_touch}) {
    const bool stored = t == &s.stored;
    ZT_ASSIGN_OR_RETURN(std::unique_ptr<Region> r,
                        MakeRegion({.size = pages * kPageSize, .codec = codec},
                                   stored, corpus));
    t->before = r->Stats();
    sink = 0;
    TimedTouches(r->data(), order, t, &sink);
    t->after = r->Stats();
    if (stored) {
      ZT_RETURN_IF_ERROR(Check(CountMismatches(r->data(), pages, corpus), pages,
                               "stored pages"));
      continue;
    }
    // Every value read was 0 (their XOR too), and so is every page.
    std::uint64_t bad = sink != 0;
    for (std::size_t i = 0; i < pages; ++i) {
      const std::byte* p = r->data() + i * kPageSize;
      bad += std::any_of(p, p + kPageSize,
                         [](std::byte b) { return b != std::byte{}; });
    }
    ZT_RETURN_IF_ERROR(Check(bad, pages, "first-touch pages"));
  }
  ZT_RETURN_IF_ERROR(BareCopyFaults(order, corpus, &s.bare));
  return s;
}

}  // namespace ztier::tool
