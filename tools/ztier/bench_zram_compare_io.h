// File: tools/ztier/bench_zram_compare_io.h
//
// The IO drivers of `ztier bench zram-compare`, one pattern with the same
// data on both sides: RunKernelIo on the kernel's zram device (O_DIRECT,
// io_uring or pread/pwrite), RunLibraryIo on a ztier Device (Write/Read,
// what `ztier serve` calls per NBD request); fio (bench_fio.h) is the third.
//
//   IoPattern p{.random = true, .block_bytes = 4096, .depth = 32,
//               .threads = 2, .area_bytes = 256 << 20, .seconds = 1};
//   auto k = RunKernelIo("/dev/zram0", p, data);  // k->iops() vs
//   auto z = RunLibraryIo(device, p, data);       // z->iops()
//
// Thread t works on its own share of the area, [t * S, (t + 1) * S) with
// S = ShareBytes(p), in blocks of block_bytes: random (drawn by a
// splitmix64 generator seeded with t + 1, the same on both sides) or
// sequential (wrapping). Timed patterns run `seconds` from a common start,
// after every thread is set up; seconds == 0 is one sequential pass over
// each share (a fill). Figures: operations / wall time until the last
// thread ends. Area page p holds data page p % count() after a fill, and a
// write writes what the fill wrote there (the corpus pages' compression
// work).
//
// Queue depth: a kernel io_uring thread keeps `depth` IOs in flight
// (submit, wait for one, reap all, resubmit: fio's io_uring engine). zram
// completes an IO within the submitting call, so depth only amortises the
// system call. A library call is synchronous with no system call to
// amortise: a library or pread/pwrite thread makes its calls one after
// another at any depth.
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

struct AlignedFree {  // a unique_ptr deleter for std::aligned_alloc memory
  void operator()(std::byte* p) const;
};

// The corpus pages one after another in one 4096-aligned buffer (O_DIRECT
// writes point into it), cut to whole 128 KiB blocks.
class DataPages {
 public:
  // The first `max_pages_each` pages of each set (0: all). kInvalidArgument
  // when fewer than kMaxBlockPages pages result.
  static Result<DataPages> From(std::span<const corpus::PageSet* const> sets,
                                std::size_t max_pages_each);

  std::size_t count() const { return count_; }
  // Area page `p` after a fill (data page p % count()); the rest of its
  // 128 KiB block follows in memory.
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
  bool sync = false;  // RunKernelIo: pread/pwrite instead of io_uring
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

// The pattern on the block device `dev_path`, opened O_DIRECT per thread.
// Errors: the open, io_uring setup, or the first IO that fails or is short
// (the ring drained first).
Result<IoResult> RunKernelIo(const std::string& dev_path, const IoPattern& p,
                             const DataPages& data);

// The pattern through `device` (at least area_bytes large); the first
// failing call's error.
Result<IoResult> RunLibraryIo(Device& device, const IoPattern& p,
                              const DataPages& data);

// Reads every `stride`-th page of the area with `read` and compares it with
// what a fill wrote there; kCorruption naming the first that differs.
using PageReader =
    std::function<Status(std::uint64_t offset, std::span<std::byte> out)>;
Status VerifyArea(const PageReader& read, std::uint64_t area_bytes,
                  const DataPages& data, std::uint64_t stride);

// A PageReader of the block device at `dev_path` (pread, O_DIRECT), open
// while the reader lives.
Result<PageReader> KernelPageReader(const std::string& dev_path);

// The pattern of fio job `job` on `threads` threads for `seconds`.
IoPattern PatternFor(const bench::NbdJob& job, std::size_t threads,
                     std::uint64_t area_bytes, std::int64_t seconds);

// fio's line for the same pattern: `job` with --numjobs=THREADS, each on
// its own share (--size, --offset_increment). NbdFioArgs: bench nbd's line
// (FioJobArgs on `uri`); KernelFioArgs: that line with --ioengine=io_uring
// --direct=1 --filename=DEV instead of the nbd engine.
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
