// fault_handler.cc: the Region's handler thread. It waits on the
// userfaultfd and the stop eventfd, reads fault messages in batches, and
// under the region mutex resolves each one, then runs the reclaimer.
//
// A missing fault at page p, by p's state:
//   untouched  UFFDIO_COPY of zeroed pages over the run of untouched pages
//              around p in its aligned 64-page window (one ioctl for a
//              sequential first touch of 256 KiB). Not UFFDIO_ZEROPAGE:
//              the first write to the shared zero page is a copy-on-write
//              whose TLB flush interrupts every CPU of the process.
//   stored     load p (and, with page_cluster, the stored pages of its
//              aligned 2^page_cluster window that are not written back:
//              one LoadBatch per run) into the staging buffer, then
//              UFFDIO_COPY: p first and writable, then the read-ahead pages
//              (write-protected with count_ra_hits, so that their first
//              write is seen)
//              (swap_ra_hit). Each slot installed is discarded: loads are
//              exclusive, as zswap's. State and counters are updated before
//              the copies: a woken faulter may read Stats() at once.
//   resident   another fault on p was resolved first, or the application
//              dropped the page (MADV_DONTNEED): UFFDIO_ZEROPAGE on p maps
//              zeros in the second case and answers EEXIST (wake) in the
//              first, so both are right.
//   poisoned   poison again (EEXIST: wake; the retry raises SIGBUS).
// A write-protect fault at page p: p was being evicted (the writer waited
// for the mutex): stored now, wake it and it faults p back in; refused and
// resident, or a read-ahead page written for the first time: un-protect,
// which wakes it.
// Out of memory (std::bad_alloc) in a fault's handling or in the reclaimer
// does not end the thread: the fault is answered by a wake (the faulter
// faults again), the reclaim pass is skipped.
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <string_view>
#include <thread>

#include "platform/clock.h"
#include "platform/cpu_relax.h"
#include "region_impl.h"

namespace ztier {

using internal::PageMap;
using internal::PageState;

void Region::Impl::HandlerLoop() {
  constexpr std::size_t kMaxMsgs = 64;
  uffd_msg msgs[kMaxMsgs];
  pollfd fds[2] = {{uffd->poll_fd(), POLLIN, 0}, {stop.fd(), POLLIN, 0}};
  for (;;) {
    // Spin a little on the (non-blocking) userfaultfd before sleeping: on a
    // VM, waking a sleeping handler on another CPU costs tens of
    // microseconds, more than resolving a fault. A busy region finds the
    // next fault within the spin; an idle one sleeps after it.
    const std::size_t got = SpinRead(msgs, kMaxMsgs);
    if (got > 0) {
      Handle(msgs, got);
      continue;
    }
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      if (errno == ENOMEM) {  // the kernel's poll table: try again soon
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
        continue;
      }
      Abandon("poll: " + std::string(std::strerror(errno)));
    }
    if (fds[1].revents != 0) return;  // the destructor asks us to stop
    if (fds[0].revents & (POLLERR | POLLHUP | POLLNVAL)) {
      Abandon("userfaultfd poll error " + std::to_string(fds[0].revents));
    }
    const Result<std::size_t> n_read = uffd->ReadEvents(msgs, kMaxMsgs);
    if (!n_read.has_value()) Abandon(n_read.error().ToString());
    if (*n_read > 0) Handle(msgs, *n_read);
  }
}

void Region::Impl::Abandon(const std::string& why) {
  // No other thread can resolve the region's faults: stopping would leave
  // every thread that touches a stored or untouched page asleep for good,
  // with no error anywhere. As for a failed load without UFFDIO_POISON,
  // there is no honest answer but to end the process, saying why.
  std::fprintf(stderr,
               "ztier region: %s; the region's faults cannot be answered "
               "any more: aborting\n",
               why.c_str());
  std::abort();
}

std::size_t Region::Impl::SpinRead(uffd_msg* msgs, std::size_t max) {
  const auto until = platform::MonotonicClock::now() + kHandlerSpin;
  do {
    const Result<std::size_t> got = uffd->ReadEvents(msgs, max);
    if (got.has_value() && *got > 0) return *got;
    if (stop_requested.load(std::memory_order_relaxed)) return 0;
    platform::CpuRelax();
  } while (platform::MonotonicClock::now() < until);
  return 0;
}

