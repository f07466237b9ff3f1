// region.cc: Region (contract in include/ztier/region.h): creation and
// teardown, Pageout and Stats. The fault handler, eviction, the reclaimer
// and the shrinker live in their own files (region_impl.h lists them).
//
// DESIGN NOTE: what userspace can and cannot see.
//   Recency. The kernel's LRU learns about accesses from the accessed bit
//   of every PTE; userspace sees only faults. So the CLOCK's reference bit
//   is set when a page is faulted in (first touch, load) and cleared when
//   the hand passes: a page faulted in recently survives one more turn, and
//   a page that has been resident longest without a fault goes first. A
//   page read every microsecond but never evicted looks as cold as one
//   never read again; that is the price of no kernel help. (WP_ASYNC with
//   PAGEMAP_SCAN could give written-since bits cheaply; reads stay
//   invisible either way.)
//   Read-ahead hits. Read-ahead pages are installed write-protected
//   (UFFDIO_COPY_MODE_WP) with the `ra` bit. The first write to one raises
//   a WP fault: swap_ra_hit counts it, and the page is un-protected. So
//   swap_ra_hit counts read-ahead pages later *written*; a page only read
//   is not seen. The faulting page itself is installed writable.
//   wp_faults counts the other WP faults: writes that hit a page while it
//   was being evicted (those writers block until the eviction is done,
//   then fault the page back in, or carry on if it was refused).
//   Failed loads. A slot that does not decompress, or a written-back block
//   that cannot be read, must not become wrong data. The page gets a
//   poison marker (UFFDIO_POISON, Linux 6.6+): the toucher, and any later
//   one, gets SIGBUS, as the kernel gives a task whose zswap entry fails
//   to decompress. The slot is freed; the first failure is logged to stderr
//   with the page index. Without UFFDIO_POISON there is no honest answer,
//   and the process is aborted with that message.
//   Pool limit. zswap rejects stores while the pool is full and lets an
//   asynchronous worker write back; here the shrinker runs synchronously
//   in the eviction that found the pool full, on the handler thread or the
//   Pageout caller, so a fault waits behind a writeback pass. Without a
//   backing store, evictions are refused until loads bring the pool under
//   the accept threshold (the pool is compacted when that is the only way).
//   Counters. stored_pages counts pages in the pool (SAME pages included),
//   not written-back ones. zswpin counts pages loaded from the pool; a
//   written-back page faulted in is the kernel's pswpin, not zswpin.
//   fork(). The child of a fork would inherit the memory but not the
//   registration: evicted pages would read as zeros there. The mapping is
//   MADV_DONTFORK, so the child has no region at all.
//   Pages the application dropped (MADV_DONTNEED on region memory) while
//   resident read as zeros, as the kernel would give: eviction checks
//   presence in /proc/self/pagemap and forgets such pages, and a missing
//   fault on a page the map thinks resident maps zeros. Eviction reads
//   region memory only through /proc/self/mem (platform/own_memory.h), so
//   a page dropped between the presence check and the read stops the read
//   rather than raising a fault that the evicting side itself would have
//   to answer: no thread of ztier's waits on a fault of region memory.
//   (Without /proc mounted both checks are gone, and eviction trusts the
//   page map and reads in place.)
//   LIMIT: MADV_DONTNEED on a page that is stored or written back is
//   not seen (the kernel has nothing to drop, and UFFD_FEATURE_EVENT_REMOVE
//   is not asked for: with it, the handler's own zaps in step 4 would wait
//   for the handler to read their events), so the next touch brings the
//   stored data back, not zeros. region.h says so to its users.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "platform/signals.h"
#include "region_impl.h"

