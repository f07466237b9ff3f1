// File: device/no_alloc_test.cc
//
// The IO path of a preallocated device (DeviceDefaults::prealloc, what
// `ztier serve --mlock` runs) does not allocate: after a warm-up, many
// Device Read/Write/Trim/WriteZeroes/Flush calls (whole pages, several
// pages, pieces of pages, across page boundaries; every codec) make no heap
// allocation at all. A swap device's server must not need memory to serve.
//
// How: in builds without a sanitizer (which bring their own), this binary
// replaces malloc, calloc, realloc and the aligned allocators, so that C
// libraries (the codecs) are counted too, and operator new
// (testing/failing_new.cc, over malloc) with them; under a sanitizer,
// operator new alone is counted, through failing_new.h's hook. Counting is on
// only around the measured loop. The first allocation counted records its call
// stack, printed on failure.
//
// Also: the refusals of a full device (mem_limit reached) do not allocate
// either, nor do overwrites and trims of pages written back to a backing
// store that takes discards (a remote one), and a device's mm_stat is the
// same with and without preallocation.
#include <execinfo.h>
#include <malloc.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "testing/discarding_file.h"
#include "testing/failing_new.h"
#include "testing/test_util.h"
#include "ztier/device.h"

// ---- the counting allocator
// --------------------------------------------------

namespace {

std::atomic<bool> g_counting{false};
std::atomic<long> g_allocations{0};
void* g_first_stack[32];
std::atomic<int> g_first_depth{0};

void Count() {
  if (!g_counting.load(std::memory_order_relaxed)) return;
  if (g_allocations.fetch_add(1, std::memory_order_relaxed) == 0) {
    // backtrace() does not allocate once libgcc is loaded (see main).
    g_first_depth.store(backtrace(g_first_stack, 32));
  }
}

}  // namespace

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define ZTIER_COUNT_MALLOC 0
#else
#define ZTIER_COUNT_MALLOC 1
extern "C" {
void* __libc_malloc(size_t);
void* __libc_calloc(size_t, size_t);
void* __libc_realloc(void*, size_t);
void* __libc_memalign(size_t, size_t);

void* malloc(size_t n) {
  Count();
  return __libc_malloc(n);
}
void* calloc(size_t n, size_t size) {
  Count();
  return __libc_calloc(n, size);
}
void* realloc(void* p, size_t n) {
  Count();
  return __libc_realloc(p, n);
}
void* memalign(size_t align, size_t n) {
  Count();
  return __libc_memalign(align, n);
}
void* aligned_alloc(size_t align, size_t n) {
  Count();
  return __libc_memalign(align, n);
}
int posix_memalign(void** out, size_t align, size_t n) {
  Count();
  void* p = __libc_memalign(align, n);
  if (p == nullptr) return ENOMEM;
  *out = p;
  return 0;
}
}  // extern "C"
#endif

namespace ztier {
namespace {

// Counts allocations made while alive; prints the first one's stack.
class CountAllocations {
 public:
  CountAllocations() {
    g_allocations.store(0);
    g_first_depth.store(0);
    g_counting.store(true);
  }
  ~CountAllocations() { Stop(); }
  long Stop() {
    g_counting.store(false);
    return g_allocations.load();
  }
  static void PrintFirst() {
    const int depth = g_first_depth.load();
    if (depth == 0) return;
    std::fprintf(stderr, "first allocation counted, at:\n");
    backtrace_symbols_fd(g_first_stack, depth, STDERR_FILENO);
  }
};

constexpr std::size_t kPage = 4096;
constexpr std::size_t kPages = 2048;  // the working set: 8 MiB

// A page of one of five kinds: zeros, a fill word, text-like, small
// integers, random bytes (stored raw).
void MakePage(std::mt19937_64& rng, std::byte* out) {
  switch (rng() % 5) {
    case 0:
      std::memset(out, 0, kPage);
      break;
    case 1: {
      const std::uint64_t w = rng();
      for (std::size_t i = 0; i < kPage; i += 8) std::memcpy(out + i, &w, 8);
      break;
    }
    case 2: {
      static const char* const kWords[] = {"swap ", "page ", "ztier ",
                                           "compressed ", "memory "};
      std::size_t i = 0;
      while (i < kPage) {
        const char* w = kWords[rng() % 5];
        const std::size_t n = std::min(std::strlen(w), kPage - i);
        std::memcpy(out + i, w, n);
        i += n;
      }
      break;
    }
    case 3:
      for (std::size_t i = 0; i < kPage; i += 4) {
        const std::uint32_t v = rng() % 200;
        std::memcpy(out + i, &v, 4);
      }
      break;
    default:
      for (std::size_t i = 0; i < kPage; i += 8) {
        const std::uint64_t v = rng();
        std::memcpy(out + i, &v, 8);
      }
  }
}

std::shared_ptr<Device> NewDevice(const std::string& codec, bool prealloc,
                                  std::uint64_t mem_limit,
                                  std::uint64_t disksize,
                                  std::size_t unit_pages = 0) {
  DeviceDefaults d;
  d.comp_algorithm = codec;
  d.mem_limit = mem_limit;
  d.prealloc = prealloc;
  d.streams = 2;
  d.unit_pages = unit_pages;
  auto dev = std::make_shared<Device>("zram0", d);
  const Status s = dev->SetDisksize(disksize);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return s.ok() ? dev : nullptr;
}

// One random IO against the device and the shadow copy of its first
// kPages pages; checks every read against the shadow.
struct Workload {
  Device& dev;
  std::vector<std::byte>& shadow;
  std::vector<std::byte>& buf;  // 16 pages
  std::mt19937_64 rng{301};