void Region::Impl::Handle(const uffd_msg* msgs, std::size_t n) {
  std::lock_guard<std::mutex> lock(mu);
  for (std::size_t i = 0; i < n; ++i) {
    try {
      HandleFault(msgs[i]);
    } catch (const std::bad_alloc&) {
      // What allocates here changes nothing first (a load's error
      // message; a copy's goes through CopyPages, which does not throw):
      // the faulter is woken to fault again, and served then.
      LogOutOfMemory("fault handler");
      const std::uintptr_t addr =
          msgs[i].arg.pagefault.address & ~std::uintptr_t{kPageSize - 1};
      // In a handler: its own failure must not throw either.
      Status w =
          NoThrow("UFFDIO_WAKE", [&] { return uffd->Wake(addr, kPageSize); });
      w.IgnoreError();
    }
  }
  try {
    Reclaim();
  } catch (const std::bad_alloc&) {
    // Its victim list (or the shrinker's) could not be had: the pass is
    // skipped, and the next batch's tries again. Ending the handler would
    // leave every fault of the region unanswered.
    LogOutOfMemory("reclaimer");
  }
}

void Region::Impl::HandleFault(const uffd_msg& msg) {
  if (msg.event != UFFD_EVENT_PAGEFAULT) return;  // none other is asked for
  const std::uintptr_t addr =
      msg.arg.pagefault.address & ~std::uintptr_t{kPageSize - 1};
  if (addr < Addr(0) || addr >= Addr(num_pages)) {
    Status st = uffd->Wake(addr, kPageSize);  // not ours; cannot happen
    st.IgnoreError();
    return;
  }
  const std::size_t p = (addr - Addr(0)) / kPageSize;
  if (msg.arg.pagefault.flags & UFFD_PAGEFAULT_FLAG_WP) {
    HandleWriteProtect(p);
  } else {
    HandleMissing(p);
  }
}

void Region::Impl::HandleMissing(std::size_t p) {
  Bump(c.faults);
  switch (pages.state(p)) {
    case PageState::kUntouched:
      MapZeros(p);
      return;
    case PageState::kStored:
      FaultIn(p);
      return;
    case PageState::kResident: {
      std::size_t done = 0;
      Status st = uffd->ZeroPage(Addr(p), kPageSize, &done);
      if (!st.ok()) ResolveFailed(Addr(p), kPageSize, st);
      return;
    }
    case PageState::kPoisoned: {
      Status st = uffd->Poison(Addr(p), kPageSize);
      if (!st.ok()) ResolveFailed(Addr(p), kPageSize, st);
      return;
    }
  }
}

void Region::Impl::MapZeros(std::size_t p) {
  const std::size_t w0 = p & ~(kZeroWindow - 1);
  const std::size_t w1 = std::min(w0 + kZeroWindow, num_pages);
  std::size_t lo = p;
  std::size_t hi = p + 1;
  while (lo > w0 && pages.is(lo - 1, PageState::kUntouched)) --lo;
  while (hi < w1 && pages.is(hi, PageState::kUntouched)) ++hi;
  // Zeroed pages, not the shared zero page: the first write to a zero-page
  // mapping is a copy-on-write that flushes the TLB of every CPU running
  // this process (an IPI each, costly on a VM), and untouched memory is
  // nearly always about to be written. map(a, b) maps [a, b), counted
  // first (the ioctl wakes the faulter); the pages it did not reach stay
  // untouched. It returns how many it mapped.
  Status st;
  const auto map = [&](std::size_t a, std::size_t b) {
    for (std::size_t i = a; i < b; ++i) {
      pages.set_state(i, PageState::kResident);
      pages.set(i, PageMap::kRef);
    }
    Bump(c.resident, b - a);
    std::size_t done = 0;
    st = CopyPages(Addr(a), zeros.get(), (b - a) * kPageSize, /*wp=*/false,
                   &done);
    if (st.ok()) return b - a;
    const std::size_t n = done / kPageSize;
    for (std::size_t i = a + n; i < b; ++i) {
      pages.set_state(i, PageState::kUntouched);
      pages.clear(i, PageMap::kRef);
    }
    Drop(c.resident, b - a - n);
    return n;
  };
  const std::size_t n = map(lo, hi);
  if (st.ok()) return;
  // One UFFDIO_COPY cannot span two mappings (ENOENT), and the window may
  // cross where mlock, mprotect or madvise split the region: were p not
  // reached, every retry of its faulter would fail the same way. So p is
  // mapped alone (within one mapping) before the failure counts.
  if (lo + n <= p && hi - lo > 1) {
    map(p, p + 1);
    if (st.ok()) return;
  }
  // The faulter retries, and if p was not reached it faults again.
  LogError(st);
  Status w = uffd->Wake(Addr(p), kPageSize);
  w.IgnoreError();
}