namespace ztier {
namespace {

// pct (at most 100) percent of v, rounded down, for any v.
std::uint64_t Percent(std::uint64_t v, unsigned pct) {
  return v / 100 * pct + v % 100 * pct / 100;
}

Status CheckOptions(const RegionOptions& o) {
  if (o.size == 0) return Status::InvalidArgument("size must be at least 1");
  if (o.size > (std::size_t{1} << 44)) {
    return Status::InvalidArgument("size must be at most 16 TiB");
  }
  if (o.page_cluster > 5) {
    return Status::InvalidArgument("page_cluster must be 0..5");
  }
  // A first touch maps a window of kZeroWindow pages: a budget below it
  // would evict pages it just mapped, the faulting one among them, and an
  // access that needs two pages could swap them forever.
  constexpr std::size_t kMinBudget = 64 * kPageSize;  // Impl::kZeroWindow
  if (o.budget != 0 && o.budget < kMinBudget) {
    return Status::InvalidArgument(
        "budget must be 0 (no reclaimer) or at least " +
        std::to_string(kMinBudget / 1024) + " KiB");
  }
  if (o.max_pool_percent < 1 || o.max_pool_percent > 100) {
    return Status::InvalidArgument("max_pool_percent must be 1..100");
  }
  if (o.accept_threshold_percent < 1 || o.accept_threshold_percent > 100) {
    return Status::InvalidArgument("accept_threshold_percent must be 1..100");
  }
  if (o.batch_size < 1 || o.batch_size > kMaxBatchSize) {
    return Status::InvalidArgument("batch_size must be 1.." +
                                   std::to_string(kMaxBatchSize));
  }
  return Status::Ok();
}

}  // namespace

Region::Region() : impl_(std::make_unique<Impl>()) {}

Region::~Region() {
  // A fork()ed child's copy: its destructor would stop the parent's
  // handler (through the shared eventfd), unregister the parent's memory
  // (the userfaultfd acts on the mm that made it), and join a thread that
  // is not in this process. It is left as it is, memory and all.
  if (impl_ != nullptr && impl_->owner != 0 && impl_->owner != ::getpid()) {
    (void)impl_.release();
  }
}

Region::Impl::~Impl() {
  if (handler.joinable()) {
    stop_requested.store(true, std::memory_order_relaxed);
    stop.Signal();
    handler.join();
  }
  if (registered) {
    Status st = uffd->Unregister(base, size);
    st.IgnoreError();  // munmap below unregisters too
  }
  uffd.reset();
  if (pagemap_fd >= 0) ::close(pagemap_fd);
  mapping = platform::Mapping();  // unmapped before the store goes
  // Frees every pool object, and gives the written-back blocks back to the
  // backing store (which the options keep alive until after this).
  store.reset();
}

void Region::Impl::LogError(const Status& st) noexcept {
  if (logged_error) return;
  logged_error = true;
  // Status::ToString's form, without its allocation.
  const std::string_view code = StatusCodeName(st.code());
  std::fprintf(stderr, "ztier region: %.*s: %s\n",
               static_cast<int>(code.size()), code.data(),
               st.message().c_str());
}

void Region::Impl::LogOutOfMemory(const char* what) noexcept {
  if (logged_error) return;
  logged_error = true;
  std::fprintf(stderr,
               "ztier region: out of memory in the %s; the pages not stored "
               "stay resident\n",
               what);
}

Result<std::unique_ptr<Region>> Region::Create(const RegionOptions& options) {
  std::unique_ptr<Region> region(new Region());
  ZT_RETURN_IF_ERROR(region->impl_->Init(options, nullptr));
  return region;
}

Status Region::Impl::Init(const RegionOptions& given, const UffdWrap& wrap) {
  ZT_RETURN_IF_ERROR(CheckOptions(given));
  Impl& m = *this;
  m.owner = ::getpid();
  m.options = given;
  m.size = (options.size + kPageSize - 1) & ~(kPageSize - 1);
  m.num_pages = m.size / kPageSize;
  if (options.budget != 0) {
    m.budget_pages = std::max<std::size_t>(1, options.budget / kPageSize);
  }
  const std::uint64_t basis = options.budget != 0 ? options.budget : m.size;
  m.pool_limit = options.max_pool_bytes != 0
                     ? options.max_pool_bytes
                     : Percent(basis, options.max_pool_percent);
  m.pool_accept = Percent(m.pool_limit, options.accept_threshold_percent);
  m.pages = internal::PageMap(m.num_pages);
  m.staging = std::make_unique<std::byte[]>(Impl::kMaxWindow * kPageSize);
  m.zeros = std::make_unique<std::byte[]>(Impl::kZeroWindow * kPageSize);
  m.evict_copy = std::make_unique_for_overwrite<std::byte[]>(
      std::min(Impl::kEvictChunk, m.num_pages) * kPageSize);

  PageStoreOptions so;
  so.num_pages = m.num_pages;
  so.codec = options.codec;
  so.algorithm_params = options.algorithm_params;
  so.batch_backend = options.batch_backend;
  so.batch_size = options.batch_size;
  so.store_incompressible = options.backing != nullptr;
  so.backing = options.backing;
  so.mem_limit = 0;  // the region applies the pool limit, with hysteresis
  // The threads made from here on (the store's workers, the handler) run
  // with every signal blocked: a program's signal handler run on one of
  // them, touching the region, would wait on a fault only it can resolve.
  const platform::SignalsBlocked no_signals;
  ZT_ASSIGN_OR_RETURN(m.store, PageStore::Create(so));

  ZT_ASSIGN_OR_RETURN(m.mapping,
                      platform::Mapping::Anonymous(
                          m.size, platform::Commit::kUnlocked,
                          "mmap " + std::to_string(m.size) + " bytes"));
  m.base = m.mapping.data();
  // Faults and evictions work in 4 KiB pages; a huge page would be one
  // 2 MiB fault. Failure (THP compiled out) is harmless.
  platform::Advise(m.base, m.size, platform::Advice::kNoHugePages)
      .IgnoreError();
  // A fork()ed child would get the mapping without our registration, and
  // read every evicted page as zeros. Not inheriting it at all is honest:
  // a child that touches it faults (SIGSEGV) instead of reading wrong data.
  ZT_RETURN_IF_ERROR(
      platform::Advise(m.base, m.size, platform::Advice::kDontFork));

  ZT_ASSIGN_OR_RETURN(m.uffd, internal::OpenUserfaultfd());
  if (wrap) m.uffd = wrap(std::move(m.uffd));
  ZT_RETURN_IF_ERROR(m.uffd->Register(m.base, m.size));
  m.registered = true;
  ZT_ASSIGN_OR_RETURN(m.stop, platform::EventFd::Create());
  // Without it (no /proc) eviction trusts the page map (evict.cc).
  m.pagemap_fd = ::open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
  // Out of descriptors (or memory) is no reason to run without the two
  // files: without both, an eviction over a page the application dropped
  // reads it in place and waits for good on its own fault. Create fails
  // instead, as for the userfaultfd itself.
  if (m.pagemap_fd < 0 && (errno == EMFILE || errno == ENFILE ||
                           errno == ENOMEM)) {
    return PosixError("open /proc/self/pagemap", errno);
  }
  // Without it eviction reads the pages in place, and a page the
  // application drops meanwhile hangs it (evict.cc, step 2).
  if (auto mem = platform::OwnMemory::Open(); mem.has_value()) {
    m.own_memory = std::move(*mem);
  } else if (mem.error().code() == StatusCode::kResourceExhausted) {
    return mem.error();
  } else {
    m.LogError(Status(mem.error().code(),
                      mem.error().message() +
                          " (eviction reads pages in place: a page the "
                          "application dropped with madvise hangs it; "
                          "drop pages with Region::Discard)"));
  }
  m.handler = std::thread([&m] { m.HandlerLoop(); });
  return Status::Ok();
}

std::byte* Region::data() const { return impl_->base; }
std::size_t Region::size() const { return impl_->size; }

Status Region::Impl::PageRange(const void* addr, std::size_t len,
                               const char* what, std::size_t* first,
                               std::size_t* last) const {
  if (owner != ::getpid()) {
    return Status::FailedPrecondition(
        std::string(what) + " in a fork()ed child: only the process that "
                            "made the region may use it");
  }
  const std::uintptr_t a = reinterpret_cast<std::uintptr_t>(addr);
  const std::uintptr_t lo = Addr(0);
  if (a < lo || a - lo > size || len > size - (a - lo)) {
    return Status::OutOfRange(std::string(what) +
                              " range is not inside the region");
  }
  // An empty range is no page, as madvise does nothing for it.
  *first = (a - lo) / kPageSize;
  *last = len == 0 ? *first : (a - lo + len + kPageSize - 1) / kPageSize;
  return Status::Ok();
}

void Region::Impl::ForgetStored(std::size_t p) {
  // Discard frees the slot first; what may throw after (std::bad_alloc in
  // the reclaim of a unit it left sparse) leaves that unit to a later free
  // (store/units.cc), and must not stop the caller's bookkeeping.
  Status d = NoThrow("discard", [&] { return store->Discard(p); });
  d.IgnoreError();  // only kOutOfRange, and p is in range
  Drop(pages.test(p, internal::PageMap::kWrittenBack) ? c.written_back
                                                      : c.stored);
  pages.clear(p, internal::PageMap::kWrittenBack);
}

Status Region::Pageout(void* addr, std::size_t len) {
  Impl& m = *impl_;
  std::size_t first = 0, last = 0;
  ZT_RETURN_IF_ERROR(m.PageRange(addr, len, "Pageout", &first, &last));
  std::vector<std::uint32_t> victims;
  std::lock_guard<std::mutex> lock(m.mu);
  for (std::size_t i = first; i < last; ++i) {
    if (m.pages.is(i, internal::PageState::kResident)) {
      victims.push_back(static_cast<std::uint32_t>(i));
    }
  }
  if (victims.empty()) return Status::Ok();
  Bump(m.c.evictions);
  m.Evict(victims);  // refusals are counted, and not an error
  return Status::Ok();
}

Status Region::Discard(void* addr, std::size_t len) {
  Impl& m = *impl_;
  std::size_t first = 0, last = 0;
  ZT_RETURN_IF_ERROR(m.PageRange(addr, len, "Discard", &first, &last));
  if ((reinterpret_cast<std::uintptr_t>(addr) - m.Addr(0)) % kPageSize != 0) {
    return Status::InvalidArgument("Discard address is not page-aligned");
  }
  if (first == last) return Status::Ok();
  std::lock_guard<std::mutex> lock(m.mu);
  // Under mu no eviction or fault-in runs: a page's state cannot change
  // until the map says it is untouched, and a touch meanwhile waits in a
  // missing fault that then maps zeros.
  ZT_RETURN_IF_ERROR(platform::Advise(reinterpret_cast<void*>(m.Addr(first)),
                                      (last - first) * kPageSize,
                                      platform::Advice::kDiscard));
  for (std::size_t i = first; i < last; ++i) {
    switch (m.pages.state(i)) {
      case internal::PageState::kUntouched:
      case internal::PageState::kPoisoned:
        continue;
      case internal::PageState::kResident:
        Drop(m.c.resident);
        break;
      case internal::PageState::kStored:
        m.ForgetStored(i);
        break;
    }
    m.pages.set_state(i, internal::PageState::kUntouched);
    m.pages.clear(i, internal::PageMap::kRef | internal::PageMap::kReadAhead |
                         internal::PageMap::kRefused);
  }
  return Status::Ok();
}

RegionStats Region::Stats() const {
  const Impl& m = *impl_;
  if (m.owner != ::getpid()) return RegionStats{};  // a fork()ed child's copy
  const PageStoreStats ss = m.store->Stats();
  const RegionCounters& c = m.c;
  RegionStats r;
  r.pool_limit_hit = Read(c.pool_limit_hit);
  r.reject_reclaim_fail = Read(c.reject_reclaim_fail);
  r.reject_alloc_fail = ss.reject_alloc_fail;
  r.reject_compress_fail = ss.reject_compress_fail;
  r.reject_compress_poor = ss.reject_compress_poor;
  r.written_back_pages = Read(c.zswpwb);
  r.pool_total_size = ss.pool_total_size;
  r.stored_pages = Read(c.stored);
  r.stored_incompressible_pages = ss.huge_pages;
  r.zswpin = Read(c.zswpin);
  r.zswpout = Read(c.zswpout);
  r.zswpwb = Read(c.zswpwb);
  r.swap_ra = Read(c.swap_ra);
  r.swap_ra_hit = Read(c.swap_ra_hit);
  r.resident_pages = Read(c.resident);
  r.written_back_now = Read(c.written_back);
  r.faults = Read(c.faults);
  r.wp_faults = Read(c.wp_faults);
  r.evictions = Read(c.evictions);
  r.swpout_fallback = Read(c.swpout_fallback);
  return r;
}

}  // namespace ztier