  bool Step() {
    const std::uint64_t page = rng() % (kPages - 16);
    std::byte* const sh = shadow.data() + page * kPage;
    switch (rng() % 9) {
      case 0:  // one page
        MakePage(rng, buf.data());
        std::memcpy(sh, buf.data(), kPage);
        return dev.Write(page * kPage, {buf.data(), kPage}).ok();
      case 1: {  // several pages, page by page or batched (WritePages,
                 // the ublk front end's write path)
        const std::size_t n = 2 + rng() % 15;
        for (std::size_t i = 0; i < n; ++i)
          MakePage(rng, buf.data() + i * kPage);
        std::memcpy(sh, buf.data(), n * kPage);
        const std::span<const std::byte> data(buf.data(), n * kPage);
        return (rng() % 2 ? dev.WritePages(page * kPage, data)
                          : dev.Write(page * kPage, data))
            .ok();
      }
      case 2: {  // a piece of a page, maybe across into the next
        const std::size_t off = rng() % kPage;
        const std::size_t len = 1 + rng() % kPage;
        for (std::size_t i = 0; i < len; ++i) {
          buf[i] = static_cast<std::byte>(rng() % 4);
        }
        std::memcpy(sh + off, buf.data(), len);
        return dev.Write(page * kPage + off, {buf.data(), len}).ok();
      }
      case 3:
      case 4: {  // read: one page, several, or a piece
        const std::size_t off = rng() % 2 ? 0 : rng() % kPage;
        const std::size_t len =
            rng() % 2 ? kPage * (1 + rng() % 16) - off : 1 + rng() % kPage;
        if (!dev.Read(page * kPage + off, {buf.data(), len}).ok()) return false;
        return std::memcmp(buf.data(), sh + off, len) == 0;
      }
      case 5: {  // trim: whole pages inside the range only
        const std::size_t off = rng() % kPage;
        const std::size_t len = rng() % (8 * kPage);
        const std::uint64_t a = page * kPage + off;
        const std::uint64_t first = (a + kPage - 1) / kPage;
        const std::uint64_t end = (a + len) / kPage;
        for (std::uint64_t p = first; p < end; ++p) {
          std::memset(shadow.data() + p * kPage, 0, kPage);
        }
        return dev.Trim(a, len).ok();
      }
      case 6:
      case 7: {  // write zeroes, unaligned, hole or not
        const std::size_t off = rng() % kPage;
        const std::size_t len = rng() % (8 * kPage);
        std::memset(sh + off, 0, len);
        return dev.WriteZeroes(page * kPage + off, len, rng() % 2).ok();
      }
      default:
        return dev.Flush().ok();
    }
  }
};

// The codec, and multi-page objects (DeviceDefaults::unit_pages) or not.
class NoAllocTest
    : public ::testing::TestWithParam<std::tuple<std::string, std::size_t>> {};

TEST_P(NoAllocTest, SteadyStateIoDoesNotAllocate) {
  const auto [codec, unit_pages] = GetParam();
  auto dev =
      NewDevice(codec, /*prealloc=*/true, 32 << 20, 64 << 20, unit_pages);
  ASSERT_NE(dev, nullptr);
  std::vector<std::byte> shadow(kPages * kPage);
  std::vector<std::byte> buf(16 * kPage);
  Workload w{*dev, shadow, buf};
  // Warm-up: every page written once, then a mix of everything, so that
  // this thread has its decompressor and the device has seen each kind
  // of request.
  for (std::size_t p = 0; p < kPages; ++p) {
    MakePage(w.rng, shadow.data() + p * kPage);
    ASSERT_OK(dev->Write(p * kPage, {shadow.data() + p * kPage, kPage}));
  }
  // With units, every aligned run again as one object (WritePages), so
  // that the random mix below detaches pages from units and reclaims them.
  if (unit_pages != 0) ASSERT_OK(dev->WritePages(0, shadow));
  for (int i = 0; i < 2000; ++i) ASSERT_TRUE(w.Step()) << "warm-up op " << i;

  int failed_op = -1;
  long allocations = 0;
  {
    CountAllocations count;
    for (int i = 0; i < 20000 && failed_op < 0; ++i) {
      if (!w.Step()) failed_op = i;
    }
    allocations = count.Stop();
  }
  EXPECT_EQ(failed_op, -1) << "an IO failed or read back wrong data";
  EXPECT_EQ(allocations, 0) << "heap allocations in 20000 IOs";
  if (allocations != 0) CountAllocations::PrintFirst();
  const PageStoreStats st = dev->Stats();
  EXPECT_GT(st.stores, 20000u);
  EXPECT_GT(st.loads, 10000u);
  EXPECT_LE(st.mem_used_total, st.mem_limit);
}

INSTANTIATE_TEST_SUITE_P(
    Codecs, NoAllocTest,
    ::testing::Combine(::testing::Values("lz4", "zstd", "deflate", "lzo",
                                         "lz4hc"),
                       ::testing::Values(std::size_t{0}, std::size_t{16})),
    [](const auto& p) {
      const std::size_t units = std::get<1>(p.param);
      return std::get<0>(p.param) +
             (units != 0 ? "Units" + std::to_string(units) : "");
    });

// The counter is real: a plain heap allocation is seen.
TEST(NoAllocCounterTest, CountsAnAllocation) {
  long n = 0;
  {
    CountAllocations count;
    auto* p = new std::vector<int>(100);
    n = count.Stop();
    delete p;
  }
  EXPECT_GE(n, 2);  // the vector and its buffer
#if ZTIER_COUNT_MALLOC
  {
    CountAllocations count;
    void* p = std::malloc(64);
    n = count.Stop();
    std::free(p);
  }
  EXPECT_EQ(n, 1);
#endif
}

// Overwriting or trimming a page that was written back frees its block;
// with a remote backing store the block waits for its discard, and
// queueing it takes no memory either.
TEST(NoAllocWrittenBackTest, FreeingRemoteBlocksDoesNotAllocate) {
  DeviceDefaults d;
  d.comp_algorithm = "lz4";
  d.mem_limit = 32 << 20;
  d.prealloc = true;
  d.streams = 2;
  d.is_remote_backing = [](std::string_view v) {
    return v.starts_with("mem:");
  };
  d.open_remote_backing = [](const std::string&, std::uint64_t)
      -> Result<std::shared_ptr<BackingFile>> {
    return std::make_shared<testing::DiscardingFile>(std::uint64_t{16} << 20);
  };
  auto dev = std::make_shared<Device>("zram0", d);
  ASSERT_OK(dev->SetBackingDev("mem:remote"));
  ASSERT_OK(dev->SetDisksize(64 << 20));
  std::mt19937_64 rng(11);
  std::vector<std::byte> page(kPage);
  for (std::size_t p = 0; p < kPages; ++p) {
    MakePage(rng, page.data());
    ASSERT_OK(dev->Write(p * kPage, {page.data(), kPage}));
  }
  ASSERT_OK(dev->MarkIdle("all"));
  WritebackResult wb;
  ASSERT_OK(dev->Writeback("idle", &wb));
  ASSERT_GT(wb.written, kPages / 4);
  ASSERT_OK(dev->Write(0, {page.data(), kPage}));  // warm-up
  long allocations = 0;
  {
    CountAllocations count;
    for (std::size_t p = 1; p < kPages; ++p) {
      const Status s = p % 4 == 0 ? dev->Trim(p * kPage, kPage)
                                  : dev->Write(p * kPage, {page.data(), kPage});
      if (!s.ok()) {
        ADD_FAILURE() << "page " << p << ": " << s.ToString();
        break;
      }
    }
    allocations = count.Stop();
  }
  EXPECT_EQ(allocations, 0);
  if (allocations != 0) CountAllocations::PrintFirst();
  EXPECT_EQ(dev->Stats().bd_count, 0u);  // every block freed
}

// A full device refuses writes (ENOSPC on the wire) without allocating
// either: that is what a swap device at its limit does all day. Reaching
// the limit logs a line (as `ztier serve` has a log): made without
// allocating too.
TEST(NoAllocFullDeviceTest, RefusalsDoNotAllocate) {
  std::atomic<int> lines{0};
  DeviceDefaults d;
  d.comp_algorithm = "lz4";
  d.mem_limit = 2 << 20;
  d.prealloc = true;
  d.streams = 2;
  d.log = [&lines](std::string_view line) {
    if (line.find("mem_limit reached") != std::string_view::npos) ++lines;
  };
  auto dev = std::make_shared<Device>("zram0", d);
  ASSERT_OK(dev->SetDisksize(64 << 20));
  std::mt19937_64 rng(5);
  std::vector<std::byte> page(kPage);
  const auto random_page = [&] {
    for (std::size_t i = 0; i < kPage; i += 8) {
      const std::uint64_t v = rng();
      std::memcpy(page.data() + i, &v, 8);
    }
  };
  // Warm-up: the first writes of a thread make its buffers.
  for (std::uint64_t p = 0; p < 16; ++p) {
    random_page();
    ASSERT_OK(dev->Write(p * kPage, {page.data(), kPage}));
  }
  ASSERT_OK(dev->Trim(0, 16 * kPage));
  long allocations = 0;
  std::uint64_t p = 0;
  {
    CountAllocations count;
    for (;; ++p) {  // random pages (stored raw) until the limit
      random_page();
      const Status s = dev->Write(p * kPage, {page.data(), kPage});
      if (!s.ok()) {
        ASSERT_EQ(s.code(), StatusCode::kResourceExhausted) << s.ToString();
        break;
      }
      ASSERT_LT(p, 1000u) << "mem_limit never reached";
    }
    for (int i = 0; i < 1000; ++i) {
      if (dev->Write((p + i % 100) * kPage, {page.data(), kPage}).code() !=
          StatusCode::kResourceExhausted) {
        ADD_FAILURE() << "a write past the limit did not fail";
        break;
      }
    }
    allocations = count.Stop();
  }
  EXPECT_EQ(allocations, 0);
  if (allocations != 0) CountAllocations::PrintFirst();
  EXPECT_EQ(lines.load(), 1);
  EXPECT_GE(dev->Stats().pool_limit_hit, 1000u);
}

// Preallocation changes where memory comes from, not what mm_stat says.
TEST(PreallocMmStatTest, SameWithAndWithoutPrealloc) {
  auto with = NewDevice("lz4", true, 16 << 20, 32 << 20);
  auto without = NewDevice("lz4", false, 16 << 20, 32 << 20);
  ASSERT_NE(with, nullptr);
  ASSERT_NE(without, nullptr);
  std::vector<std::byte> s1(kPages * kPage), s2(kPages * kPage);
  std::vector<std::byte> b1(16 * kPage), b2(16 * kPage);
  Workload w1{*with, s1, b1};
  Workload w2{*without, s2, b2};
  for (int i = 0; i < 5000; ++i) {
    ASSERT_TRUE(w1.Step());
    ASSERT_TRUE(w2.Step());
    if (i % 500 == 0) {
      ASSERT_EQ(with->ShowMmStat(), without->ShowMmStat()) << i;
    }
  }
  ASSERT_OK(with->Compact());
  ASSERT_OK(without->Compact());
  EXPECT_EQ(with->ShowMmStat(), without->ShowMmStat());
  EXPECT_NE(with->Stats().mem_used_total, 0u);
}

}  // namespace
}  // namespace ztier

// backtrace() loads libgcc on its first call, which allocates: do it now.
static const int kWarmBacktrace = [] {
  void* frames[2];
  return backtrace(frames, 2);
}();

// Under a sanitizer malloc is not replaced here: operator new is counted.
static const bool kCountNew = [] {
  if (!ZTIER_COUNT_MALLOC) ztier::testing::SetNewHook(&Count);
  return true;
}();