void Region::Impl::FaultIn(std::size_t p) {
  std::size_t w0 = p;
  std::size_t w1 = p + 1;
  if (options.page_cluster > 0) {
    const std::size_t w = std::size_t{1} << options.page_cluster;
    w0 = p & ~(w - 1);
    w1 = std::min(w0 + w, num_pages);
  }
  bool ok[kMaxWindow] = {};
  Status st[kMaxWindow];
  for (std::size_t i = w0; i < w1; ++i) {
    ok[i - w0] = i == p || (pages.is(i, PageState::kStored) &&
                            !pages.test(i, PageMap::kWrittenBack));
  }
  // Load each run of wanted pages: one LoadBatch (a batched decompress).
  for (std::size_t a = w0; a < w1;) {
    if (!ok[a - w0]) {
      ++a;
      continue;
    }
    std::size_t b = a + 1;
    while (b < w1 && ok[b - w0]) ++b;
    std::byte* out = staging.get() + (a - w0) * kPageSize;
    if (b - a == 1) {
      st[a - w0] = store->Load(a, MutablePage(out, kPageSize));
    } else {
      Status first =
          store->LoadBatch(a, std::span<std::byte>(out, (b - a) * kPageSize),
                           std::span<Status>(st + (a - w0), b - a));
      first.IgnoreError();  // per page in st
    }
    a = b;
  }
  for (std::size_t i = w0; i < w1; ++i) {
    ok[i - w0] = ok[i - w0] && st[i - w0].ok();
  }
  // A load of p refused for want of memory (a decompressor or a read
  // buffer that could not be had) may work a moment later: it is tried
  // again, 1 to 16 ms apart.
  const auto short_of_memory = [&] {
    return !ok[p - w0] &&
           (st[p - w0].code() == StatusCode::kResourceExhausted ||
            st[p - w0].code() == StatusCode::kBusy);
  };
  for (int ms = 1; short_of_memory() && ms <= 16; ms *= 2) {
    std::this_thread::sleep_for(std::chrono::milliseconds(ms));
    st[p - w0] = store->Load(
        p, MutablePage(staging.get() + (p - w0) * kPageSize, kPageSize));
    ok[p - w0] = st[p - w0].ok();
  }
  // Still refused for want of memory: the slot is intact, and running out
  // of memory must lose nothing (region.h). p stays stored and its faulter
  // is woken (after the read-ahead installs below) to fault again.
  const bool retry_p = short_of_memory();
  if (!ok[p - w0] && !retry_p) LoadFailed(p, st[p - w0]);
  // Install: p first and writable, then each run of read-ahead pages
  // write-protected. The bookkeeping for all of them comes first: p's copy
  // wakes the faulter, who may look at Stats() at once.
  bool wb[kMaxWindow];
  for (std::size_t i = w0; i < w1; ++i) {
    if (!ok[i - w0]) continue;
    wb[i - w0] = pages.test(i, PageMap::kWrittenBack);
    MarkLoaded(i, i != p, wb[i - w0], +1);
  }
  auto install = [&](std::size_t a, std::size_t b) {
    const bool read_ahead = a != p;
    std::size_t done = 0;
    Status cs = CopyPages(Addr(a), staging.get() + (a - w0) * kPageSize,
                          (b - a) * kPageSize,
                          read_ahead && options.count_ra_hits, &done);
    const std::size_t end = a + done / kPageSize;
    for (std::size_t i = a; i < end; ++i) {
      // Exclusive loads. (A reclaim that Discard starts may run out of
      // memory after the slot is freed: the install goes on.)
      Status d = NoThrow("discard", [&] { return store->Discard(i); });
      d.IgnoreError();               // only kOutOfRange, and i is in range
    }
    if (cs.ok()) return;
    // The rest stay stored; the faulter retries (and faults again).
    LogError(cs);
    for (std::size_t i = end; i < b; ++i) {
      MarkLoaded(i, read_ahead, wb[i - w0], -1);
    }
    if (!read_ahead) {
      Status w = uffd->Wake(Addr(p), kPageSize);
      w.IgnoreError();
    }
  };
  if (ok[p - w0]) install(p, p + 1);
  for (std::size_t a = w0; a < w1;) {
    if (!ok[a - w0] || a == p) {
      ++a;
      continue;
    }
    std::size_t b = a + 1;
    while (b < w1 && ok[b - w0] && b != p) ++b;
    install(a, b);
    a = b;
  }
  if (retry_p) {
    LogError(st[p - w0]);
    Status w = uffd->Wake(Addr(p), kPageSize);
    w.IgnoreError();
  }
}

