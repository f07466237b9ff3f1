// File: tools/ztier/bench_zram_compare_io.h
//
// The IO drivers of `ztier bench zram-compare` that issue one pattern with
// the same data on both sides: RunKernelIo on the kernel's zram device
// through io_uring or pread/pwrite (O_DIRECT), RunLibraryIo on a ztier
// Device through the library (Device::Write/Read, what `ztier serve` calls
// per NBD request).
// fio (bench_fio.h) is the third driver, for reference.
//
//   auto data = DataPages::From({&corpus}, 0);
//   IoPattern p{.random = true, .block_bytes = 4096, .depth = 32,
//               .threads = 2, .area_bytes = 256 << 20, .seconds = 1};
//   auto k = RunKernelIo("/dev/zram0", p, *data);
//   auto z = RunLibraryIo(device, p, *data);   // k->iops() vs z->iops()
//
// The pattern: `threads` threads, thread t on its own share of the area,
// bytes [t * S, (t + 1) * S) with S = ShareBytes(p), in blocks of
// block_bytes: random (a block drawn uniformly from the share by a
// splitmix64 generator seeded with t + 1, the same sequence on both sides)
// or sequential (the share's blocks in order, wrapping). Timed patterns run
// for `seconds` from a common start (every thread set up first: device
// opened, ring and buffers made); seconds == 0 is one sequential pass over
// each share (a fill). Figures: operations done / wall time from the start
// until the last thread ends.
//
// The data: area page p holds data page p % count() after a fill, and a
// write of a block writes exactly what a fill wrote there (so a run leaves
// the content as the fill left it, and the compression work of a write is
// that of the corpus pages). Reads land in per-thread buffers.
//
// Queue depth: a kernel thread keeps `depth` IOs in flight on its own ring
// (submit, wait for one completion, reap all completed, resubmit; fio's
// io_uring engine with its default batching). zram completes an IO within
// the submitting call, so depth buys no parallelism there; it amortises the
// system call over up to `depth` IOs. A library call is synchronous and has
// no system call to amortise: a library thread makes its requests one after
// another at any depth (and random single pages have no batch API: a Device
// write is page by page, as zram's), so `depth` does not change what it
// does.
//
// Thread safety: the functions start and join their own threads; call one
// at a time.
#ifndef ZTIER_TOOLS_ZTIER_BENCH_ZRAM_COMPARE_IO_H_
#define ZTIER_TOOLS_ZTIER_BENCH_ZRAM_COMPARE_IO_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "bench_fio.h"
#include "corpus/corpus.h"
#include "ztier/device.h"
#include "ztier/status.h"

namespace ztier::tool {

// The largest block (128 KiB), in pages: areas, shares and data come in
// whole blocks of it.
inline constexpr std::size_t kMaxBlockPages = 32;

// Frees memory from std::aligned_alloc (a unique_ptr deleter).
struct AlignedFree {
  void operator()(std::byte* p) const;
};

// The pages every driver writes: the corpus pages one after another in one
// 4096-aligned buffer (O_DIRECT writes point straight into it), cut to a
// whole number of 128 KiB blocks.
class DataPages {
 public:
  // The first `max_pages_each` pages of each set (0: all of them).
  // kInvalidArgument when fewer than kMaxBlockPages pages result.
  static Result<DataPages> From(std::span<const corpus::PageSet* const> sets,
                                std::size_t max_pages_each);

  std::size_t count() const { return count_; }
  // What area page `p` holds after a fill (data page p % count()); the
  // pages after it in memory are area pages p + 1, ... up to the end of its
  // 128 KiB block.
  const std::byte* ForAreaPage(std::uint64_t p) const;

 private:
  std::unique_ptr<std::byte, AlignedFree> bytes_;
  std::size_t count_ = 0;
};

struct IoPattern {
  bool random = true;
  bool writes = false;
  std::uint32_t block_bytes = 4096;  // a multiple of 4096, at most 128 KiB
  std::uint32_t depth = 1;
  std::size_t threads = 1;
  std::uint64_t area_bytes = 0;  // a multiple of 128 KiB
  double seconds = 1;            // 0: one sequential pass (a fill)
  // RunKernelIo only: pread/pwrite, one after another (depth is ignored),
  // instead of io_uring.
  bool sync = false;
};

// Each thread's share: area_bytes / threads, rounded down to 128 KiB.
std::uint64_t ShareBytes(const IoPattern& p);

struct IoResult {
  std::uint64_t ops = 0;
  std::uint64_t bytes = 0;
  double seconds = 0;
  double iops() const { return seconds > 0 ? ops / seconds : 0; }
  double mb_s() const { return seconds > 0 ? bytes / seconds / 1e6 : 0; }
};

// The pattern on the block device `dev_path` (opened O_DIRECT by each
// thread), one io_uring of `depth` entries per thread, or with p.sync one
// pread/pwrite after another (the kernel's own cost of an IO done in the
// calling thread: zram does not take IOs without blocking (no nowait), so
// io_uring hands each one to an io-wq worker thread). Errors: the open,
// io_uring setup, or an IO that fails or is short (the first one; the ring
// is drained before returning).
Result<IoResult> RunKernelIo(const std::string& dev_path, const IoPattern& p,
                             const DataPages& data);

// The pattern through `device` (initialised, at least area_bytes large).
// The first failing call's error is returned.
Result<IoResult> RunLibraryIo(Device& device, const IoPattern& p,
                              const DataPages& data);

// Reads every `stride`-th page of the area with `read` (offset, one page
// out) and compares it with what a fill wrote there. kCorruption naming the
// first page that differs.
using PageReader =
    std::function<Status(std::uint64_t offset, std::span<std::byte> out)>;
Status VerifyArea(const PageReader& read, std::uint64_t area_bytes,
                  const DataPages& data, std::uint64_t stride);

// A PageReader of the block device at `dev_path` (pread, O_DIRECT). The
// device stays open while the reader lives.
Result<PageReader> KernelPageReader(const std::string& dev_path);

// The pattern of fio job `job` on `threads` threads for `seconds`.
IoPattern PatternFor(const bench::NbdJob& job, std::size_t threads,
                     std::uint64_t area_bytes, std::int64_t seconds);

// fio's command line for the same pattern: `job` with --numjobs=THREADS,
// each job on its own share (--size and --offset_increment of
// ShareBytes). NbdFioArgs: bench nbd's line (FioJobArgs: the nbd engine on
// `uri`, fio's half-compressible buffers). KernelFioArgs: that line with
// the engine swapped for --ioengine=io_uring --direct=1 --filename=DEV.
std::vector<std::string> NbdFioArgs(const std::string& fio_path,
                                    const bench::NbdJob& job,
                                    std::size_t threads,
                                    std::uint64_t area_bytes,
                                    std::int64_t seconds,
                                    const std::string& uri);
std::vector<std::string> KernelFioArgs(const std::string& fio_path,
                                       const bench::NbdJob& job,
                                       std::size_t threads,
                                       std::uint64_t area_bytes,
                                       std::int64_t seconds,
                                       const std::string& dev_path);

}  // namespace ztier::tool

#endif  // ZTIER_TOOLS_ZTIER_BENCH_ZRAM_COMPARE_IO_H_