void Region::Impl::MarkLoaded(std::size_t p, bool read_ahead, bool wb,
                              int sign) {
  if (sign < 0) {
    pages.set_state(p, PageState::kStored);
    pages.clear(p, PageMap::kRef | PageMap::kReadAhead | PageMap::kRefused);
    if (wb) pages.set(p, PageMap::kWrittenBack);
  } else {
    pages.set_state(p, PageState::kResident);
    pages.clear(p, PageMap::kWrittenBack | PageMap::kRef | PageMap::kReadAhead |
                       PageMap::kRefused);
    pages.set(p, read_ahead ? PageMap::kReadAhead : PageMap::kRef);
  }
  auto up = [sign](std::atomic<std::uint64_t>& counter) {
    sign > 0 ? Bump(counter) : Drop(counter);
  };
  auto down = [sign](std::atomic<std::uint64_t>& counter) {
    sign > 0 ? Drop(counter) : Bump(counter);
  };
  if (wb) {
    down(c.written_back);  // the kernel's pswpin, not zswpin
  } else {
    down(c.stored);
    up(c.zswpin);
  }
  // A read-ahead page starts cold (no reference bit): the CLOCK may take
  // it back first unless it is written.
  if (read_ahead) up(c.swap_ra);
  up(c.resident);
}

void Region::Impl::LoadFailed(std::size_t p, const Status& st) {
  if (!logged_load_error) {
    logged_load_error = true;
    const std::string_view code = StatusCodeName(st.code());
    std::fprintf(stderr,
                 "ztier region: page %zu (%p) could not be loaded: %.*s: %s; "
                 "it is poisoned, a touch raises SIGBUS\n",
                 p, static_cast<void*>(base + p * kPageSize),
                 static_cast<int>(code.size()), code.data(),
                 st.message().c_str());
  }
  if (!uffd->can_poison()) {
    // Zeros or stale bytes would be silent corruption; SIGBUS is what the
    // kernel does, and without UFFDIO_POISON we cannot deliver it.
    std::fprintf(stderr,
                 "ztier region: page %zu lost and UFFDIO_POISON unavailable "
                 "(Linux < 6.6): aborting\n",
                 p);
    std::abort();
  }
  Status ps = uffd->Poison(Addr(p), kPageSize);
  if (!ps.ok()) ResolveFailed(Addr(p), kPageSize, ps);
  ForgetStored(p);  // its slot cannot be read
  pages.set_state(p, PageState::kPoisoned);
  pages.clear(p, PageMap::kRef | PageMap::kReadAhead | PageMap::kRefused);
}

void Region::Impl::HandleWriteProtect(std::size_t p) {
  if (!pages.is(p, PageState::kResident)) {
    // Evicted while the writer waited (or nothing mapped): its retry takes
    // a missing fault and brings the page back.
    if (pages.is(p, PageState::kStored)) Bump(c.wp_faults);
    Status st = uffd->Wake(Addr(p), kPageSize);
    st.IgnoreError();
    return;
  }
  if (options.count_ra_hits && pages.test(p, PageMap::kReadAhead)) {
    pages.clear(p, PageMap::kReadAhead);
    pages.set(p, PageMap::kRef);
    Bump(c.swap_ra_hit);
  } else {
    Bump(c.wp_faults);  // the eviction refused it, and already un-protected
  }
  Status st = uffd->WriteProtect(Addr(p), kPageSize, /*wp=*/false);
  if (!st.ok()) ResolveFailed(Addr(p), kPageSize, st);
}

Status Region::Impl::CopyPages(std::uintptr_t dst, const std::byte* src,
                               std::size_t len, bool wp,
                               std::size_t* done) noexcept {
  // *done is set before any message is made (FillLoop).
  return NoThrow("UFFDIO_COPY", [&] { return uffd->Copy(dst, src, len, wp, done); });
}

void Region::Impl::ResolveFailed(std::uintptr_t addr, std::size_t len,
                                 const Status& st) {
  LogError(st);
  Status woken = NoThrow("UFFDIO_WAKE", [&] { return uffd->Wake(addr, len); });
  woken.IgnoreError();  // nothing more to try
}

}  // namespace ztier
